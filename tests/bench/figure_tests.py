"""What the tests of bench/'s figure scripts share (Python 3 standard library): the plotting libraries' check (exit 1
with one line without them), the script's path, the script as a module, and the script run as a process."""

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
