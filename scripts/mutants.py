#!/usr/bin/env python3
"""Mutation check: do the tests fail when the code they guard is broken?

    python3 scripts/mutants.py [--cpu | --gpu] [--list] [--only NAME ...] [--jobs N]
                               [--json PATH] [--build-dir DIR] [--arch ARCH] [--keep]
                               [--compile-only] [--max-minutes M] [--test-jobs N]

Applies each mutant of tests/mutants.txt (a small bug: a literal string of one
file replaced by another; the list's header gives the format) one at a time,
rebuilds what the mutant's tests run, runs them with ctest and records which
tests failed; then puts the file back. A mutant that builds and fails no test
SURVIVED; one that does not build is an ERROR (fix the mutant). Prints a
table (mutant, file, what it changes, result, the first failing tests, time)
and exits 0 only when every mutant was caught.

The working tree is never changed: the files git knows (tracked, and
untracked ones that are not ignored) are copied to a work folder, which is
configured (Ninja, Release, one CUDA architecture) and built there: only the
test executables the selected tests run. Before any mutant, the unmutated
copy must pass every selected test (the baseline), else the run stops.
A mutant of a compiled file that no selected test is built from SURVIVES
without being built (nothing could fail); one whose search string does not
occur exactly once stops the run before anything is built.

Modes:
  --cpu  (default; CI) the cpu mutants, tests with label cpu but not notebook;
         CUDA architecture 80 (the cheapest: no GPU runs anything)
  --gpu  the gpu mutants, on a machine with a GPU; the architecture is the
         GPU's (nvidia-smi), or --arch. With --compile-only (no GPU needed)
         each mutant is only built.
Every mutant's search string is checked in both modes, so a stale gpu mutant
fails CI's cpu run too.

--build-dir DIR keeps the work folder (DIR/src, the copy; DIR/build, its
build) and reuses it on the next run: only changed files are copied again,
so only they are rebuilt. Without it a temporary folder is used and removed
(unless --keep). Python 3 standard library only.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_LIST = ROOT / "tests" / "mutants.txt"
SEPARATOR = "|||"
FIELDS = ("name", "mode", "file", "tests", "what", "find", "replace")
MODES = ("cpu", "gpu")
LABEL_ARGS = {"cpu": ["-L", "cpu", "-LE", "notebook"], "gpu": ["-LE", "notebook"]}


class Fatal(Exception):
    """An error that ends the run (exit 1) with its message."""


def say(text=""):
    print(text, flush=True)


# --- the mutant list ---------------------------------------------------------------------------------------


class Mutant:
    def __init__(self, fields, where):
        for key, value in zip(FIELDS, fields):
            setattr(self, key, value)
        self.where = where  # "mutants.txt:12"

    def check(self, root):
        """Raises Fatal unless the mutant's find string occurs exactly once in its file."""
        path = root / self.file
        if not path.is_file():
            raise Fatal(f"mutant {self.name} ({self.where}): {self.file} does not exist")
        text = path.read_bytes().decode("utf-8")  # no newline translation: put back byte for byte
        count = text.count(self.find)
        if count != 1:
            raise Fatal(
                f"mutant {self.name} ({self.where}): its search string occurs {count} times in {self.file}, "
                f"not once (the code changed: update the mutant, keeping the bug it plants):\n    {self.find}"
            )
        return text

    def mutated(self, text):
        return text.replace(self.find, self.replace, 1)


def load_mutants(path):
    mutants, names = [], set()
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        where = f"{path.name}:{number}"
        fields = [f.strip() for f in line.split(SEPARATOR)]
        if len(fields) != len(FIELDS):
            raise Fatal(f"{where}: {len(fields)} fields, expected {len(FIELDS)} ({' ||| '.join(FIELDS)})")
        m = Mutant(fields, where)
        if not re.fullmatch(r"[a-z0-9_]+", m.name):
            raise Fatal(f"{where}: mutant name '{m.name}' is not [a-z0-9_]+")
        if m.name in names:
            raise Fatal(f"{where}: mutant name '{m.name}' used twice")
        names.add(m.name)
        if m.mode not in MODES:
            raise Fatal(f"{where}: mode '{m.mode}' is not one of {', '.join(MODES)}")
        if not m.find:
            raise Fatal(f"{where}: empty search string")
        if m.find == m.replace:
            raise Fatal(f"{where}: the replacement is the search string")
        try:
            re.compile(m.tests)
        except re.error as e:
            raise Fatal(f"{where}: tests regex '{m.tests}': {e}")
        mutants.append(m)
    return mutants


# --- running things ----------------------------------------------------------------------------------------


def run(cmd, cwd=None, log=None, check=True, env=None, merge=True):
    """Runs cmd; returns (returncode, output: stdout and stderr, or stdout only without merge).
    Output goes to `log` too when given."""
    p = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT if merge else None,
                       stdin=subprocess.DEVNULL, universal_newlines=True, errors="replace")
    if log is not None:
        with open(log, "a", encoding="utf-8") as f:
            f.write("$ " + " ".join(str(c) for c in cmd) + "\n" + p.stdout + "\n")
    if check and p.returncode != 0:
        tail = "\n".join(p.stdout.splitlines()[-30:])
        raise Fatal(f"{' '.join(str(c) for c in cmd)} failed with status {p.returncode}:\n{tail}")
    return p.returncode, p.stdout


def tool_env():
    """The environment for cmake, ninja and ctest: nvcc on PATH as scripts/lib.sh finds it."""
    env = dict(os.environ)
    if not env.get("CUDACXX") and not shutil.which("nvcc") and os.access("/usr/local/cuda/bin/nvcc", os.X_OK):
        env["PATH"] = "/usr/local/cuda/bin:" + env.get("PATH", "")
    return env


SKIPPED_DIRS = re.compile(r"^(\.git|build|build-.*|\.device-deps|__pycache__|.*\.ipynb_checkpoints)$")


def source_files():
    """The files git knows: tracked (and present) plus untracked ones that are not ignored. Without git
    (a copy of the tree with no .git, as on the device machine): every file outside .git/ and build
    folders."""
    code, out = run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                    check=False)
    if code == 0:
        names = sorted({n for n in out.split("\0") if n})
    else:
        say(f"note: git ls-files failed in {ROOT}; copying every file outside .git/ and build*/ instead")
        names = []
        for folder, dirs, files in os.walk(ROOT):
            dirs[:] = sorted(d for d in dirs if not SKIPPED_DIRS.match(d))
            names += [os.path.relpath(os.path.join(folder, f), ROOT) for f in files]
        names.sort()
    return [n for n in names if (ROOT / n).is_file() or (ROOT / n).is_symlink()]


def sync_copy(src_dir):
    """Copies the tree into src_dir; an existing copy gets only the files whose bytes differ (so that
    ninja rebuilds only those), and loses the files the tree no longer has."""
    names = source_files()
    wanted = set(names)
    written = 0
    for name in names:
        source, target = ROOT / name, src_dir / name
        if source.is_symlink():
            if target.is_symlink() and os.readlink(target) == os.readlink(source):
                continue
            if target.exists() or target.is_symlink():
                target.unlink()
            target.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(os.readlink(source), target)
            written += 1
            continue
        data = source.read_bytes()
        if target.is_file() and not target.is_symlink() and target.read_bytes() == data:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_symlink():
            target.unlink()
        target.write_bytes(data)
        shutil.copymode(source, target)
        written += 1
    removed = 0
    for path in sorted(src_dir.rglob("*"), reverse=True):
        rel = path.relative_to(src_dir).as_posix()
        if (path.is_file() or path.is_symlink()) and rel not in wanted:
            path.unlink()
            removed += 1
    return len(names), written, removed


def gpu_arch():
    code, out = run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"], check=False)
    caps = [line.strip() for line in out.splitlines() if re.fullmatch(r"\d+\.\d+", line.strip())]
    if code != 0 or not caps:
        raise Fatal("--gpu: nvidia-smi shows no GPU (give --arch to build anyway)")
    return caps[0].replace(".", "")


# --- the build: which targets the tests need -----------------------------------------------------------------


class Build:
    def __init__(self, src, build, jobs, test_jobs, env, log):
        self.src, self.dir, self.jobs, self.test_jobs, self.env, self.log = src, build, jobs, test_jobs, env, log
        self.executables = {}  # absolute path -> ninja output (relative)
        self.objects = {}  # absolute source path -> [ninja outputs of its objects]

    def configure(self, arch):
        cache = self.dir / "CMakeCache.txt"
        if cache.is_file():
            have = re.search(r"^CMAKE_CUDA_ARCHITECTURES:\w+=(.*)$", cache.read_text(), re.M)
            say(f"reusing the configured build {self.dir} (CUDA architectures {have.group(1) if have else '?'})")
            run(["cmake", str(self.dir)], log=self.log, env=self.env)
        else:
            cmd = ["cmake", "-S", str(self.src), "-B", str(self.dir), "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                   f"-DCMAKE_CUDA_ARCHITECTURES={arch}"]
            say("configure: " + " ".join(cmd))
            run(cmd, log=self.log, env=self.env)
        self._read_outputs()

    def _read_outputs(self):
        # Every file ninja builds (whatever its rules are called): a test's command words that are
        # among them are what the test needs built.
        _, out = run(["ninja", "-C", str(self.dir), "-t", "targets", "all"], log=None, env=self.env, merge=False)
        for line in out.splitlines():
            output, _, rule = line.rpartition(": ")
            if output and rule != "phony":
                self.executables[os.path.normpath(str(self.dir / output))] = output
        with open(self.dir / "compile_commands.json", encoding="utf-8") as f:
            for entry in json.load(f):
                m = re.search(r"\s-o\s+(\S+)", entry.get("command", ""))
                if m:
                    source = os.path.normpath(os.path.join(entry["directory"], entry["file"]))
                    self.objects.setdefault(source, []).append(m.group(1))
        say(f"build files: {len(self.executables)} outputs, {len(self.objects)} compiled sources")

    def outputs_in(self, words):
        """The executables among command-line words (paths, and -DEXE=path as the CLI tests pass them)."""
        found = set()
        for word in words:
            for part in [word] + word.split("=", 1)[1:]:
                if part.startswith("/"):
                    output = self.executables.get(os.path.normpath(part))
                    if output:
                        found.add(output)
        return found

    def targets_before_discovery(self, labels, regex):
        """Executables of the tests with the mode's labels, read from the CTest files before anything is
        built (GoogleTest suites are listed only once their executable exists): every add_test whose
        test ctest selects, and every gtest_discover_tests executable whose properties carry the label."""
        selected = {t["name"] for t in self.show_tests(labels, regex)}
        label = labels[1] if labels[0] == "-L" else None
        targets = set()
        for testfile in self.dir.rglob("CTestTestfile.cmake"):
            for line in testfile.read_text(encoding="utf-8", errors="replace").splitlines():
                # add_test([=[name]=] "arg" ...) (CMake 3), add_test("name" "arg" ...) (CMake 4)
                m = re.match(r'add_test\((?:\[=\[(.*?)\]=\]|"((?:[^"\\]|\\.)*)")\s+(.*)\)\s*$', line)
                if m and (m.group(1) if m.group(1) is not None else m.group(2)) in selected:
                    targets |= self.outputs_in(re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(3)))
        for include in self.dir.rglob("*_include.cmake"):
            text = include.read_text(encoding="utf-8", errors="replace")
            # TEST_EXECUTABLE [==[path]==] (CMake 3), -D [[TEST_EXECUTABLE=path]] (CMake 4)
            exe = re.search(r"TEST_EXECUTABLE(?: \[==\[|=)([^\]]+)\]", text)
            if not exe:
                continue
            # LABELS;cpu;... (CMake 3), [[LABELS]] [[cpu]] (CMake 4)
            if label is None or re.search(r"LABELS(?:;|\]\]\s*\[\[)" + re.escape(label) + r"(?:;|\]\])", text):
                targets |= self.outputs_in([exe.group(1)])
        return targets

    def show_tests(self, labels, regex):
        cmd = ["ctest", "--test-dir", str(self.dir), "--show-only=json-v1"] + labels
        if regex:
            cmd += ["-R", regex]
        _, out = run(cmd, env=self.env, merge=False)
        try:
            return json.loads(out).get("tests", [])
        except ValueError:
            raise Fatal(f"{' '.join(cmd)} printed no JSON (a regex CMake cannot read? it has no (?:, \\d, lazy *?)")

    def targets_of(self, labels, regex):
        """The executables the selected tests run, their fixtures' setup tests included."""
        tests = self.show_tests(labels, regex)
        every = None
        targets = set()
        for t in tests:
            targets |= self.outputs_in(t.get("command") or [])
            props = {p["name"]: p["value"] for p in t.get("properties", [])}
            needs = props.get("FIXTURES_REQUIRED") or []
            if needs:
                every = every or self.show_tests([], None)
                for other in every:
                    oprops = {p["name"]: p["value"] for p in other.get("properties", [])}
                    if set(oprops.get("FIXTURES_SETUP") or []) & set(needs):
                        targets |= self.outputs_in(other.get("command") or [])
        if tests and not targets:  # commands not read as expected: everything, to be safe
            targets = {"all"}
        return [t["name"] for t in tests], targets

    def links(self, targets, objects):
        """Whether any of the targets is built from any of the objects (None: ninja cannot tell)."""
        if not targets:
            return False
        code, out = run(["ninja", "-C", str(self.dir), "-t", "inputs"] + sorted(targets), check=False, env=self.env,
                        merge=False)
        if code != 0:
            return None
        return bool(set(out.split()) & set(objects))

    def ninja(self, targets):
        """Builds the targets; returns (ok, output tail)."""
        if not targets:
            return True, ""
        code, out = run(["ninja", "-C", str(self.dir), "-j", str(self.jobs)] + sorted(targets), log=self.log,
                        check=False, env=self.env)
        lines = out.splitlines()
        errors = [l for l in lines if re.search(r"error|FAILED", l)]
        return code == 0, "\n".join((errors or lines)[-12:])


# --- ctest ---------------------------------------------------------------------------------------------------


def ctest(build, labels, regex, log):
    """Runs the selected tests; returns (tests run, [failed names], [skipped names], output)."""
    cmd = ["ctest", "--test-dir", str(build.dir), "-j", str(build.test_jobs), "--no-tests=error",
           "--output-on-failure"] + labels + ["-R", regex]
    _, out = run(cmd, log=log, check=False, env=build.env)
    failed, skipped, section = [], [], None
    total = failed_count = None
    for line in out.splitlines():
        # "90% tests passed, 2 tests failed out of 20"; "100% tests passed out of 52" (CMake 4)
        m = re.match(r"\d+% tests passed(?:, (\d+) tests? failed)? out of (\d+)", line)
        if m:
            failed_count, total = int(m.group(1) or 0), int(m.group(2))
        if line.startswith("The following tests FAILED:"):
            section = failed
            continue
        if line.startswith("The following tests did not run:"):
            section = skipped
            continue
        # "\t 12 - name (Failed)", newer ctest adds the labels after it: "(Not Run)   gpu stage"
        m = re.match(r"\s+\d+ - (.+?) \(([^()]+)\)(\s+\S.*)?$", line)
        if section is not None and m:
            section.append(m.group(1).split("  # GetParam()")[0])  # a parameterized test's name
        elif section is not None and line.strip() and not line.startswith((" ", "\t")):
            section = None
    if total is None:
        failed.append("(ctest ran no tests: " + (out.strip().splitlines() or ["no output"])[-1] + ")")
    elif failed_count and len(failed) < failed_count:
        failed.append(f"({failed_count - len(failed)} more failed tests whose names were not read)")
    return total or 0, failed, skipped, out


# --- the run -------------------------------------------------------------------------------------------------


def fmt_time(seconds):
    return f"{int(seconds) // 60}m{int(seconds) % 60:02d}s" if seconds >= 60 else f"{seconds:.0f}s"


def print_table(results):
    headers = ("mutant", "file", "what it changes", "result", "caught by", "time")
    rows = []
    for r in results:
        caught = r["caught_by"][:3]
        text = ", ".join(caught) + (f" (+{len(r['caught_by']) - 3})" if len(r["caught_by"]) > 3 else "")
        rows.append((r["name"], r["file"], r["what"], r["status"], text or r.get("note", ""),
                     fmt_time(r["seconds"])))
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h) for i, h in enumerate(headers)]
    widths[2] = min(widths[2], 60)
    widths[4] = min(widths[4], 100)

    def line(cells):
        out = []
        for i, cell in enumerate(cells):
            cell = cell if len(cell) <= widths[i] else cell[: widths[i] - 1] + "…"
            out.append(cell.ljust(widths[i]))
        return "  ".join(out).rstrip()

    say(line(headers))
    say(line(["-" * w for w in widths]))
    for row in rows:
        say(line(row))


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--cpu", dest="mode", action="store_const", const="cpu", help="the cpu mutants (default)")
    mode.add_argument("--gpu", dest="mode", action="store_const", const="gpu", help="the gpu mutants, on a GPU")
    parser.add_argument("--list", action="store_true", help="print the mutants and exit")
    parser.add_argument("--only", action="append", metavar="NAME", help="run this mutant only (repeatable)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="ninja jobs (and ctest's with --cpu)")
    parser.add_argument("--test-jobs", type=int, metavar="N",
                        help="ctest jobs (default: --jobs with --cpu, at most 4 with --gpu: the tests share one GPU)")
    parser.add_argument("--json", metavar="PATH", help="write a JSON summary there")
    parser.add_argument("--build-dir", metavar="DIR", help="keep and reuse the copy (DIR/src) and build (DIR/build)")
    parser.add_argument("--arch", help="CUDA architecture (default: 80 with --cpu, the GPU's with --gpu)")
    parser.add_argument("--compile-only", action="store_true",
                        help="build each mutant, run no test (checks gpu mutants on a machine without a GPU)")
    parser.add_argument("--max-minutes", type=float, metavar="M",
                        help="start no mutant after M minutes; the ones left are NOT RUN (and the run fails)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary work folder")
    parser.add_argument("--mutants", default=str(DEFAULT_LIST), metavar="FILE", help="the mutant list")
    args = parser.parse_args(argv)
    args.mode = args.mode or "cpu"

    started = time.time()
    mutants = load_mutants(Path(args.mutants))
    for m in mutants:  # every mode's: a stale gpu mutant fails the cpu run too
        m.check(ROOT)
    if args.only:
        unknown = sorted(set(args.only) - {m.name for m in mutants})
        if unknown:
            raise Fatal("--only: no mutant named " + ", ".join(unknown) + " (--list lists them)")
        chosen = [m for m in mutants if m.name in args.only]
        wrong_mode = [m.name for m in chosen if m.mode != args.mode]
        if wrong_mode:
            raise Fatal(f"--only: {', '.join(wrong_mode)} not {args.mode} mutants (use --{'gpu' if args.mode == 'cpu' else 'cpu'})")
    else:
        chosen = [m for m in mutants if m.mode == args.mode]

    if args.list:
        for m in mutants:
            say(f"{m.name:38} {m.mode}  {m.file:50} {m.what}")
            say(f"{'':38}       tests: {m.tests}")
        return 0
    if not chosen:
        raise Fatal(f"no {args.mode} mutants in {args.mutants}")
    # Mutants of one file together (putting a file back costs a rebuild, once per file), headers last
    # (putting one back recompiles everything that includes it; after the last mutant nothing is rebuilt).
    order = {}
    for m in chosen:
        order.setdefault(m.file, len(order))
    chosen.sort(key=lambda m: (m.file.endswith((".h", ".cuh", ".hpp")), order[m.file]))

    for tool in ("cmake", "ninja", "ctest"):
        if not shutil.which(tool):
            raise Fatal(f"{tool} not found on PATH (scripts/install-deps.sh installs the build tools)")
    env = tool_env()
    arch = args.arch or ("80" if args.mode == "cpu" else gpu_arch())

    if args.build_dir:
        work = Path(args.build_dir).resolve()
        work.mkdir(parents=True, exist_ok=True)
        temporary = False
    else:
        work = Path(tempfile.mkdtemp(prefix="cce-mutants-"))
        temporary = not args.keep
    src, build_dir = work / "src", work / "build"
    src.mkdir(exist_ok=True)
    log = work / "mutants.log"
    log.write_text("")
    say(f"mutation check: {len(chosen)} {args.mode} mutants of {Path(args.mutants).name}, work folder {work} "
        f"(log: {log.name}), {args.jobs} jobs")
    results = []
    try:
        files, written, removed = sync_copy(src)
        say(f"copy: {files} files, {written} written, {removed} removed")
        test_jobs = args.test_jobs or (args.jobs if args.mode == "cpu" else min(args.jobs, 4))
        build = Build(src, build_dir, args.jobs, test_jobs, env, log)
        t0 = time.time()
        build.configure(arch)
        labels = LABEL_ARGS[args.mode]
        # Every test some chosen mutant runs: the distinct regexes as one alternation (CMake's regex
        # has no (?:...) and at most 9 groups, so they are not wrapped in groups of their own).
        union = "|".join(dict.fromkeys(m.tests for m in chosen))
        targets = build.targets_before_discovery(labels, union)
        if not targets:  # the CTest files did not name them as expected: build everything instead
            say("note: no test executable found in the CTest files; building everything")
            targets = {"all"}
        say(f"build: {', '.join(sorted(targets)) if len(targets) < 4 else f'{len(targets)} test executables'} "
            f"with ninja -j {args.jobs}")
        ok, tail = build.ninja(targets)
        if not ok:
            raise Fatal("the unmutated copy does not build:\n" + tail)
        _, needed = build.targets_of(labels, union)  # tests are discovered now: build what they run
        ok, tail = build.ninja(needed)
        if not ok:
            raise Fatal("the unmutated copy does not build:\n" + tail)
        say(f"built in {fmt_time(time.time() - t0)}")

        t0 = time.time()
        total, failed, skipped, _ = (0, [], [], "") if args.compile_only else ctest(build, labels, union, log)
        if failed:
            raise Fatal(f"baseline: {len(failed)} of {total} selected tests fail without any mutant "
                        f"(fix them first): {', '.join(failed[:10])}")
        if args.compile_only:
            say("baseline: not run (--compile-only)")
        elif total and len(skipped) == total:
            raise Fatal(f"baseline: all {total} selected tests were skipped (--gpu needs a GPU)")
        else:
            say(f"baseline: {total} tests pass unmutated ({len(skipped)} skipped) in {fmt_time(time.time() - t0)}")

        say("")
        for index, m in enumerate(chosen, 1):
            if args.max_minutes is not None and time.time() - started > 60 * args.max_minutes:
                results.append({"name": m.name, "mode": m.mode, "file": m.file, "what": m.what, "tests": m.tests,
                                "caught_by": [], "tests_run": 0, "status": "NOT RUN", "seconds": 0.0,
                                "note": f"--max-minutes {args.max_minutes:g} reached"})
                continue
            results.append(run_mutant(m, build, src, labels, log, index, len(chosen), args.compile_only))
    finally:
        if temporary:
            shutil.rmtree(work, ignore_errors=True)

    say("")
    print_table(results)
    survived = [r["name"] for r in results if r["status"] == "SURVIVED"]
    errors = [r["name"] for r in results if r["status"] == "ERROR"]
    caught = [r["name"] for r in results if r["status"] == "caught"]
    not_run = [r["name"] for r in results if r["status"] == "NOT RUN"]
    elapsed = time.time() - started
    say("")
    if args.compile_only:
        built = sum(r["status"] == "builds" for r in results)
        say(f"--compile-only: {built} of {len(results)} {args.mode} mutants build (no test run)")
    say(f"{len(caught)} of {len(results)} {args.mode} mutants caught, {len(survived)} survived, {len(errors)} "
        f"did not build" + (f", {len(not_run)} not run" if not_run else "") + f"; {fmt_time(elapsed)} in all")
    if survived:
        say("SURVIVED (no test fails with this bug; add one that does): " + ", ".join(survived))
    if not_run:
        say("NOT RUN (time limit): " + ", ".join(not_run))
    if errors:
        say("ERROR (the mutant does not build: fix it in " + Path(args.mutants).name + "): " + ", ".join(errors))
    if args.json:
        summary = {"mode": args.mode, "arch": arch, "seconds": round(elapsed, 1), "caught": len(caught),
                   "survived": survived, "errors": errors, "not_run": not_run, "mutants": results}
        Path(args.json).write_text(json.dumps(summary, indent=2) + "\n")
    return 0 if not survived and not errors and not not_run else 1


def run_mutant(m, build, src, labels, log, index, count, compile_only=False):
    t0 = time.time()
    result = {"name": m.name, "mode": m.mode, "file": m.file, "what": m.what, "tests": m.tests,
              "caught_by": [], "tests_run": 0}
    path = src / m.file
    original = m.check(src)
    names, targets = build.targets_of(labels, m.tests)
    objects = set(build.objects.get(os.path.normpath(str(path)), []))
    with open(log, "a", encoding="utf-8") as f:
        f.write(f"\n===== mutant {m.name}: {m.file}\n-{m.find}\n+{m.replace}\n")
    if not names:
        result.update(status="ERROR", note=f"no test matches {m.tests}")
    elif objects and not compile_only and build.links(targets, objects) is False:
        # A compiled file that no selected test is built from: nothing could fail. (It is not even
        # compiled, to save the time: once a test links it, a mutant that does not build shows as ERROR.)
        result.update(status="SURVIVED", note=f"no selected test links {Path(m.file).name} (not built)")
    else:
        try:
            path.write_bytes(m.mutated(original).encode("utf-8"))
            ok, tail = build.ninja(targets | objects)  # its own objects too: a mutant must compile
            result["build_seconds"] = round(time.time() - t0, 1)
            if not ok:
                result.update(status="ERROR", note="does not build: " + (tail.splitlines() or ["?"])[-1])
                result["build_output"] = tail
            elif compile_only:
                result.update(status="builds", note="not tested (--compile-only)")
            else:
                total, failed, _, _ = ctest(build, labels, m.tests, log)
                result["tests_run"] = total
                result["caught_by"] = failed
                result["status"] = "caught" if failed else "SURVIVED"
                if not failed:
                    result["note"] = f"{total} tests pass"
        finally:
            path.write_bytes(original.encode("utf-8"))
    result["seconds"] = round(time.time() - t0, 1)
    shown = ", ".join(result["caught_by"][:3]) or result.get("note", "")
    say(f"[{index}/{count}] {m.name}: {result['status']} ({fmt_time(result['seconds'])}) {shown}")
    return result


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except Fatal as e:
        print(f"mutants.py: error: {e}", file=sys.stderr, flush=True)
        sys.exit(1)
    except BrokenPipeError:  # --list | head
        sys.exit(0)
    except KeyboardInterrupt:
        print("mutants.py: interrupted", file=sys.stderr)
        sys.exit(130)
