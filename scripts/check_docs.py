#!/usr/bin/env python3
"""Do the docs still match the tree?

    python3 scripts/check_docs.py [--root DIR]

Two checks over the Markdown files git knows (tracked, and untracked ones that
are not ignored), each failure printed on one line (file:line: what), exit 1
on any:

1. Relative links resolve: [text](path) and ![alt](path) name a file or
   folder that exists, path.md#anchor a heading of that file and #anchor one
   of the same file (web links are not checked).
2. Every stage README's "Files to read" table names what its files hold: in
   each row, every backticked name that looks like an identifier (`dC_owner`,
   `kAutoFirstExponent`, `Stage::loss_and_gradient`; not `--flag`, not
   `a + b`) occurs as a whole word in one of the files the row links, or,
   where the row says what another file's code does with it ("the fold that
   `FoldThenKeepTile` wraps"), in one of the files the table links.
3. Every stage README's walk through its kernels (the section "The kernels,
   in reading order") names only code that exists: each backticked name with
   an underscore or a lower-then-upper case step (`misplaced_mass_kernel`,
   `keepHalf`) occurs in the stage folder's sources or in a source file the
   README links.
4. docs/course.md's table of the time a student needs counts what it says: each
   linked number in its "README lines" and "exercise files' lines" columns is
   the line count of the file it links (a bare number there is a failure),
   "blocks" is the number of exercise blocks (`CCE_EXERCISE_MISSING`) in the
   exercise files the row links, each estimate is the stated pace (300 README
   lines an hour, 200 exercise lines an hour, 30 to 60 minutes a block) rounded
   to half hours, and the sentence "About A to B hours in all" sums the rows.

Python 3 standard library only.
"""

import argparse
import re
import subprocess
import sys
from pathlib import Path

LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
TICKED = re.compile(r"`([^`]+)`")
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*)*")
FENCE = re.compile(r"^\s*(```|~~~)")


def markdown_files(root):
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.md"],
                         cwd=root, capture_output=True, text=True, check=True).stdout
    return [root / line for line in out.splitlines() if line and (root / line).is_file()]


def lines_outside_fences(text):
    """(line number, line) of the lines that are not inside ``` code blocks."""
    inside = False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            inside = not inside
            continue
        if not inside:
            yield number, line


def slug(heading):
    """GitHub's anchor of a heading: lowercase, markup and punctuation gone, spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip())  # a link's text stays
    text = text.replace("`", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(text):
    """The anchors of a Markdown file's headings (a repeated heading gets -1, -2, ... as on GitHub)."""
    seen, out = {}, set()
    for _, line in lines_outside_fences(text):
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        base = slug(match.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        out.add(base if count == 0 else f"{base}-{count}")
    return out


def link_target(raw):
    target = raw.split("#", 1)[0]
    if not target or re.match(r"^[a-z][a-z0-9+.-]*:", target):  # an anchor alone, http:, mailto:
        return None
    return target


anchor_cache = {}  # a Markdown file -> its headings' anchors


def check_links(root, path, text):
    failures = []
    for number, line in lines_outside_fences(text):
        line = re.sub(r"`[^`]*`", "", line)  # code spans hold no links
        for match in LINK.finditer(line):
            raw = match.group(1)
            if raw.startswith("#"):  # a heading of this file
                if raw[1:] not in anchor_cache.setdefault(path, anchors(text)):
                    failures.append(f"{path.relative_to(root)}:{number}: the link {raw} names no heading here")
                continue
            target = link_target(raw)
            if target is None:
                continue
            resolved = (root / target.lstrip("/")) if target.startswith("/") else (path.parent / target)
            if not resolved.exists():
                failures.append(f"{path.relative_to(root)}:{number}: the link {match.group(1)} names nothing here")
                continue
            anchor = match.group(1).partition("#")[2]
            if anchor and resolved.suffix == ".md" and resolved.is_file():
                if anchor not in anchor_cache.setdefault(resolved, anchors(resolved.read_text(errors="replace"))):
                    failures.append(f"{path.relative_to(root)}:{number}: the link {match.group(1)} names no heading "
                                    f"of {resolved.relative_to(root)}")
    return failures


def section_lines(text, is_section):
    """(line number, line) of the lines under the headings whose lowercase text is_section accepts."""
    in_section = False
    for number, line in lines_outside_fences(text):
        if line.startswith("#"):
            in_section = is_section(line.lower())
            continue
        if in_section:
            yield number, line


def linked_files(path, text):
    """The files (not folders) that the links of `text`, in the file at `path`, name."""
    out = []
    for match in LINK.finditer(text):
        target = link_target(match.group(1))
        if target is not None and (path.parent / target).is_file():
            out.append(path.parent / target)
    return out


def files_to_read_rows(text):
    """(line number, row) of the table under the heading 'Files to read'."""
    for number, line in section_lines(text, lambda heading: "files to read" in heading):
        if line.startswith("|") and not re.match(r"^\|\s*-", line):
            yield number, line


def whole_word(name, text):
    return re.search(r"(?<![A-Za-z0-9_])" + re.escape(name) + r"(?![A-Za-z0-9_])", text) is not None


def check_files_to_read(root, path, text):
    rows = []
    for number, row in files_to_read_rows(text):
        cells = [cell.strip() for cell in row.strip().strip("|").split("|")]
        if len(cells) < 2 or cells[0].lower() == "file":
            continue
        linked = linked_files(path, row)
        if linked:
            rows.append((number, cells, linked))
    read = {}
    for _, _, linked in rows:
        for p in linked:
            read.setdefault(p, p.read_text(errors="replace"))
    table = "\n".join(read.values())
    failures = []
    for number, cells, linked in rows:
        sources = "\n".join(read[p] for p in linked)
        for ticked in TICKED.findall(" | ".join(cells[1:])):
            name = ticked.strip()
            if not IDENTIFIER.fullmatch(name) or len(name) < 3:
                continue
            last = name.split("::")[-1]
            if not whole_word(last, sources) and not whole_word(last, table):
                shown = ", ".join(str(p.relative_to(root)) for p in linked)
                failures.append(f"{path.relative_to(root)}:{number}: `{name}` is not in {shown}, "
                                "nor in any file the table links")
    return failures


SOURCE_SUFFIXES = (".cu", ".cuh", ".h", ".hpp", ".cpp")


def check_kernel_walk(root, path, text):
    sources = {f for f in path.parent.iterdir() if f.suffix in SOURCE_SUFFIXES}
    sources.update(f for f in linked_files(path, text) if f.suffix in SOURCE_SUFFIXES)
    code = "\n".join(f.read_text(errors="replace") for f in sorted(sources))
    failures = []
    for number, line in section_lines(text, lambda heading: "kernels" in heading and "reading order" in heading):
        for ticked in TICKED.findall(line):
            name = ticked.strip()
            if not IDENTIFIER.fullmatch(name):
                continue
            last = name.split("::")[-1]
            if "_" not in last.strip("_") and not re.search(r"[a-z][A-Z]", last):
                continue
            if not whole_word(last, code):
                failures.append(f"{path.relative_to(root)}:{number}: `{name}` (the kernel walk) is in none of the "
                                "stage's sources nor the source files the README links")
    return failures


COURSE_TABLE_HEADER = "| session | README lines | exercise files' lines | blocks | estimate |"
NUMBER_LINK = re.compile(r"\[(\d+)\]\(([^)\s#]+)\)")
ESTIMATE = re.compile(r"^(\d+(?:\.\d+)?)–(\d+(?:\.\d+)?) h")
COURSE_TOTAL = re.compile(r"About (\d+(?:\.\d+)?) to (\d+(?:\.\d+)?) hours in all")


def half_hours(hours):
    return int(hours * 2 + 0.5) / 2


def check_course_times(root, path, text):
    """Check 4: the course's time table against the files it counts (see the module's docstring)."""
    lines = text.splitlines()
    failures, low_sum, high_sum = [], 0.0, 0.0
    if COURSE_TABLE_HEADER not in lines:
        return [f"{path.relative_to(root)}: no table headed {COURSE_TABLE_HEADER!r}"]
    start = lines.index(COURSE_TABLE_HEADER) + 2
    for number, line in enumerate(lines[start:], start + 1):
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        where = f"{path.relative_to(root)}:{number}"
        estimate = ESTIMATE.match(cells[4])
        if not estimate:
            failures.append(f"{where}: the estimate {cells[4]!r} is not 'A–B h'")
            continue
        low, high = float(estimate.group(1)), float(estimate.group(2))
        low_sum, high_sum = low_sum + low, high_sum + high
        if not NUMBER_LINK.search(cells[1]):
            continue  # sessions 0 and 9 read no counted files: their estimates are stated, not derived
        counts, exercise_files = [], []
        for column in (1, 2):
            total = 0
            for count, target in NUMBER_LINK.findall(cells[column]):
                file = (path.parent / target).resolve()
                if not file.is_file():
                    failures.append(f"{where}: {target} names no file")
                    continue
                actual = len(file.read_text(errors="replace").splitlines())
                if int(count) != actual:
                    failures.append(f"{where}: [{count}]({target}) but the file has {actual} lines")
                total += actual
                if column == 2:
                    exercise_files.append(file)
            if re.search(r"\d", NUMBER_LINK.sub("", cells[column])):
                failures.append(f"{where}: a number in {cells[column]!r} links no file it counts")
            counts.append(total)
        blocks = sum(f.read_text(errors="replace").count("CCE_EXERCISE_MISSING(") for f in exercise_files)
        if cells[3] != str(blocks):
            failures.append(f"{where}: blocks {cells[3]} but the linked exercise files hold {blocks}")
        base = counts[0] / 300 + counts[1] / 200
        want = (half_hours(base + 0.5 * blocks), half_hours(base + 1.0 * blocks))
        if (low, high) != want:
            failures.append(f"{where}: the estimate {cells[4]!r} but the counts give {want[0]:g}–{want[1]:g} h")
    total = COURSE_TOTAL.search(text)
    if total is None:
        failures.append(f"{path.relative_to(root)}: no sentence 'About A to B hours in all'")
    elif (float(total.group(1)), float(total.group(2))) != (low_sum, high_sum):
        failures.append(f"{path.relative_to(root)}: 'About {total.group(1)} to {total.group(2)} hours' but the rows "
                        f"sum to {low_sum:g} to {high_sum:g}")
    return failures


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=str(Path(__file__).resolve().parent.parent), help="the repository")
    args = parser.parse_args(argv)
    root = Path(args.root).resolve()
    failures = []
    files = markdown_files(root)
    for path in files:
        text = path.read_text(errors="replace")
        failures += check_links(root, path, text)
        if path.parent.parent.name == "stages" and path.name == "README.md":
            failures += check_files_to_read(root, path, text)
            failures += check_kernel_walk(root, path, text)
        if path == root / "docs" / "course.md":
            failures += check_course_times(root, path, text)
    for failure in failures:
        print(failure)
    print(f"check_docs.py: {len(files)} Markdown files, {len(failures)} problems")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
