#!/usr/bin/env python3
"""bench/kept_map_figure.py on made-up inputs (NumPy and Matplotlib; no GPU).

A planted vocabulary: 16 popular entries, one in each 128-entry tile, hold
nearly all of every row's softmax. In their own order every tile holds one, so
every pair is kept; sorted by C·ΣE they fill the first tile, so 1 of 16 tiles
is kept. A flat vocabulary keeps every pair in every order, and the script's
claim that sorting helps must fail (exit 1, DOES NOT HOLD). Bad input: exit 2.
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "bench", "kept_map_figure.py")

try:
    import numpy as np
    import matplotlib  # noqa: F401
except ImportError as error:
    print(f"test_kept_map_figure.py: needs NumPy and Matplotlib ({error}); /usr/bin/python3 with python3-numpy "
          "and python3-matplotlib has them")
    sys.exit(1)


def write_inputs(folder, e, c, targets):
    os.makedirs(folder, exist_ok=True)
    np.save(os.path.join(folder, "e.npy"), e.astype(np.float32))
    np.save(os.path.join(folder, "c.npy"), c.astype(np.float32))
    np.save(os.path.join(folder, "targets.npy"), targets.astype(np.int64))


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)


class KeptMap(unittest.TestCase):
    n, d, v = 300, 4, 16 * 128

    def draw(self, tmp, e, c, targets):
        data = os.path.join(tmp, "data")
        write_inputs(data, e, c, targets)
        out, record = os.path.join(tmp, "map.png"), os.path.join(tmp, "map.json")
        proc = run(data, "--out", out, "--json", record, "--label", "made up", "--rows-per-pass", "64")
        return proc, out, record

    def test_planted_popular_entries(self):
        rng = np.random.default_rng(7)
        e = np.concatenate([np.ones((self.n, 1)), 0.1 * rng.standard_normal((self.n, self.d - 1))], axis=1)
        c = np.concatenate([np.full((self.v, 1), -10.0), 0.1 * rng.standard_normal((self.v, self.d - 1))], axis=1)
        popular = np.arange(16) * 128 + rng.integers(0, 128, 16)  # one per tile, anywhere in it
        c[popular, 0] = 10.0
        targets = rng.integers(0, self.v, self.n)
        targets[:5] = -100  # ignored rows count for nothing
        with tempfile.TemporaryDirectory() as tmp:
            proc, out, record = self.draw(tmp, e, c, targets)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            with open(out, "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
            with open(record) as f:
                got = json.load(f)
            self.assertEqual((got["n"], got["d"], got["v"], got["tiles"], got["token_blocks"]), (300, 4, 2048, 16, 3))
            self.assertEqual(got["kept_share"]["as_they_come"], 1.0)
            self.assertEqual(got["kept_share"]["sorted"], 1 / 16)
            self.assertEqual(got["kept_share"]["sorted_grouped"], 1 / 16)
            self.assertEqual(got["sorted_kept_in_zoom_tiles"], 1.0)
            self.assertNotIn("DOES NOT HOLD", proc.stderr)

    def test_flat_vocabulary_fails_the_claims(self):
        rng = np.random.default_rng(8)
        e = 3.0 * rng.standard_normal((self.n, self.d))
        c = rng.standard_normal((self.v, self.d))
        with tempfile.TemporaryDirectory() as tmp:
            proc, _, record = self.draw(tmp, e, c, rng.integers(0, self.v, self.n))
            self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
            self.assertIn("DOES NOT HOLD: sorting the vocabulary keeps fewer pairs", proc.stderr)
            with open(record) as f:
                self.assertEqual(json.load(f)["kept_share"]["sorted"], 1.0)

    def test_bad_input_is_one_line_exit_2(self):
        with tempfile.TemporaryDirectory() as tmp:
            proc = run(os.path.join(tmp, "none"), "--out", "x.png", "--json", "x.json")
            self.assertEqual(proc.returncode, 2)
            self.assertIn("e.npy", proc.stderr.strip().splitlines()[-1])
            write_inputs(tmp, np.zeros((3, 4)), np.zeros((5, 3)), np.zeros(3))
            proc = run(tmp, "--out", "x.png", "--json", "x.json")
            self.assertEqual(proc.returncode, 2)
            self.assertIn("shapes disagree", proc.stderr)
            proc = run(tmp, "--out", "x.png", "--json", "x.json", "--eps-exponent", "0")
            self.assertEqual(proc.returncode, 2)


if __name__ == "__main__":
    unittest.main(verbosity=2)
