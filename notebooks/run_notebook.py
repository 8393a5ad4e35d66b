#!/usr/bin/env python3
"""Runs a notebook top to bottom, as a test.

    python3 notebooks/run_notebook.py NOTEBOOK.ipynb [--timeout SECONDS] [--quiet] [--save-executed PATH]
                                      [--figures DIR]

Executes every cell in order with nbclient on the "python3" kernel, with matplotlib on the
Agg backend (MPLBACKEND=Agg), from the notebook's own directory, as Jupyter would. The
notebook file is read, never written: the executed copy lives in a temporary directory
(or goes to --save-executed PATH). Prints each cell's text output unless --quiet. Exits 0
when every cell ran, 1 with the failing cell's source and error otherwise (an exception,
a failed assert included) or when a cell's output says a claim DOES NOT HOLD (however it
was printed), 2 on bad usage or missing modules. ctest runs it for every
notebooks/*.ipynb (notebooks/CMakeLists.txt).

--figures DIR also writes every matplotlib figure a cell shows as a PNG to DIR, named
<notebook stem>_<cell index>_<n>.png (cell index: the cell's position in the notebook,
counting from 0, as in the printed "--- cell N ---"; n: 1 for the cell's first figure, 2 for
its second, ...). For that the kernel's matplotlib uses Jupyter's inline backend instead of
Agg, at 2x resolution (what Jupyter shows on a high-density screen), and closes each cell's
figures when the cell ends, as Jupyter does. DIR is created if missing; this notebook's
earlier PNGs there (<stem>_<cell>_<n>.png) are removed first. The figures of the cells that
ran are written even when a later cell fails.
"""
import argparse
import base64
import importlib
import os
import re
import shutil
import sys
import tempfile
import time

DEBIAN_PACKAGES = "python3-numpy python3-matplotlib python3-nbclient python3-nbformat python3-ipykernel"
INLINE_BACKEND = "module://matplotlib_inline.backend_inline"  # Jupyter's: plt.show() sends the figure as a PNG
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
UNHELD = "DOES NOT HOLD"  # what the notebooks' claim helpers say of a false claim (matched in any case)


def fail(message, code=1):
    print(f"run_notebook.py: {message}", file=sys.stderr)
    sys.exit(code)


def check_modules():
    missing = []
    for name in ("nbformat", "nbclient", "ipykernel", "numpy", "matplotlib"):
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    if missing:
        fail(f"{sys.executable} lacks the Python modules {', '.join(missing)}; on Debian/Ubuntu: "
             f"apt-get install -y {DEBIAN_PACKAGES} (then run this script with /usr/bin/python3)", code=2)


def text_of(output):
    if output.get("output_type") == "stream":
        return output.get("text", "")
    if output.get("output_type") in ("execute_result", "display_data"):
        data = output.get("data", {})
        if "image/png" in data:
            return ""  # a figure (--figures): its text/plain is only "<Figure size ... with N Axes>"
        return data.get("text/plain", "") + "\n"
    return ""


def write_figures(nb, stem, directory):
    """Writes the PNG of every figure a code cell showed to directory; returns the paths written."""
    own = re.compile(re.escape(stem) + r"_\d+_\d+\.png")
    for name in os.listdir(directory):
        if own.fullmatch(name):
            os.remove(os.path.join(directory, name))
    written = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        n = 0
        for output in cell.get("outputs", []):
            png = output.get("data", {}).get("image/png") if output.get("output_type") in (
                "display_data", "execute_result") else None
            if not png:
                continue
            n += 1
            path = os.path.join(directory, f"{stem}_{index}_{n}.png")
            with open(path, "wb") as f:
                f.write(base64.b64decode(png if isinstance(png, str) else "".join(png)))
            written.append(path)
    return written


def claim_not_holding(nb):
    """The first output line saying DOES NOT HOLD (in any case), with its cell, or None: a notebook whose cells
    ran but printed that a claim does not hold has failed, whatever printed it and however it spelled it."""
    for index, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []):
            for line in text_of(output).splitlines():
                if UNHELD in line.upper():
                    return f"cell {index} printed that a claim does not hold: {line.strip()}"
    return None


def describe_failure(nb, exc):
    # The first code cell with an error output is the one that failed.
    code_index = 0
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        code_index += 1
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        if errors:
            error = errors[0]
            traceback = ANSI_ESCAPE.sub("", "\n".join(error.get("traceback", [])))
            hint = ""
            if error.get("ename") == "ModuleNotFoundError":
                hint = f"\n(the kernel's Python lacks a module; on Debian/Ubuntu: apt-get install -y {DEBIAN_PACKAGES})"
            return (f"cell {index} (code cell {code_index}) failed: {error.get('ename')}: {error.get('evalue')}\n"
                    f"--- source ---\n{cell.source}\n--- traceback ---\n{traceback}{hint}")
    return ANSI_ESCAPE.sub("", str(exc))


def main():
    parser = argparse.ArgumentParser(description="Execute a notebook top to bottom (a test).")
    parser.add_argument("notebook", help="path to the .ipynb file")
    parser.add_argument("--timeout", type=int, default=300, help="seconds allowed per cell (default 300)")
    parser.add_argument("--kernel", default="python3", help="kernel name (default python3)")
    parser.add_argument("--quiet", action="store_true", help="do not print the cells' text output")
    parser.add_argument("--save-executed", metavar="PATH", help="also write the executed notebook here")
    parser.add_argument("--figures", metavar="DIR",
                        help="also write every figure a cell shows to DIR as <notebook stem>_<cell index>_<n>.png")
    args = parser.parse_args()

    source = os.path.abspath(args.notebook)
    if not os.path.isfile(source):
        fail(f"no such notebook: {args.notebook}", code=2)
    if args.save_executed and os.path.abspath(args.save_executed) == source:
        fail("--save-executed must not overwrite the notebook itself (outputs are not committed)", code=2)
    check_modules()
    extra_arguments = []
    if args.figures:
        try:
            os.makedirs(args.figures, exist_ok=True)
        except OSError as e:
            fail(f"--figures: cannot create {args.figures}: {e.strerror or e}", code=2)
        try:
            importlib.import_module("matplotlib_inline")
        except ImportError:
            fail(f"--figures needs the module matplotlib_inline (ipykernel's dependency) in {sys.executable}", code=2)
        os.environ["MPLBACKEND"] = INLINE_BACKEND  # inherited by the kernel process
        extra_arguments = ["--InlineBackend.figure_formats=retina"]
    else:
        os.environ["MPLBACKEND"] = "Agg"  # inherited by the kernel process
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")  # quiets ipykernel's debugger notice

    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError

    with tempfile.TemporaryDirectory(prefix="cce-notebook-") as scratch:
        copy = os.path.join(scratch, os.path.basename(source))
        shutil.copyfile(source, copy)
        nb = nbformat.read(copy, as_version=4)
        client = NotebookClient(nb, timeout=args.timeout, kernel_name=args.kernel, extra_arguments=extra_arguments,
                                resources={"metadata": {"path": os.path.dirname(source)}})
        stem = os.path.splitext(os.path.basename(source))[0]
        start = time.perf_counter()
        try:
            client.execute()
        except (CellTimeoutError, CellExecutionError) as exc:
            if args.figures:
                written = write_figures(nb, stem, args.figures)
                print(f"run_notebook.py: {len(written)} figures of the cells that ran written to {args.figures}",
                      file=sys.stderr)
            if isinstance(exc, CellTimeoutError):
                fail(f"{args.notebook}: a cell ran longer than {args.timeout} s\n{describe_failure(nb, exc)}")
            fail(f"{args.notebook}: {describe_failure(nb, exc)}")
        except Exception as exc:  # kernel missing or dead, bad notebook file, ...
            fail(f"{args.notebook}: could not execute the notebook: {type(exc).__name__}: {exc}")
        elapsed = time.perf_counter() - start
        unheld = claim_not_holding(nb)
        if unheld is not None:
            fail(f"{args.notebook}: {unheld}")
        nbformat.write(nb, copy)
        if args.save_executed:
            shutil.copyfile(copy, args.save_executed)

    if not args.quiet:
        for index, cell in enumerate(nb.cells):
            text = "".join(text_of(o) for o in cell.get("outputs", []))
            if text.strip():
                print(f"--- cell {index} ---\n{text.rstrip()}")
    if args.figures:
        written = write_figures(nb, stem, args.figures)
        print(f"run_notebook.py: {len(written)} figures written to {args.figures}")
    code_cells = sum(cell.cell_type == "code" for cell in nb.cells)
    print(f"run_notebook.py: {args.notebook}: {code_cells} code cells ran in {elapsed:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
