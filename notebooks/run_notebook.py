#!/usr/bin/env python3
"""Runs a notebook top to bottom, as a test.

    python3 notebooks/run_notebook.py NOTEBOOK.ipynb [--timeout SECONDS] [--quiet] [--save-executed PATH]

Executes every cell in order with nbclient on the "python3" kernel, with matplotlib on the
Agg backend (MPLBACKEND=Agg), from the notebook's own directory, as Jupyter would. The
notebook file is read, never written: the executed copy lives in a temporary directory
(or goes to --save-executed PATH). Prints each cell's text output unless --quiet. Exits 0
when every cell ran, 1 with the failing cell's source and error otherwise, 2 on bad usage
or missing modules. ctest runs it for every notebooks/*.ipynb (notebooks/CMakeLists.txt).
"""
import argparse
import importlib
import os
import re
import shutil
import sys
import tempfile
import time

DEBIAN_PACKAGES = "python3-numpy python3-matplotlib python3-nbclient python3-nbformat python3-ipykernel"
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


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
        return output.get("data", {}).get("text/plain", "") + "\n"
    return ""


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
    args = parser.parse_args()

    source = os.path.abspath(args.notebook)
    if not os.path.isfile(source):
        fail(f"no such notebook: {args.notebook}", code=2)
    if args.save_executed and os.path.abspath(args.save_executed) == source:
        fail("--save-executed must not overwrite the notebook itself (outputs are not committed)", code=2)
    check_modules()
    os.environ["MPLBACKEND"] = "Agg"  # inherited by the kernel process
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")  # quiets ipykernel's debugger notice

    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError

    with tempfile.TemporaryDirectory(prefix="cce-notebook-") as scratch:
        copy = os.path.join(scratch, os.path.basename(source))
        shutil.copyfile(source, copy)
        nb = nbformat.read(copy, as_version=4)
        client = NotebookClient(nb, timeout=args.timeout, kernel_name=args.kernel,
                                resources={"metadata": {"path": os.path.dirname(source)}})
        start = time.perf_counter()
        try:
            client.execute()
        except CellTimeoutError as exc:
            fail(f"{args.notebook}: a cell ran longer than {args.timeout} s\n{describe_failure(nb, exc)}")
        except CellExecutionError as exc:
            fail(f"{args.notebook}: {describe_failure(nb, exc)}")
        except Exception as exc:  # kernel missing or dead, bad notebook file, ...
            fail(f"{args.notebook}: could not execute the notebook: {type(exc).__name__}: {exc}")
        elapsed = time.perf_counter() - start
        nbformat.write(nb, copy)
        if args.save_executed:
            shutil.copyfile(copy, args.save_executed)

    if not args.quiet:
        for index, cell in enumerate(nb.cells):
            text = "".join(text_of(o) for o in cell.get("outputs", []))
            if text.strip():
                print(f"--- cell {index} ---\n{text.rstrip()}")
    code_cells = sum(cell.cell_type == "code" for cell in nb.cells)
    print(f"run_notebook.py: {args.notebook}: {code_cells} code cells ran in {elapsed:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
