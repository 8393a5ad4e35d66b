"""What the tests of bench/'s figure scripts share (Python 3 standard library): the plotting libraries' check (exit 1
with one line without them), the script's path, the script as a module, the script run as a process, and the three
checks most figures take: it draws and its claims hold, a broken rule prints DOES NOT HOLD, bad flags exit 2."""

import importlib
import os
import subprocess
import sys

BENCH = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))


def need_plotting(test, numpy=True):
    """Exits 1 with one line when Matplotlib (and NumPy, where numpy) cannot be imported."""
    try:
        import matplotlib  # noqa: F401
        if numpy:
            import numpy as _  # noqa: F401
    except ImportError as error:
        names = "NumPy and Matplotlib" if numpy else "Matplotlib"
        print(f"{test}: needs {names} ({error}); /usr/bin/python3 with python3-numpy and python3-matplotlib has them")
        sys.exit(1)


def script(name):
    """bench/<name>.py"""
    return os.path.join(BENCH, name + ".py")


def load(name):
    """bench/<name>.py imported as a module (it imports bench/figure_cli.py)."""
    if BENCH not in sys.path:
        sys.path.insert(0, BENCH)
    return importlib.import_module(name)


def runner(name):
    """run(*args): bench/<name>.py in a process of this interpreter, its output captured."""
    path = script(name)

    def run(*args):
        return subprocess.run([sys.executable, path, *args], capture_output=True, text=True)
    return run


def check_draws(test, run, stem, expect, seeds=(None,)):
    """bench/<stem>_figure.py draws a PNG into a temporary folder (once per seed; None: without --seed), exits 0
    with every string of expect in its output and no claim failed."""
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        for seed in seeds:
            out = os.path.join(tmp, f"{stem}_{seed}.png")
            proc = run("--out", out, *(("--seed", seed) if seed is not None else ()))
            test.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
            test.assertNotIn("DOES NOT HOLD", proc.stderr)
            with open(out, "rb") as f:
                test.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
            for text in expect:
                test.assertIn(text, proc.stdout)


def check_does_not_hold(test, code, claims):
    """A Python program (a figure script with a rule broken) exits 1 and prints each of claims as DOES NOT HOLD."""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    test.assertEqual(proc.returncode, 1, code + proc.stdout + proc.stderr)
    failed = [line for line in proc.stderr.splitlines() if "DOES NOT HOLD: " in line]
    test.assertTrue(failed, proc.stderr)
    for claim in claims:
        test.assertTrue(any(claim in line for line in failed), claim + "\n" + proc.stderr)


def check_bad_flags(test, run, stem, seeded=True, extra=()):
    """Bad flags (and --seed's, where the script has one, and the script's own in extra, lists of arguments): exit 2,
    one line naming the script, nothing written."""
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        cases = [["--bogus"], ["--out"], ["--out", os.path.join(tmp, f"{stem}.svg")],
                 ["--out", os.path.join(tmp, "missing", f"{stem}.png")], *extra]
        if seeded:
            cases += [["--seed", "x"], ["--seed", "-1"]]
        for args in cases:
            proc = run(*args)
            test.assertEqual(proc.returncode, 2, args)
            test.assertEqual(len(proc.stderr.strip().splitlines()), 1, proc.stderr)
            test.assertTrue(proc.stderr.startswith(f"{stem}_figure.py: "), proc.stderr)
        test.assertEqual(os.listdir(tmp), [])
