#!/usr/bin/env python3
"""The stage exercises, generated from the stages' own sources.

    python3 scripts/exercise.py --write     write every stages/NN_name/exercise/<file>
    python3 scripts/exercise.py --check     the committed exercises against their solutions (ctest: cpu.exercise.drift)
    python3 scripts/exercise.py --solved    write the exercises with the solutions' blocks in them
                                            (an answer key; scripts/exercise_check.sh builds it in a copy)
    python3 scripts/exercise.py --list      the exercises and their blocks

A block of a solution file is marked by two comment lines,

    // EXERCISE(what is missing): a one-line hint
    ...the solution's lines...
    // END EXERCISE

and the exercise file, stages/NN_name/exercise/<same name>, is the solution
file with the lines between the markers replaced by one stub line,
CCE_EXERCISE_MISSING("NN_name", "what is missing") (common/exercise.h),
preceded by `return` where the block's last line returns a value; two header
lines and the include of common/exercise.h come first. The stub says what is
missing when it runs, and the exercise's ctest checks fail on that line.

--check compares each exercise file with what --write would write, except
between the markers, where the student writes: everything else (the rest of
the file, the markers themselves) must be identical, so that an exercise
never drifts from its solution. It also checks that every stage 01 to 10 has
an exercise (a marked file and exercise/README.md) and that no exercise file
is left without its solution. Prints what differs and exits 1.

Python 3 standard library only.
"""

import argparse
import difflib
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STAGES = ROOT / "stages"
EXERCISE_STAGES = range(1, 11)  # stages 01 to 10 each have one exercise
SOURCE_SUFFIXES = (".cu", ".cuh", ".h", ".cpp")
BEGIN = re.compile(r"^(\s*)// EXERCISE\(([^()]+)\): (\S.*)$")
END = re.compile(r"^\s*// END EXERCISE$")
HEADER = (
    "// Exercise {stage} (README.md beside this file): generated from ../{name} by\n"
    "// scripts/exercise.py; write the EXERCISE blocks.\n"
    '#include "common/exercise.h"\n'
)


class Error(Exception):
    pass


def split_blocks(text, where):
    """[outside_0, block_0, outside_1, ...]: the marker lines stay in the outside parts."""
    parts, current, begin = [], [], None
    for number, line in enumerate(text.splitlines(keepends=True), 1):
        stripped = line.rstrip("\n")
        if BEGIN.match(stripped) or stripped.lstrip().startswith("// EXERCISE("):
            if begin is not None:
                raise Error(f"{where}:{number}: EXERCISE inside the block that begins at line {begin}")
            if not BEGIN.match(stripped):
                raise Error(f"{where}:{number}: malformed marker (// EXERCISE(what): hint)")
            current.append(line)
            parts.append("".join(current))
            current, begin = [], number
        elif END.match(stripped):
            if begin is None:
                raise Error(f"{where}:{number}: END EXERCISE without its EXERCISE")
            parts.append("".join(current))
            current, begin = [line], None
        else:
            current.append(line)
    if begin is not None:
        raise Error(f"{where}:{begin}: EXERCISE without its END EXERCISE")
    parts.append("".join(current))
    return parts


def marked_files():
    """(stage folder, solution file) for every stage source with a marked block."""
    found = []
    for folder in sorted(p for p in STAGES.iterdir() if p.is_dir() and re.match(r"\d\d_", p.name)):
        for path in sorted(folder.iterdir()):
            if path.suffix in SOURCE_SUFFIXES and "// EXERCISE(" in path.read_text():
                found.append((folder, path))
    return found


def blocks_of(parts):
    """(indent, what, hint) of each block, from the outside part before it."""
    result = []
    for before in parts[0:-1:2]:
        match = BEGIN.match(before.splitlines()[-1])
        result.append((match.group(1), match.group(2), match.group(3)))
    return result


def stub(indent, stage, what, solution_block):
    code = [l.strip() for l in solution_block.splitlines() if l.strip() and not l.strip().startswith("//")]
    returns = bool(code) and code[-1].startswith("return ") and code[-1] != "return;"
    return f'{indent}{"return " if returns else ""}CCE_EXERCISE_MISSING("{stage}", "{what}");\n'


def exercise_text(folder, path, solved=False):
    parts = split_blocks(path.read_text(), path.relative_to(ROOT))
    out = [HEADER.format(stage=folder.name, name=path.name)]
    for k, part in enumerate(parts):
        if k % 2 == 0:
            out.append(part)
        else:
            indent, what, _ = blocks_of(parts)[k // 2]
            out.append(part if solved else stub(indent, folder.name, what, part))
    return "".join(out)


def exercise_path(folder, path):
    return folder / "exercise" / path.name


def write(solved):
    for folder, path in marked_files():
        target = exercise_path(folder, path)
        target.parent.mkdir(exist_ok=True)
        target.write_text(exercise_text(folder, path, solved))
        print(f"wrote {target.relative_to(ROOT)}")
    return 0


def check():
    problems, report = [], []
    files = marked_files()
    for number in EXERCISE_STAGES:
        folders = [f for f in STAGES.glob(f"{number:02d}_*") if f.is_dir()]
        if len(folders) != 1:
            problems.append(f"stage {number:02d}: expected one folder stages/{number:02d}_*, found {len(folders)}")
            continue
        folder = folders[0]
        if not any(f == folder for f, _ in files):
            problems.append(f"{folder.relative_to(ROOT)}: no source file has an EXERCISE block")
        if not (folder / "exercise" / "README.md").is_file():
            problems.append(f"{folder.relative_to(ROOT)}/exercise/README.md is missing")
    solutions = {exercise_path(f, p) for f, p in files}
    for stray in sorted(STAGES.glob("*/exercise/*")):
        if stray.name != "README.md" and stray not in solutions:
            problems.append(f"{stray.relative_to(ROOT)}: no file of its stage has EXERCISE blocks for it")
    for folder, path in files:
        target = exercise_path(folder, path)
        name = target.relative_to(ROOT)
        if not target.is_file():
            problems.append(f"{name} is missing (python3 scripts/exercise.py --write)")
            continue
        want = split_blocks(exercise_text(folder, path), path.relative_to(ROOT))
        got = split_blocks(target.read_text(), name)
        if len(got) != len(want):
            problems.append(f"{name}: {len(got) // 2} EXERCISE blocks, its solution {path.name} has {len(want) // 2}")
            continue
        for k in range(0, len(want), 2):
            if got[k] != want[k]:
                diff = "".join(difflib.unified_diff(want[k].splitlines(True), got[k].splitlines(True),
                                                    f"generated from {path.relative_to(ROOT)}", str(name)))
                problems.append(f"{name} differs from its solution outside the EXERCISE blocks "
                                f"(python3 scripts/exercise.py --write regenerates it):\n{diff}")
        for k, (indent, what, _) in enumerate(blocks_of(want)):
            state = "blank" if got[2 * k + 1] == want[2 * k + 1] else "written"
            report.append(f"{name}: {what}: {state}")
    for line in report:
        print(line)
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    if problems:
        return 1
    print(f"{len(files)} exercise files of {len(EXERCISE_STAGES)} stages match their solutions outside the blocks")
    return 0


def listing():
    for folder, path in marked_files():
        parts = split_blocks(path.read_text(), path.relative_to(ROOT))
        for _, what, hint in blocks_of(parts):
            print(f"{folder.name}\t{path.name}\t{what}\t{hint}")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", action="store_true", help="write the blank exercises")
    group.add_argument("--check", action="store_true", help="the committed exercises match their solutions")
    group.add_argument("--solved", action="store_true", help="write the exercises with the solutions' blocks")
    group.add_argument("--list", action="store_true", help="list the exercises' blocks")
    args = parser.parse_args()
    try:
        if args.write or args.solved:
            return write(args.solved)
        if args.check:
            return check()
        return listing()
    except Error as error:
        print(f"error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
