#!/usr/bin/env python3
"""bench/owner_products_figure.py (Matplotlib and NumPy; no GPU).

The figure is drawn to a temporary folder (exit 0, a PNG); its slots and
chunks match the numbers worked out by hand from kept_tiles.cu's and
backward_to_accumulator's rules; slots numbered block by block instead make
the script's claims fail (exit 1, DOES NOT HOLD). Bad flags: exit 2, one line.
"""

import os
import subprocess
import sys
import tempfile
import unittest

import figure_tests  # tests/bench/figure_tests.py

figure_tests.need_plotting("test_owner_products_figure.py")
BENCH = figure_tests.BENCH
SCRIPT = figure_tests.script("owner_products_figure")
figure = figure_tests.load("owner_products_figure")
run = figure_tests.runner("owner_products_figure")


BLOCK_MAJOR = """
import sys
sys.path.insert(0, {bench!r})
import owner_products_figure as figure
def block_major(flags):
    tiles, blocks = len(flags), len(flags[0])
    offsets = [0]
    for t in range(tiles):
        offsets.append(offsets[-1] + sum(flags[t]))
    slot_block, slot_tile, slot_of = [], [], [[-1] * tiles for _ in range(blocks)]
    for b in range(blocks):
        for t in range(tiles):
            if flags[t][b]:
                slot_of[b][t] = len(slot_block)
                slot_block.append(b)
                slot_tile.append(t)
    return offsets, slot_block, slot_tile, slot_of
figure.number_slots = block_major
sys.exit(figure.main(["--out", {out!r}]))
"""


class OwnerProducts(unittest.TestCase):
    def test_draws_and_holds(self):
        figure_tests.check_draws(self, run, "owner_products", ["14 kept pairs of 60, 3 chunks"])

    def test_slots_and_chunks_by_hand(self):
        flags = figure.keep_flags()
        offsets, slot_block, slot_tile, slot_of = figure.number_slots(flags)
        self.assertEqual(offsets, [0, 5, 8, 10, 10, 11, 11, 13, 13, 14, 14])
        self.assertEqual(slot_of[2], [2, 6, -1, -1, 10, -1, 11, -1, -1, -1])  # block 2, tiles ascending
        self.assertEqual([slot_of[b][1] for b in range(6)], [5, -1, 6, 7, -1, -1])  # tile 1, blocks ascending
        self.assertEqual(list(zip(slot_tile, slot_block))[:6], [(0, 0), (0, 1), (0, 2), (0, 4), (0, 5), (1, 0)])
        self.assertEqual(figure.make_chunks(offsets, 6), [(0, 1), (1, 6), (6, 10)])
        self.assertEqual(figure.make_chunks(offsets, 14), [(0, 10)])
        self.assertEqual(figure.make_chunks(offsets, 5), [(0, 1), (1, 4), (4, 10)])

    def test_block_major_slots_do_not_hold(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "owners.png")
            code = BLOCK_MAJOR.format(bench=BENCH, out=out)
            proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
            self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
            self.assertIn("DOES NOT HOLD: slots are numbered tile by tile", proc.stderr)

    def test_bad_flags_are_one_line_exit_2(self):
        figure_tests.check_bad_flags(self, run, "owner_products", seeded=False)


if __name__ == "__main__":
    unittest.main(verbosity=2)
