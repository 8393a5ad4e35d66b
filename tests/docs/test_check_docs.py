#!/usr/bin/env python3
"""scripts/check_docs.py on a made-up tree: it fails on a dead link, dead
anchors (of the file itself and of another), a name that no listed file
holds, names of the kernel walk that no source holds, and a course time
table whose counts, blocks, estimate and total disagree with its files, and
passes once they are mended."""

import subprocess
import sys
import tempfile
from pathlib import Path

CHECKER = Path(__file__).resolve().parents[2] / "scripts" / "check_docs.py"

README = """# Stage 01: made up

See [the kernel](kernel.cu), [a figure](plot.png) and [the web](https://example.com);
[the files](#files-to-read-in-order), [a lost heading](#no-such-heading), [another's](other.md#its-heading).

## Files to read, in order

| file | what it holds |
| --- | --- |
| [kernel.cu](kernel.cu) | `row_max_kernel`, `RowTotals`, wrapped by `Helper`; `--flag` and `a + b` are not names |
| [helper.h](helper.h) | `Helper` |

## The kernels, in reading order

`row_max_kernel` reads each row, `fold_rows` folds them (`keepGoing` too); `x`, `Helper` and `--flags` are not
checked, nor `a + b`.

## Next
"""


# docs/course.md's time table: 300 README lines (1 h) and 200 exercise lines (1 h), 2 blocks (1 to 2 h): 3–4 h.
COURSE = """# Course

| session | README lines | exercise files' lines | blocks | estimate |
| --- | ---: | ---: | ---: | --- |
| 0 | the top READMEs, notebook 01 | – | – | 2–3 h, with the build |
| 1 | [300](../stages/01_made_up/README.md) | [200](../stages/01_made_up/exercise/kernel.cu) | 2 | 3–4 h |

About 5 to 7 hours in all.
"""


def course_files(stage, readme_lines, exercise_blocks):
    """The made-up stage's README padded to readme_lines lines, and an exercise file of 200 lines with the blocks."""
    text = (stage / "README.md").read_text()
    (stage / "README.md").write_text(text + "\n" * (readme_lines - len(text.splitlines())))
    (stage / "exercise").mkdir(exist_ok=True)
    body = ['CCE_EXERCISE_MISSING("01_made_up", "part");'] * exercise_blocks
    (stage / "exercise" / "kernel.cu").write_text("\n".join(body + ["//"] * (200 - exercise_blocks)) + "\n")


def run(root):
    result = subprocess.run([sys.executable, str(CHECKER), "--root", str(root)], capture_output=True, text=True)
    return result.returncode, result.stdout + result.stderr


def expect(condition, what, output):
    if not condition:
        print(f"FAILED: {what}\n{output}")
        sys.exit(1)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        stage = root / "stages" / "01_made_up"
        stage.mkdir(parents=True)
        (stage / "README.md").write_text(README)
        (stage / "kernel.cu").write_text("__global__ void row_max_kernel() {}\n")
        (stage / "helper.h").write_text("struct Helper {};\n")
        (stage / "other.md").write_text("# Other\n\n## Its heading, `renamed`\n")
        (root / "docs").mkdir()
        (root / "docs" / "course.md").write_text(COURSE.replace("[300]", "[299]").replace("| 3–4 h", "| 3–3.5 h")
                                                 .replace("| [200]", "| 200 + [200]").replace("5 to 7", "5 to 6"))
        course_files(stage, 300, 1)
        subprocess.run(["git", "init", "-q", str(root)], check=True)

        rc, out = run(root)
        expect(rc == 1, "exit 1 with a dead link and a missing name", out)
        expect("plot.png names nothing here" in out, "the dead link reported", out)
        expect("`RowTotals` is not in" in out, "the missing name reported", out)
        expect("`Helper`" not in out, "a name another listed file holds is accepted", out)
        expect("flag" not in out and "a + b" not in out, "flags and expressions are not names", out)
        expect("#no-such-heading names no heading here" in out, "a dead anchor of the same file reported", out)
        expect("other.md#its-heading names no heading of" in out, "a dead anchor of another file reported", out)
        expect("#files-to-read-in-order" not in out, "a heading's anchor is found", out)
        expect("`fold_rows` (the kernel walk)" in out, "a kernel walk's missing name reported", out)
        expect("`keepGoing` (the kernel walk)" in out, "a camel-case missing name reported", out)
        expect("`row_max_kernel` (the kernel walk)" not in out, "a name the stage holds is accepted", out)
        expect("[299](../stages/01_made_up/README.md) but the file has 300 lines" in out, "a stale count reported", out)
        expect("a number in '200 + [200]" in out, "a number that links no file reported", out)
        expect("blocks 2 but the linked exercise files hold 1" in out, "a stale block count reported", out)
        expect("the estimate '3–3.5 h' but the counts give 2.5–3 h" in out, "a stale estimate reported", out)
        expect("'About 5 to 6 hours' but the rows sum to 5 to 6.5" in out, "a stale total reported", out)
        expect("11 problems" in out, "exactly eleven problems", out)

        (stage / "plot.png").write_bytes(b"")
        (stage / "kernel.cu").write_text("struct RowTotals {};\n__global__ void row_max_kernel() {}\n")
        (stage / "fold.cuh").write_text("void fold_rows(bool keepGoing);\n")  # not linked: the stage's folder counts
        (stage / "other.md").write_text("# Other\n\n## Its heading\n")
        (stage / "README.md").write_text(README.replace(", [a lost heading](#no-such-heading)", ""))
        course_files(stage, 300, 2)
        (root / "docs" / "course.md").write_text(COURSE)
        rc, out = run(root)
        expect(rc == 0 and "0 problems" in out, "exit 0 once they are mended", out)
    print("test_check_docs.py: the checker fails on each fault and passes without them")


if __name__ == "__main__":
    main()
