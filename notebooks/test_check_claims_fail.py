#!/usr/bin/env python3
"""A claim that does not hold can never print and pass: the checks of it, checked.

    python3 notebooks/test_check_claims_fail.py

Small notebooks, written to a temporary folder:
- claim() and claim_each() raise AssertionError with "DOES NOT HOLD": check_claims_fail.py must exit 0 (a
  false claim fails that notebook);
- they print "DOES NOT HOLD" and return: run_notebook.py fails the notebook all the same, so
  check_claims_fail.py must exit 0 there too;
- they say nothing of a false claim (print the sentence and return): check_claims_fail.py must exit 1 and say
  DID NOT FAIL AS IT MUST, for both;
- no claim() at all, a cell that prints "... DOES NOT HOLD", or "... does not hold": run_notebook.py must exit 1
  naming the cell.
Exit 0 when every verdict is right, 1 otherwise. ctest runs it as notebook.claims_fail.self_test.
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

SILENT = RAISING.replace('raise AssertionError(f"DOES NOT HOLD: {sentence} [{numbers}]")', 'pass') \
                .replace('raise AssertionError(f"DOES NOT HOLD at {\', \'.join(failing)}: {sentence}")', 'pass')


def notebook(helpers, claims='claim("one is one", 1 == 1)'):
    cell = {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": []}
    cells = [dict(cell, id="helpers", source=[helpers])] + ([dict(cell, id="claims", source=[claims])] if claims else [])
    return {"cells": cells,
            "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
            "nbformat": 4, "nbformat_minor": 5}


def verdict(helpers, script="check_claims_fail.py", claims='claim("one is one", 1 == 1)'):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "claims.ipynb")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(notebook(helpers, claims), f)
        proc = subprocess.run([sys.executable, os.path.join(HERE, script), path], capture_output=True, text=True)
    return proc.returncode, proc.stdout + proc.stderr


def main():
    assert "raise" not in PRINTING and PRINTING.count("print(f\"DOES NOT HOLD") == 2, "the printing helpers"
    assert "raise" not in SILENT and "DOES NOT HOLD" not in SILENT, "the silent helpers"
    wrong = []
    code, out = verdict(RAISING)
    if code != 0 or out.count("fails as it must") != 2:
        wrong.append(f"raising claims: check_claims_fail.py exit {code}, want 0\n{out[-1500:]}")
    code, out = verdict(PRINTING)
    if code != 0 or out.count("fails as it must") != 2:
        wrong.append(f"printing claims: check_claims_fail.py exit {code}, want 0 (run_notebook.py fails them)\n"
                     f"{out[-1500:]}")
    code, out = verdict(SILENT)
    if code != 1 or out.count("DID NOT FAIL AS IT MUST") != 2:
        wrong.append(f"silent claims: check_claims_fail.py exit {code}, want 1 with two DID NOT FAIL\n{out[-1500:]}")
    for printed in ("two is three: DOES NOT HOLD", "two is three: does not hold"):
        code, out = verdict(f'print("{printed}")', script="run_notebook.py", claims=None)
        if code != 1 or "cell 0 printed that a claim does not hold" not in out:
            wrong.append(f"a printed {printed!r} without claim(): run_notebook.py exit {code}, want 1\n{out[-1500:]}")
    for w in wrong:
        print("test_check_claims_fail.py: " + w)
    print("check_claims_fail.py: " + ("right on every notebook" if not wrong else "WRONG"))
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
