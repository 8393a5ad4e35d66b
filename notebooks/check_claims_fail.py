#!/usr/bin/env python3
"""A notebook whose claim does not hold must fail its test.

    python3 notebooks/check_claims_fail.py NOTEBOOK.ipynb

Copies the notebook into a temporary directory beside its data paths (the copy sits in notebooks/, as the
notebook does), adds a code cell right after the cell that defines claim() and claim_each(), and makes that
cell state something false: once through claim(), once through claim_each(). Each copy must make
run_notebook.py exit 1 with "DOES NOT HOLD" and the false sentence in its output. Only the cells up to the
added one run. Exit 0 when both copies fail as they must, 1 otherwise, 2 on bad usage (a notebook that
defines no claim()). ctest runs it as notebook.claims_fail.<stem> (notebooks/CMakeLists.txt).
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
FALSE_CALLS = {
    "claim": 'claim("a sentence made false on purpose by check_claims_fail.py", False, "no numbers")',
    "claim_each": 'claim_each("a sentence made false on purpose by check_claims_fail.py", '
                  '{"here": (True, "1"), "there": (False, "2")})',
}


def with_false_cell(notebook, call):
    """The notebook's JSON with a code cell holding `call` right after the one that defines claim()."""
    cells = notebook["cells"]
    at = next((k for k, c in enumerate(cells)
               if c["cell_type"] == "code" and "def claim(" in "".join(c["source"])), None)
    if at is None:
        return None
    copy = dict(notebook)
    copy["cells"] = cells[:at + 1] + [{"cell_type": "code", "execution_count": None, "id": "false-claim",
                                        "metadata": {}, "outputs": [], "source": [call]}] + cells[at + 1:]
    return copy


def main(argv):
    if len(argv) != 2:
        print("usage: check_claims_fail.py NOTEBOOK.ipynb", file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as f:
        notebook = json.load(f)
    failures = []
    for name, call in FALSE_CALLS.items():
        copy = with_false_cell(notebook, call)
        if copy is None:
            print(f"check_claims_fail.py: {argv[1]} defines no claim()", file=sys.stderr)
            return 2
        # In notebooks/ itself, so that its relative paths (../docs, ../bench) resolve as for the notebook.
        with tempfile.NamedTemporaryFile("w", suffix=".ipynb", dir=HERE, prefix=".false_claim_", delete=False) as f:
            json.dump(copy, f)
            path = f.name
        try:
            proc = subprocess.run([sys.executable, os.path.join(HERE, "run_notebook.py"), path, "--quiet",
                                   "--timeout", "300"], capture_output=True, text=True)
        finally:
            os.remove(path)
        out = proc.stdout + proc.stderr
        ok = proc.returncode == 1 and "DOES NOT HOLD" in out and "made false on purpose" in out
        print(f"{name}: run_notebook.py exit {proc.returncode}, "
              f"{'fails as it must' if ok else 'DID NOT FAIL AS IT MUST'}")
        if not ok:
            failures.append(name)
            print(out[-2000:])
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
