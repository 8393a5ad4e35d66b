#!/usr/bin/env python3
"""check_claims_fail.py must itself fail where a notebook's claim() only prints that it does not hold.

    python3 notebooks/test_check_claims_fail.py

Two small notebooks, written to a temporary folder: one whose claim() and claim_each() raise AssertionError
with "DOES NOT HOLD" (check_claims_fail.py must exit 0: a false claim fails that notebook), one whose claim()
and claim_each() print "DOES NOT HOLD" and return (it must exit 1 and say DID NOT FAIL AS IT MUST, for both).
Exit 0 when both verdicts are right, 1 otherwise. ctest runs it as notebook.claims_fail.self_test.
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

RAISING = '''def claim(sentence, holds, numbers=""):
    if not holds:
        raise AssertionError(f"DOES NOT HOLD: {sentence} [{numbers}]")
    print(sentence)


def claim_each(sentence, cases):
    failing = [k for k, (holds, _) in cases.items() if not holds]
    if failing:
        raise AssertionError(f"DOES NOT HOLD at {', '.join(failing)}: {sentence}")
    print(sentence)
'''
PRINTING = RAISING.replace('raise AssertionError(f"DOES NOT HOLD: {sentence} [{numbers}]")',
                           'print(f"DOES NOT HOLD: {sentence} [{numbers}]")') \
                  .replace('raise AssertionError(f"DOES NOT HOLD at {\', \'.join(failing)}: {sentence}")',
                           'print(f"DOES NOT HOLD at {\', \'.join(failing)}: {sentence}")')


def notebook(helpers):
    cell = {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": []}
    cells = [dict(cell, id="helpers", source=[helpers]), dict(cell, id="claims", source=['claim("one is one", 1 == 1)'])]
    return {"cells": cells,
            "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
            "nbformat": 4, "nbformat_minor": 5}


def verdict(helpers):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "claims.ipynb")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(notebook(helpers), f)
        proc = subprocess.run([sys.executable, os.path.join(HERE, "check_claims_fail.py"), path],
                              capture_output=True, text=True)
    return proc.returncode, proc.stdout + proc.stderr


def main():
    assert "raise" not in PRINTING and PRINTING.count("print(f\"DOES NOT HOLD") == 2, "the printing helpers"
    wrong = []
    code, out = verdict(RAISING)
    if code != 0 or out.count("fails as it must") != 2:
        wrong.append(f"raising claims: check_claims_fail.py exit {code}, want 0\n{out[-1500:]}")
    code, out = verdict(PRINTING)
    if code != 1 or out.count("DID NOT FAIL AS IT MUST") != 2:
        wrong.append(f"printing claims: check_claims_fail.py exit {code}, want 1 with two DID NOT FAIL\n{out[-1500:]}")
    for w in wrong:
        print("test_check_claims_fail.py: " + w)
    print("check_claims_fail.py: " + ("right on both" if not wrong else "WRONG"))
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
