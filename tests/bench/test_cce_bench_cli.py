#!/usr/bin/env python3
"""CPU test of cce_bench's command line: the benchmark names it registers (read
with --benchmark_list_tests, which needs no GPU) and its own flags' errors.
Nothing here runs a benchmark. Standard library only.

    python3 tests/bench/test_cce_bench_cli.py build/bench/cce_bench
"""

import re
import subprocess
import sys
import unittest

BENCH = None  # set from the command line
NAME = re.compile(r"^(cublas_floor|stage\d\d_[a-z0-9_]+)/(loss|loss_grad)/([a-z0-9]+)"
                  r"/iterations:(\d+)/repeats:5/manual_time$")


def run(*args):
    return subprocess.run([BENCH, *args], capture_output=True, text=True, encoding="utf-8", timeout=60)


def listed(*args):
    proc = run("--benchmark_list_tests", *args)
    if proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}: {proc.stderr}")
    return proc.stdout.split()


class CceBenchCli(unittest.TestCase):
    def test_names_of_one_shape(self):
        names = listed("--shapes=small")
        parsed = [NAME.match(n) for n in names]
        self.assertTrue(all(parsed), names)
        self.assertEqual({m.group(3) for m in parsed}, {"small"})
        self.assertEqual({m.group(4) for m in parsed}, {"10"})
        keys = [f"{m.group(1)}/{m.group(2)}" for m in parsed]
        # The floors come first: the stages' floor_ratio divides by them.
        self.assertEqual(keys[:2], ["cublas_floor/loss", "cublas_floor/loss_grad"])
        self.assertIn("stage01_materialized/loss", keys)
        self.assertIn("stage01_materialized/loss_grad", keys)
        self.assertEqual(len(keys), len(set(keys)))
        # Every stage has a loss case; loss_grad only where it has a backward (never without loss).
        for key in keys:
            if key.endswith("/loss_grad"):
                self.assertIn(key[: -len("_grad")], keys)

    def test_every_shape_by_default_in_order(self):
        shapes = []
        for name in listed():
            shape = NAME.match(name).group(3)
            if not shapes or shapes[-1] != shape:
                shapes.append(shape)
        self.assertEqual(shapes, ["small", "gpt2", "llama3", "gemma2"])

    def test_shapes_and_iters(self):
        names = listed("--shapes", "gemma2,gpt2", "--iters=3")
        shapes = {NAME.match(n).group(3) for n in names}
        self.assertEqual(shapes, {"gpt2", "gemma2"})
        self.assertEqual({NAME.match(n).group(4) for n in names}, {"3"})
        self.assertEqual(NAME.match(names[0]).group(3), "gpt2")  # canonical order, not the flag's

    def test_filter_is_google_benchmarks(self):
        names = listed("--shapes=small", "--benchmark_filter=^cublas_floor/")
        self.assertEqual([NAME.match(n).group(1) for n in names], ["cublas_floor"] * 2)

    def test_bad_flags(self):
        for args, fragment in [
            (["--shapes=small,bogus"], "unknown shape 'bogus' (known: small, gpt2, llama3, gemma2)"),
            (["--shapes="], "unknown shape ''"),
            (["--shapes"], "--shapes needs a value"),
            (["--iters=0"], "--iters expects an integer >= 1, got '0'"),
            (["--iters=5x"], "--iters expects an integer >= 1"),
            (["--no_such_flag"], "unrecognized command-line flag: --no_such_flag"),
        ]:
            with self.subTest(args=args):
                proc = run(*args)
                self.assertEqual(proc.returncode, 2, proc.stdout + proc.stderr)
                self.assertIn(fragment, proc.stderr)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: test_cce_bench_cli.py PATH/TO/cce_bench [unittest args]")
    BENCH = sys.argv.pop(1)
    unittest.main(verbosity=2)
