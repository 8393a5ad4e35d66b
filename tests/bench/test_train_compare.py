#!/usr/bin/env python3
"""CPU test of bench/train_compare.py (no GPU used, nothing is timed):

- its command line: --help; bad values and refusals -> exit status 2 with one line (bad --runs, --seeds,
  sizes; runs that need cce_stages without it under --cce-python, or with a cce_stages that does not import;
  non-torch runs on the CPU; --merge with a missing file or one made with other settings; --plot-only with a
  missing or malformed file); without PyTorch or without a CUDA device, one line and exit status 77 (a
  stand-in torch.py on PYTHONPATH plays each part, so the test means the same on a machine with PyTorch);
- run selection (parse_runs), the default settings and the time estimate of the defaults;
- the summary on fabricated documents: the torch seeds' mean and spread, the band max(2 x spread, 0.01), the
  within-band decision printed as a measurement (MEASURED / NOT MEASURED), PASS / FAIL / SKIP on every check
  (that each run completed), the exit status (1 only when a run did not complete), the mean times without the
  first timing_skip steps;
- the JSON: write, read back and validate (round trip), the malformed documents refused, --merge's rules;
- --plot-only on a fabricated document: the summary, the exit status, a PNG (needs matplotlib, which the
  repository's install-deps.sh installs: python3-matplotlib).

With PyTorch and sentencepiece importable (not the case of /usr/bin/python3 on a machine without them), also:
a tiny training on the CPU (--allow-cpu) whose run torch:1 must reproduce bench/lm_data.py's training of the
same model exactly (held-out loss and training losses), a run that fails midway (exit status 1, status
"failed" in the JSON, the other run complete), and a non-finite loss caught. Without them those tests are
reported as skipped with the reason (python3 tests/bench/test_train_compare.py -v shows it).

    python3 tests/bench/test_train_compare.py
"""

import collections
import copy
import io
import json
import math
import os
import subprocess
import sys
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(ROOT, "bench", "train_compare.py")
LM_DATA = os.path.join(ROOT, "bench", "lm_data.py")
sys.path.insert(0, os.path.join(ROOT, "bench"))

import train_compare as tc  # noqa: E402  (imports neither torch nor numpy at import time)

try:
    import torch
except ImportError as exc:
    torch, TORCH_WHY = None, "PyTorch not importable (%s): the training on the CPU is checked where it is" % exc
else:
    TORCH_WHY = ""
try:
    import sentencepiece  # noqa: F401
except ImportError as exc:
    HAVE_SPM, SPM_WHY = False, "sentencepiece not importable (%s)" % exc
else:
    HAVE_SPM, SPM_WHY = True, ""


def run(*args, pythonpath=None, script=SCRIPT):
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return subprocess.run([sys.executable, script, *args], capture_output=True, text=True, encoding="utf-8",
                          env=env, timeout=300)


def one_error_line(test, proc, prefix="train_compare.py: error: "):
    test.assertEqual(proc.returncode, 2, proc.stdout + proc.stderr)
    lines = proc.stderr.strip().splitlines()
    test.assertEqual(len(lines), 1, proc.stderr)
    test.assertTrue(lines[0].startswith(prefix), lines[0])
    test.assertEqual(proc.stdout, "")
    return lines[0]


# ---------------------------------------------------------------------------
# Fabricated documents.
# ---------------------------------------------------------------------------

SETTINGS = {"dataset": "lm128k", "steps": 20, "batch": 32, "seq": 512, "lr": 3e-4, "warmup": 4, "layers": 6,
            "width": 2048, "heads": 16, "vocab_asked": 128000, "tied": True, "data_seed": 1234, "seeds": [1234, 5678],
            "eval_every": 10, "eval_tokens": 131072, "corpus_mb": 64.0, "max_file_kb": 1024, "heldout_percent": 3.0,
            "timing_skip": 2}


def fake_run(kind, k, final_loss, status="ok", steps=20, loss_ms=5.0, step_ms=150.0, reason=None):
    """A run of `steps` steps evaluated at 0, 10, 20 whose held-out loss ends at final_loss; the first two steps
    slow (100 ms), the rest at loss_ms and step_ms."""
    run = tc.new_run(kind, k, SETTINGS["seeds"][k - 1], steps)
    done = steps if status == "ok" else steps // 2
    s = run["series"]
    for i in range(1, done + 1):
        s["step"].append(i)
        s["train_loss"].append(10.0 - 0.2 * i)
        s["loss_ms"].append(100.0 if i <= 2 else loss_ms)
        s["step_ms"].append(100.0 if i <= 2 else step_ms)
        s["lr"].append(3e-4)
        s["grad_norm"].append(1.0)
        s["kept_frac"].append(None if kind == "torch" else 0.5 - 0.01 * i)
        s["drop_eps_log2"].append(None if kind == "torch" else -10.0)
        s["dense_plan"].append(None if kind == "torch" else int(i < 5))
    points = [0, 10, 20] if status == "ok" else [0, 10]
    run["eval"]["step"] = points
    run["eval"]["heldout_loss"] = [12.24, final_loss + 1.0, final_loss][:len(points)]
    run.update(status=status, steps_done=done, reason=reason, seconds=12.5)
    return run


def fake_doc(runs):
    return {"schema": tc.SCHEMA,
            "context": {"tool": "bench/train_compare.py", "gpu": "NVIDIA H100 80GB HBM3", "commit": "abc1234",
                        "settings": dict(SETTINGS), "corpus": {"sha256": "00"}, "vocabulary": {"used": 128000},
                        "invocations": []},
            "runs": runs}


def standard_doc():
    """Seven runs: torch 3.900 and 3.904 (spread 0.004, band 0.01), final:1 inside, final:2 outside, the
    no-correction run inside, stage07 failed halfway, cce skipped."""
    return fake_doc([
        fake_run("torch", 1, 3.900, loss_ms=60.0, step_ms=155.0),
        fake_run("torch", 2, 3.904, loss_ms=62.0, step_ms=157.0),
        fake_run("final", 1, 3.909, loss_ms=30.0, step_ms=125.0),
        fake_run("final", 2, 3.915, loss_ms=31.0, step_ms=126.0),
        fake_run("final_no_correction", 1, 3.897, loss_ms=28.0, step_ms=122.0),
        fake_run("stage07", 1, 3.95, status="failed", reason="RuntimeError: cce_stages: planted"),
        dict(tc.new_run("cce", 1, 1234, 20), status="skipped", reason="cut_cross_entropy not installed"),
    ])


# ---------------------------------------------------------------------------
# Command line.
# ---------------------------------------------------------------------------


class CommandLine(unittest.TestCase):
    def test_help(self):
        proc = run("--help")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        for text in ("--runs torch:1,final:1", "the seven runs", "--plot-only",
                     "--merge", "--no-correction", "07_filter_sort", "max(2 x spread, 0.01 nats)", "PASS",
                     "exit status", "--cce-python", "kept_frac", "dense_plan", "last_stats"):
            self.assertIn(text, proc.stdout)

    def test_bad_values_are_one_line_and_exit_2(self):
        with tempfile.TemporaryDirectory() as tmp:
            empty = os.path.join(tmp, "empty")
            os.makedirs(empty)
            bad_json = os.path.join(tmp, "bad.json")
            with open(bad_json, "w") as f:
                f.write("{not json")
            other_json = os.path.join(tmp, "other.json")
            with open(other_json, "w") as f:
                json.dump({"context": {}, "benchmarks": []}, f)
            out = os.path.join(tmp, "out.json")
            for args, fragment in [
                (["--runs", "bogus:1"], "--runs: unknown run kind 'bogus'"),
                (["--runs", "torch:3"], "--runs: 'torch:3' needs seed 3, but --seeds has 2"),
                (["--runs", "torch:2", "--seeds", "7"], "'torch:2' needs seed 2, but --seeds has 1"),
                (["--runs", "torch:0"], "'torch:0': K must be an integer >= 1"),
                (["--runs", "torch:x"], "'torch:x': K must be an integer >= 1"),
                (["--runs", "torch:1,torch"], "'torch:1' is named twice"),
                (["--runs", ""], "--runs: expected KIND[:K],..."),
                (["--runs", "torch:1,,torch:2"], "--runs: expected KIND[:K],..."),
                (["--seeds", "1,1"], "argument --seeds: the seeds must be distinct, got '1,1'"),
                (["--seeds", "a"], "argument --seeds: expected comma-separated integers >= 0, got 'a'"),
                (["--steps", "0"], "argument --steps: expected an integer >= 1, got '0'"),
                (["--eval-every", "0"], "argument --eval-every: expected an integer >= 1"),
                (["--timing-skip", "-1"], "argument --timing-skip: expected an integer >= 0"),
                (["--dataset", "lm64k"], "argument --dataset: invalid choice: 'lm64k'"),
                (["--heldout-percent", "60"], "--heldout-percent must be at most 50"),
                (["--seq", "1"], "--seq must be at least 2"),
                (["--vocab", "100"], "--vocab must be at least 512"),
                (["--width", "100", "--heads", "3"], "lm128k: --width 100 is not a multiple of --heads 3"),
                (["--runs", "torch:1,final:1", "--cce-python", empty],
                 "--cce-python %s holds no cce_stages package" % empty),
                (["--runs", "torch:1", "--merge", "--out", out], "--merge: %s does not exist" % out),
                (["--runs", "torch:1", "--out", tmp], "--out %s is a directory" % tmp),
                (["--no-such-flag"], "unrecognized arguments: --no-such-flag"),
                (["--plot-only", os.path.join(tmp, "missing.json")], "--plot-only: cannot read"),
                (["--plot-only", bad_json], "--plot-only: %s is not JSON" % bad_json),
                (["--plot-only", other_json], "--plot-only: %s: schema is None, expected 1" % other_json),
            ]:
                with self.subTest(args=args):
                    line = one_error_line(self, run(*args, "--cce-python", empty) if "--cce-python" not in args
                                          else run(*args))
                    self.assertIn(fragment, line)

    def test_default_runs_need_cce_stages(self):
        with tempfile.TemporaryDirectory() as empty:
            line = one_error_line(self, run("--cce-python", empty))
            self.assertIn("the runs final:1,final:2,final_no_correction:1,stage07:1 need", line)

    def test_cce_stages_that_does_not_import_is_refused(self):
        with tempfile.TemporaryDirectory() as tmp:
            fake = os.path.join(tmp, "fake")
            os.makedirs(os.path.join(tmp, "cce", "cce_stages"))
            os.makedirs(fake)
            with open(os.path.join(tmp, "cce", "cce_stages", "__init__.py"), "w") as f:
                f.write("raise ImportError('cce_stages: libcce_capi.so is not there;\\nbuild the repository')\n")
            with open(os.path.join(fake, "torch.py"), "w") as f:
                f.write("__version__ = '0.0-stand-in'\nclass cuda:\n    @staticmethod\n    def is_available():\n"
                        "        return True\n")
            proc = run("--runs", "torch:1,stage07:1", "--cce-python", os.path.join(tmp, "cce"), "--out",
                       os.path.join(tmp, "out.json"), pythonpath=fake)
            line = one_error_line(self, proc)
            self.assertIn("cannot import cce_stages from --cce-python", line)
            self.assertIn("libcce_capi.so is not there", line)
            self.assertIn("which the runs stage07:1 need", line)
            self.assertFalse(os.path.exists(os.path.join(tmp, "out.json")), "nothing is written")

    def test_without_pytorch_exit_77(self):
        with tempfile.TemporaryDirectory() as fake:
            with open(os.path.join(fake, "torch.py"), "w") as f:
                f.write("raise ImportError(\"No module named 'torch'\", name='torch')\n")
            # cce:1 needs cut_cross_entropy, which is optional: not a refusal.
            for extra in ([], ["--allow-cpu"]):
                proc = run("--runs", "torch:1,cce:1", "--out", os.path.join(fake, "out.json"), *extra,
                           pythonpath=fake)
                self.assertEqual(proc.returncode, 77, proc.stdout + proc.stderr)
                lines = (proc.stdout + proc.stderr).strip().splitlines()
                self.assertEqual(len(lines), 1, proc.stdout + proc.stderr)
                self.assertIn("train_compare.py: SKIPPED: PyTorch not found", lines[0])
                self.assertFalse(os.path.exists(os.path.join(fake, "out.json")), "nothing is written")

    def test_without_gpu_exit_77_and_cpu_runs_torch_only(self):
        with tempfile.TemporaryDirectory() as fake:
            with open(os.path.join(fake, "torch.py"), "w") as f:
                f.write("__version__ = '0.0-stand-in'\nclass cuda:\n    @staticmethod\n    def is_available():\n"
                        "        return False\n")
            os.makedirs(os.path.join(fake, "cce", "cce_stages"))
            proc = run("--runs", "torch:1", "--out", os.path.join(fake, "out.json"), pythonpath=fake)
            self.assertEqual(proc.returncode, 77, proc.stdout + proc.stderr)
            lines = (proc.stdout + proc.stderr).strip().splitlines()
            self.assertEqual(len(lines), 1, proc.stdout + proc.stderr)
            self.assertIn("train_compare.py: SKIPPED: PyTorch 0.0-stand-in sees no CUDA device", lines[0])
            proc = run("--allow-cpu", "--runs", "torch:1,final:1,cce:1", "--cce-python",
                       os.path.join(fake, "cce"), "--out", os.path.join(fake, "out.json"), pythonpath=fake)
            line = one_error_line(self, proc)
            self.assertIn("only the torch runs can run; leave out final:1,cce:1", line)

    def test_merge_refuses_other_settings(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "out.json")
            tc.write_json(out, standard_doc())
            line = one_error_line(self, run("--runs", "torch:1", "--merge", "--out", out, "--steps", "100"))
            self.assertIn("--merge: %s cannot be merged: it was made with steps = 20, this command has 100" % out,
                          line)
            with open(out, "w") as f:
                f.write("[]")
            line = one_error_line(self, run("--runs", "torch:1", "--merge", "--out", out, "--steps", "20"))
            self.assertIn("--merge: %s: the top level is not an object" % out, line)


class Selection(unittest.TestCase):
    def test_parse_runs(self):
        self.assertEqual(tc.parse_runs(tc.DEFAULT_RUNS, 2),
                         [("torch", 1), ("torch", 2), ("final", 1), ("final", 2), ("final_no_correction", 1),
                          ("stage07", 1), ("cce", 1)])
        self.assertEqual(tc.parse_runs("final:2, torch", 2), [("final", 2), ("torch", 1)])
        self.assertEqual(tc.parse_runs("stage07:3", 3), [("stage07", 3)])
        for text in ("", "torch:1,torch:1", "torch:4", "nope", "torch:-1", ":1"):
            with self.subTest(text=text):
                with self.assertRaises(ValueError):
                    tc.parse_runs(text, 3)

    def test_parse_args_keeps_the_order_and_seeds(self):
        with tempfile.TemporaryDirectory() as tmp:
            args = tc.parse_args(["--runs", "final:2,torch:1", "--seeds", "7,9", "--cce-python", tmp + "/none",
                                  "--runs", "torch:2,torch:1"])
            self.assertEqual(args.run_list, [("torch", 2), ("torch", 1)])  # the last --runs wins
            self.assertEqual(args.seeds, [7, 9])

    def test_defaults(self):
        args = tc.parse_args(["--runs", "torch:1"])
        cfg = tc.model_config(args)
        self.assertEqual((cfg["steps"], cfg["warmup"], cfg["eval_every"]), (250, 50, 25))
        self.assertEqual((cfg["layers"], cfg["width"], cfg["heads"], cfg["vocab"], cfg["lr"]),
                         (6, 2048, 16, 128000, 3e-4))
        self.assertEqual(tc.output_path(args), os.path.join(ROOT, "docs", "train_compare_lm128k.json"))
        self.assertEqual(tc.figure_path(args, "lm128k"),
                         os.path.join(ROOT, "docs", "figures", "train_compare_lm128k.png"))
        args = tc.parse_args(["--runs", "torch:1", "--dataset", "lm32k", "--steps", "300", "--warmup", "20"])
        cfg = tc.model_config(args)
        self.assertEqual((cfg["steps"], cfg["warmup"], cfg["eval_every"], cfg["width"], cfg["lr"]),
                         (300, 20, 30, 768, 6e-4))
        self.assertEqual(sorted(tc.settings(args)), sorted(tc.SETTING_KEYS))

    def test_loss_functions_call_the_op_with_each_runs_stage_and_flags(self):
        calls = []

        class FakeStages:
            @staticmethod
            def linear_cross_entropy(h, c, y, **kw):
                calls.append(kw)
                return len(calls)

        class FakeTorch:
            class nn:
                functional = None
        kinds = ["final", "final_no_correction", "stage07"]
        funcs = tc.loss_functions(FakeTorch, kinds + ["cce"], FakeStages, None)
        self.assertEqual(sorted(funcs), sorted(kinds))  # cce: no function without cut_cross_entropy
        for kind in kinds:
            funcs[kind](None, None, None)
        self.assertEqual(calls, [{"flags": ""}, {"flags": "--no-correction"},
                                 {"flags": "", "stage": "07_filter_sort"}])
        seen = []
        funcs = tc.loss_functions(FakeTorch, ["cce"], None, lambda h, c, y, **kw: seen.append(kw))
        funcs["cce"](None, None, None)
        self.assertEqual(seen, [{"impl": "cce"}])

    def test_fp32_logits_loss_turns_tf32_on_and_multiplies_fp32_copies(self):
        seen = []

        class Flags:
            allow_tf32 = False

        class FakeTensor:
            def __init__(self, name):
                self.name = name

            def float(self):
                return FakeTensor(self.name + ".float")

        class FakeTorch:
            class backends:
                class cuda:
                    matmul = Flags

            class nn:
                class functional:
                    @staticmethod
                    def linear(a, b):
                        seen.append(("linear", a.name, b.name, Flags.allow_tf32))
                        return FakeTensor("logits")

                    @staticmethod
                    def cross_entropy(logits, y):
                        seen.append(("cross_entropy", logits.name, y))
                        return 1.5
        funcs = tc.loss_functions(FakeTorch, ["torch_fp32_logits"], None, None)
        self.assertEqual(funcs["torch_fp32_logits"](FakeTensor("h"), FakeTensor("c"), "y"), 1.5)
        self.assertEqual(seen, [("linear", "h.float", "c.float", True), ("cross_entropy", "logits", "y")])
        self.assertNotIn("torch_fp32_logits", tc.DEFAULT_RUNS)

    def test_eval_steps(self):
        self.assertEqual(tc.eval_steps(250, 25), list(range(0, 251, 25)))
        self.assertEqual(tc.eval_steps(10, 4), [0, 4, 8, 10])
        self.assertEqual(tc.eval_steps(3, 5), [0, 3])

    def test_the_defaults_fit_ten_minutes_on_an_h100(self):
        for dataset in ("lm128k", "lm32k"):
            args = tc.parse_args(["--runs", "torch:1", "--dataset", dataset])
            total, parts = tc.estimate_seconds(args, tc.parse_runs(tc.DEFAULT_RUNS, 2))
            self.assertTrue(360 <= total <= 570, (dataset, total, parts))
            self.assertEqual(set(parts), {"setup", "training", "first_calls", "model_init", "evaluation"})
            steps = tc.model_config(args)["steps"]
            shorter = tc.parse_args(["--runs", "torch:1", "--dataset", dataset, "--steps", "50"])
            short, short_parts = tc.estimate_seconds(shorter, tc.parse_runs(tc.DEFAULT_RUNS, 2))
            self.assertAlmostEqual(short_parts["training"], parts["training"] * 50 / steps, places=6)
            self.assertLess(short, total)
        # lm128k: 0.155 s a torch step (lm_data.py's measurement), stage07 1.6 times that.
        args = tc.parse_args(["--runs", "torch:1"])
        one = tc.estimate_seconds(args, [("torch", 1)])[1]["training"]
        self.assertAlmostEqual(one, 250 * 124.1 / 800, places=6)
        self.assertAlmostEqual(tc.estimate_seconds(args, [("stage07", 1)])[1]["training"], 1.6 * one, places=6)


# ---------------------------------------------------------------------------
# The summary.
# ---------------------------------------------------------------------------


class Summary(unittest.TestCase):
    def check(self, summary, what_part):
        found = [c for c in summary["checks"] + summary["band_measured"] if what_part in c["what"]]
        self.assertEqual(len(found), 1, (what_part, summary["checks"], summary["band_measured"]))
        return found[0]

    def test_standard_document(self):
        s = tc.summarize(standard_doc())
        self.assertAlmostEqual(s["torch_mean"], 3.902)
        self.assertAlmostEqual(s["torch_spread"], 0.004)
        self.assertAlmostEqual(s["band"], 0.01)  # the floor: 2 x 0.004 < 0.01
        self.assertEqual(s["torch_runs_completed"], 2)
        self.assertIn("+0.0070, inside the band 0.0100", self.check(s, "final:1 held-out")["detail"])
        self.assertIn("+0.0130, outside (above) the band", self.check(s, "final:2 held-out")["detail"])
        self.assertEqual(self.check(s, "final:2 held-out")["result"], "MEASURED")
        self.assertIn("-0.0050, inside", self.check(s, "final_no_correction:1 held-out")["detail"])
        self.assertEqual(self.check(s, "stage07:1 held-out")["result"], "NOT MEASURED")
        self.assertEqual(self.check(s, "cce:1 held-out")["result"], "NOT MEASURED")
        self.assertEqual(self.check(s, "run torch:1")["result"], "PASS")
        self.assertEqual(self.check(s, "run stage07:1")["result"], "FAIL")
        self.assertIn("planted", self.check(s, "run stage07:1")["detail"])
        self.assertEqual(self.check(s, "run cce:1")["result"], "SKIP")
        self.assertEqual(self.check(s, "run cce:1")["detail"], "cut_cross_entropy not installed")
        self.assertEqual(s["exit_status"], 1)  # stage07 did not complete
        self.assertEqual(len(s["failed_runs"]), 1)
        rows = {r["id"]: r for r in s["rows"]}
        self.assertAlmostEqual(rows["final:1"]["delta_vs_torch_mean"], 0.007)
        self.assertIs(rows["final:1"]["within_band"], True)
        self.assertIs(rows["final:2"]["within_band"], False)
        self.assertIsNone(rows["stage07:1"]["final_heldout_loss"])
        # The first timing_skip (2) steps, at 100 ms, are left out of the means.
        self.assertAlmostEqual(rows["torch:1"]["mean_loss_ms"], 60.0)
        self.assertAlmostEqual(rows["final:1"]["mean_step_ms"], 125.0)
        self.assertAlmostEqual(rows["stage07:1"]["mean_loss_ms"], 5.0)  # its completed steps

    def test_a_missed_band_is_a_measurement(self):
        doc = standard_doc()
        doc["runs"] = [r for r in doc["runs"] if r["kind"] != "stage07"]
        s = tc.summarize(doc)
        self.assertIn("outside (above)", self.check(s, "final:2 held-out")["detail"])
        self.assertNotIn("FAIL", [c["result"] for c in s["checks"]])  # cce:1 skipped, the rest completed
        self.assertEqual(s["exit_status"], 0)
        self.assertEqual(s["failed_runs"], [])

    def test_the_band_grows_with_the_spread(self):
        doc = fake_doc([fake_run("torch", 1, 3.90), fake_run("torch", 2, 3.93), fake_run("final", 1, 3.96),
                        fake_run("final", 2, 3.99)])
        s = tc.summarize(doc)
        self.assertAlmostEqual(s["torch_spread"], 0.03)
        self.assertAlmostEqual(s["band"], 0.06)
        self.assertIn("+0.0450, inside", self.check(s, "final:1 held-out")["detail"])  # 0.045 <= 0.06
        self.assertIn("+0.0750, outside (above)", self.check(s, "final:2 held-out")["detail"])  # 0.075 > 0.06
        self.assertEqual(s["exit_status"], 0)

    def test_one_torch_seed_gives_no_band(self):
        doc = fake_doc([fake_run("torch", 1, 3.90), fake_run("final", 1, 3.90)])
        s = tc.summarize(doc)
        self.assertIsNone(s["torch_spread"])
        self.assertIsNone(s["band"])
        c = self.check(s, "final:1 held-out")
        self.assertEqual(c["result"], "NOT MEASURED")
        self.assertIn("needs two completed torch runs (have 1)", c["detail"])
        self.assertEqual(s["exit_status"], 0)

    def test_a_run_left_running_did_not_complete(self):
        run = fake_run("final", 1, 3.9, status="failed")
        run.update(status="running", reason=None)
        s = tc.summarize(fake_doc([fake_run("torch", 1, 3.9), run]))
        c = self.check(s, "run final:1")
        self.assertEqual(c["result"], "FAIL")
        self.assertIn("still running", c["detail"])
        self.assertEqual(s["exit_status"], 1)

    def test_every_claim_printed_says_pass_fail_or_skip_and_the_band_is_measured(self):
        text = tc.format_summary(tc.summarize(standard_doc()), SETTINGS)
        lines = text.splitlines()
        start = next(i for i, line in enumerate(lines) if line.startswith("torch seeds:"))
        self.assertIn("mean 3.9020, spread (max - min) 0.0040; band 0.0100", lines[start])
        printed = lines[start + 1:]
        self.assertEqual(len(printed), 7 + 5 + 1)  # one per run, one per non-torch run, the verdict
        claims = [line for line in printed if not line.startswith(("MEASURED  ", "NOT MEASURED  "))]
        self.assertEqual(len(claims), 7 + 1)  # the band is measured, not claimed
        for line in claims:
            self.assertRegex(line, r"^(PASS|FAIL|SKIP)[ :]")
        self.assertTrue(claims[-1].startswith("FAIL: 1 run(s) did not complete"), claims[-1])
        table = lines[1:start]
        self.assertEqual(len(table), 2 + 7)
        self.assertIn("final:2", table[5])
        self.assertIn("+0.0130", table[5])
        self.assertIn(" no ", table[5])
        good = tc.format_summary(tc.summarize(fake_doc([fake_run("torch", 1, 3.9)])))
        self.assertTrue(good.splitlines()[-1].startswith("PASS: every run"), good)


# ---------------------------------------------------------------------------
# The JSON.
# ---------------------------------------------------------------------------


class Document(unittest.TestCase):
    def test_round_trip(self):
        doc = standard_doc()
        doc["runs"][0]["series"]["train_loss"][3] = float("nan")  # written as null
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "sub", "out.json")
            tc.write_json(path, doc)
            back = tc.load_document(path)
            with open(path) as f:
                text = f.read()
        expected = copy.deepcopy(doc)
        expected["runs"][0]["series"]["train_loss"][3] = None
        self.assertEqual(back, expected)
        self.assertIn('"step": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20]', text)
        self.assertNotIn("NaN", text)
        self.assertLess(len(text.splitlines()), 400)  # the series on one line each
        self.assertEqual(tc.summarize(back)["exit_status"], 1)

    def test_new_run_has_every_series(self):
        run = tc.new_run("final_no_correction", 1, 1234, 250)
        self.assertEqual(set(run["series"]), set(tc.SERIES_KEYS))
        self.assertEqual(set(run["eval"]), set(tc.EVAL_KEYS))
        self.assertEqual((run["id"], run["status"], run["steps_planned"]), ("final_no_correction:1", "running", 250))
        self.assertIn("--no-correction", run["loss_function"])
        self.assertTrue({"kept_frac", "drop_eps_log2", "dense_plan"} <= set(tc.SERIES_KEYS))

    def test_stage_statistics_from_last_stats(self):
        # cce_stages.BackwardStats's fields, without torch: the run's stage and flags are asked for, stage 10's
        # decided share is the kept fraction (also under its dense plan), the others' own kept fraction.
        stats = collections.namedtuple("BackwardStats", "plan kept_fraction decided_kept_fraction eps drop_eps_log2 "
                                                        "misplaced_mass units kept_units")

        class FakeOp:
            FINAL_STAGE = "10_plan_per_batch"
            asked = []

            def last_stats(self, stage, flags):
                self.asked.append((stage, flags))
                return {"10_plan_per_batch": stats("dense", 1.0, 0.4, 2 ** -10, -10.0, 0.01, 100, 100),
                        "07_filter_sort": stats(None, 0.25, None, 2 ** -12, -12.0, None, 8, 2)}.get(stage)

        op = FakeOp()
        self.assertEqual(tc.stage_statistics("final_no_correction", op), (0.4, -10.0, 1))
        self.assertEqual(tc.stage_statistics("stage07", op), (0.25, -12.0, None))
        self.assertEqual(tc.stage_statistics("torch", op), (None, None, None))
        self.assertEqual(tc.stage_statistics("cce", op), (None, None, None))
        self.assertEqual(op.asked, [("10_plan_per_batch", "--no-correction"), ("07_filter_sort", "")])

    def test_malformed_documents_are_refused(self):
        def broken(change):
            doc = standard_doc()
            change(doc)
            return doc
        cases = [
            (broken(lambda d: d.update(schema=2)), "schema is 2, expected 1"),
            (broken(lambda d: d["context"].pop("settings")), "context.settings is missing"),
            (broken(lambda d: d["context"]["settings"].pop("timing_skip")), "context.settings lacks timing_skip"),
            (broken(lambda d: d.update(runs={})), "runs is not a list"),
            (broken(lambda d: d["runs"][1].pop("eval")), "runs[1] lacks eval"),
            (broken(lambda d: d["runs"][1].update(kind="liger")), "runs[1]: unknown kind 'liger'"),
            (broken(lambda d: d["runs"][1].update(status="done")), "runs[1]: unknown status 'done'"),
            (broken(lambda d: d["runs"][1].update(id="torch:1")), "runs[1]: id torch:1 appears twice"),
            (broken(lambda d: d["runs"][2]["series"]["loss_ms"].pop()), "runs[2].series: the lists"),
            (broken(lambda d: d["runs"][2]["eval"].pop("heldout_loss")), "runs[2].eval must hold the lists"),
        ]
        for doc, fragment in cases:
            with self.subTest(fragment=fragment):
                with self.assertRaises(tc.DocumentError) as cm:
                    tc.validate_document(doc)
                self.assertIn(fragment, str(cm.exception))
        self.assertIs(tc.validate_document(standard_doc())["schema"], 1)

    def test_merge_rules(self):
        doc = standard_doc()
        self.assertIsNone(tc.merge_mismatch(doc, dict(SETTINGS)))
        other = dict(SETTINGS, seeds=[1234, 9999])
        self.assertEqual(tc.merge_mismatch(doc, other),
                         "it was made with seeds = [1234, 5678], this command has [1234, 9999]")
        old = [tc.new_run("torch", 1, 1, 5), tc.new_run("final", 1, 1, 5), tc.new_run("cce", 1, 1, 5)]
        new = [dict(tc.new_run("cce", 1, 1, 5), status="ok"), tc.new_run("stage07", 1, 1, 5)]
        merged = tc.merge_runs(old, new)
        self.assertEqual([r["id"] for r in merged], ["torch:1", "final:1", "cce:1", "stage07:1"])
        self.assertEqual(merged[2]["status"], "ok")


class PlotOnly(unittest.TestCase):
    def setUp(self):
        try:
            import matplotlib  # noqa: F401
        except ImportError as exc:  # fail loudly: install-deps.sh installs python3-matplotlib
            self.fail("matplotlib is needed for --plot-only (%s); run with /usr/bin/python3 or install it" % exc)

    def test_plot_only_draws_a_png_and_prints_the_summary(self):
        with tempfile.TemporaryDirectory() as tmp:
            path, png = os.path.join(tmp, "doc.json"), os.path.join(tmp, "fig", "f.png")
            tc.write_json(path, standard_doc())
            proc = run("--plot-only", path, "--figure", png)
            self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)  # stage07:1 did not complete
            self.assertIn("run stage07:1 completed 10/20 steps: RuntimeError: cce_stages: planted", proc.stdout)
            self.assertIn("MEASURED  final:2 held-out loss against the torch seeds' mean: 3.9150 vs 3.9020: +0.0130, "
                          "outside (above) the band", proc.stdout)
            self.assertIn("wrote %s" % png, proc.stdout)
            with open(png, "rb") as f:
                data = f.read()
            self.assertEqual(data[:8], b"\x89PNG\r\n\x1a\n")
            self.assertGreater(len(data), 20000)

            doc = standard_doc()
            doc["runs"] = [r for r in doc["runs"] if r["status"] == "ok"]
            tc.write_json(path, doc)
            os.remove(png)
            proc = run("--plot-only", path, "--figure", png)
            self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
            self.assertTrue(os.path.isfile(png))
            proc = run("--plot-only", path, "--figure", "")
            self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
            self.assertNotIn("wrote", proc.stdout)
            self.assertIn("PASS: every run that was not skipped completed", proc.stdout)

    def test_plot_figure_in_process(self):
        with tempfile.TemporaryDirectory() as tmp:
            png = os.path.join(tmp, "f.png")
            self.assertEqual(tc.plot_figure(standard_doc(), png), png)
            self.assertGreater(os.path.getsize(png), 20000)
            doc = fake_doc([dict(tc.new_run("cce", 1, 1234, 20), status="skipped", reason="x")])
            tc.plot_figure(doc, png)  # nothing to draw: still a figure, no exception


# ---------------------------------------------------------------------------
# A tiny training on the CPU (PyTorch and sentencepiece needed).
# ---------------------------------------------------------------------------

TINY = ["--corpus-mb", "2", "--layers", "1", "--width", "32", "--heads", "2", "--steps", "6", "--batch", "2",
        "--seq", "32", "--eval-tokens", "256", "--threads", "2"]


@unittest.skipIf(torch is None, TORCH_WHY)
@unittest.skipIf(not HAVE_SPM, SPM_WHY)
class CpuTraining(unittest.TestCase):
    def test_torch_run_reproduces_lm_data(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "out.json")
            proc = run("--allow-cpu", "--runs", "torch:1,torch:2", "--vocab", "1000", "--eval-every", "3",
                       "--tokenizer-dir", os.path.join(tmp, "tok"), "--out", out, "--figure", "", *TINY)
            self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
            doc = tc.load_document(out)
            self.assertEqual([r["id"] for r in doc["runs"]], ["torch:1", "torch:2"])
            for r in doc["runs"]:
                self.assertEqual(r["status"], "ok")
                self.assertEqual(r["series"]["step"], [1, 2, 3, 4, 5, 6])
                self.assertEqual(r["eval"]["step"], [0, 3, 6])
                self.assertTrue(all(v > 0 for v in r["series"]["loss_ms"]))
                self.assertTrue(all(a <= b for a, b in zip(r["series"]["loss_ms"], r["series"]["step_ms"])))
                self.assertEqual(r["series"]["kept_frac"], [None] * 6)
            self.assertNotEqual(doc["runs"][0]["eval"]["heldout_loss"][0], doc["runs"][1]["eval"]["heldout_loss"][0],
                                "different seeds, different initializations")
            self.assertIn("PASS  run torch:2 completed 6/6 steps", proc.stdout)

            lm = run("--allow-cpu", "--only", "lm128k", "--vocab-lm128k", "1000", "--n", "64", "--log-every", "1",
                     "--out", os.path.join(tmp, "lm"), "--stats-dir", "", *TINY, script=LM_DATA)
            self.assertEqual(lm.returncode, 0, lm.stdout + lm.stderr)
            with open(os.path.join(tmp, "lm", "lm128k", "stats.json")) as f:
                stats = json.load(f)
            ours = doc["runs"][0]
            self.assertEqual(stats["corpus"]["sha256"], doc["context"]["corpus"]["sha256"])
            self.assertEqual(stats["heldout_loss_model"]["loss"], ours["eval"]["heldout_loss"][-1])
            self.assertEqual([p[1] for p in stats["training"]["loss_curve"]],
                             [round(v, 4) for v in ours["series"]["train_loss"]])

    def test_a_failing_run_gives_exit_1_and_the_rest_completes(self):
        real = tc.loss_functions
        calls = {"n": 0}

        def planted(torch_, kinds, cce_stages, cce_lce):
            funcs = real(torch_, kinds, cce_stages, cce_lce)
            good = funcs["torch"]

            def sometimes(h, c, y):
                calls["n"] += 1
                if calls["n"] == 6 + 2:  # the second run's second step
                    raise RuntimeError("planted failure")
                return good(h, c, y)
            return dict(funcs, torch=sometimes)

        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "out.json")
            tc.loss_functions = planted
            try:
                with redirect_stdout(io.StringIO()) as printed, redirect_stderr(io.StringIO()):
                    status = tc.main(["--allow-cpu", "--runs", "torch:1,torch:2", "--vocab", "1000",
                                      "--eval-every", "1", "--tokenizer-dir", os.path.join(tmp, "tok"),
                                      "--out", out, "--figure", "", *TINY])
            finally:
                tc.loss_functions = real
            self.assertEqual(status, 1)
            doc = tc.load_document(out)
            first, second = doc["runs"]
            self.assertEqual(first["status"], "ok")
            self.assertEqual(second["status"], "failed")
            self.assertEqual(second["reason"], "RuntimeError: planted failure")
            self.assertEqual(second["steps_done"], 1)
            self.assertEqual(second["series"]["step"], [1])
            self.assertIn("FAIL  run torch:2 completed 1/6 steps: RuntimeError: planted failure", printed.getvalue())
            self.assertEqual(doc["summary"]["exit_status"], 1)

    def tiny_trainer(self, eval_every):
        """A Trainer on synthetic tokens (no corpus): a stream where each token says which comes next, half the
        time (something to learn)."""
        import numpy as np
        args = tc.parse_args(["--allow-cpu", "--runs", "torch:1", "--vocab", "1000", "--eval-every", str(eval_every),
                              "--lr", "1e-2", *TINY])
        cfg = tc.model_config(args)
        rng = np.random.default_rng(0)

        def stream(n):
            ids = [int(rng.integers(0, 600))]
            for _ in range(n - 1):
                ids.append((ids[-1] * 31 + 7) % 600 if rng.random() < 0.5 else int(rng.integers(0, 600)))
            return np.array(ids, dtype=np.int32)
        train_ids, held_ids = stream(5000), stream(1000)
        return tc.Trainer(torch, np, torch.device("cpu"), args, cfg, 600, train_ids, held_ids, lambda m: None), cfg

    def test_an_op_that_makes_its_gradient_in_the_forward_trains_like_torch(self):
        """The cce_stages op's pattern (loss and dE, dC computed in the forward, scaled in the backward) through
        the trainer's split graph: the same training as PyTorch's loss, up to the op's fp32 logits."""
        F = torch.nn.functional

        class Op(torch.autograd.Function):
            @staticmethod
            def forward(ctx, e, c, y):
                z = e.float() @ c.float().T
                p = torch.softmax(z, dim=1)
                p[torch.arange(len(y)), y] -= 1.0
                p /= len(y)
                ctx.save_for_backward((p @ c.float()).to(e.dtype), (p.T @ e.float()).to(c.dtype))
                return F.cross_entropy(z, y)

            @staticmethod
            def backward(ctx, g):
                de, dc = ctx.saved_tensors
                return de * g, dc * g, None

        results = {}
        for name, fn in (("torch", lambda h, c, y: F.cross_entropy(F.linear(h, c).float(), y)),
                         ("op", lambda h, c, y: Op.apply(h, c, y))):
            trainer, cfg = self.tiny_trainer(3)
            run_ = tc.new_run("torch", 1, 1234, cfg["steps"])
            trainer.train(run_, fn, None, lambda: None)
            self.assertEqual(run_["status"], "ok")
            results[name] = run_["eval"]["heldout_loss"]
        self.assertEqual(results["torch"][0], results["op"][0])  # the same initialization
        self.assertLess(results["op"][-1], results["op"][0] - 0.01)  # it learns
        self.assertLess(abs(results["op"][-1] - results["torch"][-1]), 2e-3)
        self.assertNotEqual(results["op"][-1], results["torch"][-1])  # fp32 logits, not the same arithmetic

    def test_a_non_finite_loss_stops_the_run(self):
        trainer, cfg = self.tiny_trainer(2)
        run_ = tc.new_run("torch", 1, 1234, cfg["steps"])
        F = torch.nn.functional
        with self.assertRaises(tc.NonFinite) as cm:
            trainer.train(run_, lambda h, c, y: F.cross_entropy(F.linear(h, c).float(), y) * float("nan"), None,
                          lambda: None)
        self.assertEqual(str(cm.exception), "non-finite training loss at step 1")  # caught at the first flush
        self.assertEqual(run_["status"], "running")
        self.assertTrue(math.isnan(run_["series"]["train_loss"][0]))


if __name__ == "__main__":
    unittest.main(verbosity=2)
