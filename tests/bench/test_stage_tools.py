#!/usr/bin/env python3
"""CPU test of bench/stage_timeline.py, bench/timeline_figure.py and bench/plan_series.py without PyTorch or a GPU:

- stage_timeline's report on hand-made trace events: the idle time before each operation counts from the end
  of every operation that started before it (a side stream's overlap is no idle time), the span, the sums by
  kernel family (arguments, template arguments and anonymous namespaces left out);
- stage_timeline's host side: each API call with the host's own time before it; each GPU wait with when its next
  operation was queued (tied by the correlation id) and what the host did meanwhile;
- timeline_figure: a report read back (its title, operations, span), each kernel family in its step of the plan
  (the tail correction's cuBLAS kernels by prefix, an unknown kernel in "other"), time that two operations share
  counted once (a bar is the span), the idle time apart; its command
  line's errors (exit 2), and with matplotlib the figure itself;
- plan_series's summary: the calls after the two settling ones;
- both command lines: bad values -> exit status 2 with the reason; without PyTorch (a stand-in torch.py that
  raises ImportError, first on PYTHONPATH, so the test means the same on a machine that has PyTorch) one line
  and exit status 77.

    python3 tests/bench/test_stage_tools.py
"""
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import plan_series  # noqa: E402
import stage_timeline  # noqa: E402
import timeline_figure  # noqa: E402


def event(ts, dur, name):
    return {"ts": ts, "dur": dur, "name": name, "ph": "X", "cat": "kernel"}


class Timeline(unittest.TestCase):
    def test_kernel_family(self):
        self.assertEqual(stage_timeline.kernel_family(
            "void cce::s09::(anonymous namespace)::de_products_bf16<true, true>(cce::s09::ProductArgs, float*)"),
            "cce::s09::de_products_bf16")
        self.assertEqual(stage_timeline.kernel_family("Memset (Device)"), "Memset")
        self.assertEqual(stage_timeline.kernel_family("nvjet_sm90_tss_128x256_64x4_2x1_v_bz_coopA_NTN"),
                         "nvjet_sm90_tss_128x256_64x4_2x1_v_bz_coopA_NTN")

    def test_idle_counts_from_the_latest_end(self):
        # b runs inside a (a side stream): no idle, and c's idle counts from a's end (30), not b's (10);
        # given out of order.
        lines = stage_timeline.report("== t", [event(40, 5, "void k<int>(int)"), event(0, 30, "a(int)"),
                                               event(5, 5, "void k<float>(float)")])
        self.assertEqual(lines[0], "== t")
        self.assertEqual(lines[1], "+       0 idle     0.0 dur     30.0  a(int)")
        self.assertEqual(lines[2], "+       5 idle     0.0 dur      5.0  void k<float>(float)")
        self.assertEqual(lines[3], "+      40 idle    10.0 dur      5.0  void k<int>(int)")
        self.assertEqual(lines[4], "span 45 us, operations 3, their durations summed 40 us, idle 10 us")
        self.assertEqual(lines[6], "     1      30.0      0.0  a")  # longest first
        self.assertEqual(lines[7], "     2      10.0     10.0  k")  # the two k<...> together

    def test_no_events(self):
        self.assertEqual(stage_timeline.report("== t", []), ["== t", "no GPU operations traced"])
        self.assertEqual(stage_timeline.host_report([]), ["host: no CUDA API calls traced"])

    def test_host_gaps_are_the_hosts_own_code(self):
        # A sync (0..50), then the host's code until 70, a launch (70..75); given out of order.
        lines = stage_timeline.host_report([event(70, 5, "cudaLaunchKernel"), event(0, 50, "cudaStreamSynchronize")])
        self.assertEqual(lines[1], "  +       0 gap     0.0 dur     50.0  cudaStreamSynchronize")
        self.assertEqual(lines[2], "  +      70 gap    20.0 dur      5.0  cudaLaunchKernel")
        self.assertEqual(lines[3], "host span 75 us, API calls 2, in them 55 us, host code between them 20 us")
        self.assertEqual(lines[5], "     1      50.0      0.0  cudaStreamSynchronize")
        self.assertEqual(lines[6], "     1       5.0     20.0  cudaLaunchKernel")


    def test_idle_causes_name_the_hosts_part(self):
        # The GPU waits from 10 to 40 before b: the host synchronized (12..32), ran its own code, then queued b (35..38)
        # and began queuing c (39..41); a launch is tied to its operation by the correlation id.
        def tied(ts, dur, name, corr, cat):
            ev = dict(event(ts, dur, name), cat=cat)
            if corr is not None:
                ev["args"] = {"correlation": corr}
            return ev
        gpu = [tied(46, 5, "c(int)", 3, "kernel"), tied(0, 10, "a(int)", 1, "kernel"),
               tied(40, 5, "void b<int>(int)", 2, "kernel")]
        host = [tied(-5, 3, "cudaLaunchKernel", 1, "cuda_runtime"), tied(12, 20, "cudaStreamSynchronize", None,
                                                                          "cuda_runtime"),
                tied(35, 3, "cudaLaunchKernel", 2, "cuda_runtime"), tied(39, 2, "cudaLaunchKernel", 3, "cuda_runtime")]
        lines = stage_timeline.idle_causes(gpu, host)
        self.assertEqual(len(lines), 2)  # c's wait (1 us) is below the 10 us shown
        self.assertEqual(lines[1], "  +      40 idle   30.0 before b: queued at +28.0 by cudaLaunchKernel; "
                                   "host: cudaStreamSynchronize 20.0, cudaLaunchKernel 4.0; own code 6.0")
        untraced = stage_timeline.idle_causes(gpu, [])
        self.assertIn("its host call not traced; host: no API call; own code 30.0", untraced[1])
        self.assertEqual(stage_timeline.idle_causes([], []), [lines[0], "  none"])


REPORT = "\n".join(["stage 10_plan_per_batch through its C interface, on a GPU, torch x"] + stage_timeline.report(
    "== tiny: N=300 D=128 V=1129, plan sparse, kept share of the (token block, tile) pairs 0.5000",
    [event(0, 100, "void cce::wgmma_pipeline_kernel<cce::s08::TileStatsEpilogue>(CUtensorMap_st)"),
     event(110, 20, "void cce::s08::(anonymous namespace)::gather_rows_kernel<__nv_bfloat16>(int)"),
     event(130, 7, "cce::s10::(anonymous namespace)::keep_at_exponent_kernel(unsigned char*, long, int, int*)"),
     event(140, 30, "void cce::s09::(anonymous namespace)::de_products_bf16<true, true>(int)"),
     event(145, 25, "void cce::s09::(anonymous namespace)::dc_products_bf16<true, true, true>(int)"),
     event(175, 4, "nvjet_sm90_tss_128x256_64x4_2x1_v_bz_coopA_NTN"),
     event(180, 3, "void some_new_kernel<int>(int)")]))


class Figure(unittest.TestCase):
    def test_report_read_back(self):
        shapes = timeline_figure.parse_reports(REPORT)
        self.assertEqual(list(shapes), ["tiny"])
        self.assertEqual(shapes["tiny"]["dims"], (300, 128, 1129))
        self.assertEqual(shapes["tiny"]["span_us"], 183.0)
        self.assertEqual(len(shapes["tiny"]["ops"]), 7)

    def test_steps(self):
        shape = timeline_figure.parse_reports(REPORT)["tiny"]
        steps = timeline_figure.steps_us(shape["ops"])
        # dC's products [145, 170) lie inside dE's [140, 170): they count once, so the bar is the span
        self.assertEqual(list(steps.values()), [100.0, 20.0, 7.0, 30.0, 0.0, 4.0, 3.0, 19.0])
        self.assertEqual(sum(steps.values()), shape["span_us"])
        self.assertEqual(list(steps)[-2:], [timeline_figure.OTHER, timeline_figure.IDLE])

    def test_bad_arguments(self):
        with tempfile.TemporaryDirectory() as tmp:
            report = os.path.join(tmp, "r.txt")
            with open(report, "w") as f:
                f.write(REPORT + "\n")
            empty = os.path.join(tmp, "empty.txt")
            open(empty, "w").close()
            for args, fragment in [([report + ":gemma2"], "has no shape gemma2 (it has tiny)"),
                                   ([empty], "holds no stage_timeline.py report"),
                                   ([os.path.join(tmp, "missing.txt")], "cannot read"),
                                   ([report], "the following arguments are required: --out")]:
                with self.subTest(args=args):
                    proc = run("timeline_figure.py", *args, *([] if "--out" in fragment else ["--out", "x.png"]))
                    self.assertEqual(proc.returncode, 2, proc.stdout + proc.stderr)
                    self.assertIn(fragment, proc.stderr)

    def test_figure(self):
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            self.skipTest("no matplotlib for " + sys.executable)
        with tempfile.TemporaryDirectory() as tmp:
            report, png = os.path.join(tmp, "r.txt"), os.path.join(tmp, "parts.png")
            with open(report, "w") as f:
                f.write(REPORT + "\n")
            proc = run("timeline_figure.py", report + ":tiny", "--out", png)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            with open(png, "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")


class Series(unittest.TestCase):
    def test_summary_leaves_out_the_settling_calls(self):
        s = plan_series.summarize([180.0, 130.0, 10.0, 30.0, 20.0])
        self.assertEqual((s["median_after_settling"], s["mean_after_settling"]), (20.0, 20.0))
        self.assertEqual((s["min_after_settling"], s["max_after_settling"]), (10.0, 30.0))
        self.assertIsNone(plan_series.summarize([180.0, 130.0]))


def run(script, *args, pythonpath=None):
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, os.path.join(ROOT, "bench", script), *args], capture_output=True,
                          text=True, env=env, timeout=60)


class CommandLines(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.inputs = os.path.join(self.tmp.name, "shape")
        os.makedirs(self.inputs)
        for f in ("e.npy", "c.npy", "targets.npy"):
            open(os.path.join(self.inputs, f), "wb").close()
        self.no_torch = os.path.join(self.tmp.name, "stand-in")
        os.makedirs(self.no_torch)
        with open(os.path.join(self.no_torch, "torch.py"), "w") as f:
            f.write("raise ImportError('stand-in: no PyTorch')\n")

    def tearDown(self):
        self.tmp.cleanup()

    def test_bad_arguments(self):
        for script in ("stage_timeline.py", "plan_series.py"):
            with self.subTest(script=script):
                proc = run(script, "build/python", self.inputs, "--calls", "0")
                self.assertEqual(proc.returncode, 2, proc.stderr)
                self.assertIn("--calls must be >= 1", proc.stderr)
                empty = os.path.join(self.tmp.name, "empty")
                os.makedirs(empty, exist_ok=True)
                proc = run(script, "build/python", empty)
                self.assertEqual(proc.returncode, 2, proc.stderr)
                self.assertIn("lacks e.npy, c.npy, targets.npy", proc.stderr)

    def test_through_takes_capi_or_op(self):
        proc = run("stage_timeline.py", "build/python", self.inputs, "--through", "python")
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("invalid choice: 'python'", proc.stderr)
        proc = run("stage_timeline.py", "build/python", self.inputs, "--through", "op", pythonpath=self.no_torch)
        self.assertEqual(proc.returncode, 77, proc.stdout + proc.stderr)  # a valid choice: on to the PyTorch check

    def test_without_pytorch_skips(self):
        for script in ("stage_timeline.py", "plan_series.py"):
            with self.subTest(script=script):
                proc = run(script, "build/python", self.inputs, pythonpath=self.no_torch)
                self.assertEqual(proc.returncode, 77, proc.stdout + proc.stderr)
                self.assertEqual(len(proc.stderr.strip().splitlines()), 1, proc.stderr)
                self.assertIn("SKIPPED", proc.stderr)


if __name__ == "__main__":
    unittest.main()
