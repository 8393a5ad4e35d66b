"""Where the op's own time goes, beside the stage's (python/README.md, "The op's own overhead"): the final stage
at gemma2's and lm32k's shapes through
  c_call            cce_run by ctypes, its outputs allocated once (the C interface alone: the targets' check, the stage)
  forward_op        torch.ops.cce_stages.loss_and_grad without autograd (the custom op's dispatch added)
  op_with_backward  linear_cross_entropy(...).backward() (eager: an autograd.Function, no custom op; what
                    bench/peers.py's stage10_plan_per_batch_op times)
  frozen_classifier the same with c.requires_grad=False: no dC, and stages 09 and 10 skip its work
each timed as cce_bench and peers.py time a case: a synchronization, then CUDA events around one call (median,
min and max of 30 after 3 warm-ups, the four cases taken in turn; host_ms: the host's time to return from the call).

Then "queued": c_call and op_with_backward again, each queued behind GPU work of about QUEUED_MS (one spinning
kernel, torch.cuda._sleep), as a training step queues the loss behind the model's forward: the host's work before
the stage's first kernel then runs while the GPU is busy. The events enclose the spin and the call; "ahead_alone"
times the spin by itself, so that call = case − ahead_alone.

Then "split": c_call and op_with_backward again, with cce_run wrapped so that two more CUDA events and host clocks
mark the C call: before (its start) and after (its return). The GPU, idle at the start, reaches `before` when the
host does, so before − start is the host's time before the stage (the prefix); after − before is the stage until its
last kernel ends or the host returns, whichever is later; end − after is the GPU time the host's work after the C
call adds (autograd's backward, when it outlasts the stage's queued work). host_*: the same three spans on the host's
clock. The wrapper's own cost (two event records) falls on both cases.

    python3 python/op_overhead_probe.py build/python OUT.json [--backward-on-calling-thread]

--backward-on-calling-thread: the whole run under torch.autograd.set_multithreading_enabled(False), a setting of the
user's (it moves every backward of the process, the model's too, onto the thread that calls it), not the op's.

The inputs are the files peers.py reads: /tmp/cce-inputs/gemma2, /tmp/cce-inputs/gemma2_flat (when there) and
/tmp/lm-gen/lm32k, {e,c,targets}.npy, written by stage 01's --save (bench/peers.py's save_command; lm32k at its
dims with the realistic generator: --n 8192 --d 768 --v 32000)."""
import collections, ctypes, json, os, statistics, sys, time
import numpy as np
import torch
sys.path.insert(0, sys.argv[1])
import cce_stages as cs

def in_turns(cases, spans, reps=30, warm=3):
    """Each case is (fn, clear); the repetitions take the cases in turn, so that a drift of the GPU's clocks
    falls on all of them alike. spans(start, end, h0, h1) names what one repetition measured (the CUDA events
    and host clocks around the call); returns each case's lists of them."""
    for fn, clear in cases.values():
        for _ in range(warm):
            clear(); fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    got = {k: collections.defaultdict(list) for k in cases}
    for _ in range(reps):
        for name, (fn, clear) in cases.items():
            clear(); torch.cuda.synchronize()
            h0 = time.perf_counter(); start.record(); fn(); end.record(); h1 = time.perf_counter()
            end.synchronize()
            for span, value in spans(start, end, h0, h1).items():
                got[name][span].append(value)
    return got

def timed_together(cases, reps=30, warm=3):
    """The GPU's time of each case (median, min, max) and the host's time to return from it (median)."""
    got = in_turns(cases, lambda start, end, h0, h1: {"gpu": start.elapsed_time(end), "host": (h1 - h0) * 1e3},
                   reps, warm)
    return {k: {"gpu_ms_median": statistics.median(g["gpu"]), "gpu_ms_min": min(g["gpu"]),
                "gpu_ms_max": max(g["gpu"]), "host_ms_median": statistics.median(g["host"])} for k, g in got.items()}

def sleep_cycles(ms, probe=1_000_000):
    """torch.cuda._sleep's argument for about `ms` of spinning, from one timed spin of `probe` cycles."""
    torch.cuda._sleep(probe)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record(); torch.cuda._sleep(probe); end.record(); end.synchronize()
    return int(probe * ms / start.elapsed_time(end))

class MarkedLib:
    """cs._lib with cce_run between two CUDA events and two host clocks (the split's marks)."""
    def __init__(self, real):
        self.real = real
        self.before, self.after = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        self.host_before = self.host_after = 0.0
    def cce_run(self, *args):
        self.host_before = time.perf_counter(); self.before.record()
        status = self.real.cce_run(*args)
        self.after.record(); self.host_after = time.perf_counter()
        return status
    def __getattr__(self, name):
        return getattr(self.real, name)

def split_timed(cases, reps=30, warm=3):
    """Each case timed as timed_together does, its C call marked (the docstring's "split"); medians."""
    real = cs._lib
    marked = cs._lib = MarkedLib(real)
    def spans(start, end, h0, h1):
        return {"prefix_ms": start.elapsed_time(marked.before), "stage_ms": marked.before.elapsed_time(marked.after),
                "after_call_ms": marked.after.elapsed_time(end), "host_prefix_ms": (marked.host_before - h0) * 1e3,
                "host_call_ms": (marked.host_after - marked.host_before) * 1e3,
                "host_after_call_ms": (h1 - marked.host_after) * 1e3}
    try:
        got = in_turns(cases, spans, reps, warm)
    finally:
        cs._lib = real
    return {k: {span: statistics.median(v) for span, v in g.items()} for k, g in got.items()}

QUEUED_MS = 0.5
CALLING_THREAD = sys.argv[3:] == ["--backward-on-calling-thread"]
if sys.argv[3:] and not CALLING_THREAD:
    sys.exit("op_overhead_probe.py: unknown arguments %s (only --backward-on-calling-thread)" % sys.argv[3:])
torch.autograd.set_multithreading_enabled(not CALLING_THREAD)
SLEEP_CYCLES = sleep_cycles(QUEUED_MS)
out = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "queued_ms": QUEUED_MS,
       "backward_on_calling_thread": CALLING_THREAD, "shapes": {}}
for shape, folder in (("gemma2", "/tmp/cce-inputs/gemma2"), ("gemma2_flat", "/tmp/cce-inputs/gemma2_flat"),
                      ("lm32k", "/tmp/lm-gen/lm32k")):
    if shape == "gemma2_flat" and not os.path.isdir(folder):
        continue
    e = torch.from_numpy(np.load(folder + "/e.npy")).cuda().bfloat16()
    c = torch.from_numpy(np.load(folder + "/c.npy")).cuda().bfloat16()
    t = torch.from_numpy(np.load(folder + "/targets.npy")).cuda().long()
    n, d, v = e.shape[0], e.shape[1], c.shape[0]
    loss, lse = torch.empty((), device="cuda"), torch.empty(n, device="cuda")
    de, dc, one = torch.empty_like(e), torch.empty_like(c), torch.ones((), device="cuda")
    stream = torch.cuda.current_stream().cuda_stream
    handle = cs._stage(0, stream, cs.FINAL_STAGE, "")
    problem = cs._Problem(n, d, v, 1, 0, 0.0, -100)
    p = lambda x: ctypes.c_void_p(x.data_ptr())
    error = cs._error_buffer()
    raw = lambda: cs._raise(cs._lib.cce_run(handle, ctypes.byref(problem), p(e), p(c), p(t), p(one), p(loss), p(lse),
                                            p(de), p(dc), ctypes.c_void_p(stream), error, cs._ERROR_BYTES), error)
    fwd = lambda: torch.ops.cce_stages.loss_and_grad(e, c, t, cs.FINAL_STAGE, "", "mean", -100, 0.0)
    E, C = e.detach().requires_grad_(True), c.detach().requires_grad_(True)
    def clear():
        E.grad = None; C.grad = None
    full = lambda: cs.linear_cross_entropy(E, C, t).backward()
    frozen = lambda: cs.linear_cross_entropy(E, c, t).backward()  # c.requires_grad is False
    nothing = lambda: None
    out["shapes"][shape] = dict(n=n, d=d, v=v, **timed_together(
        {"c_call": (raw, nothing), "forward_op": (fwd, nothing), "op_with_backward": (full, clear),
         "frozen_classifier": (frozen, clear)}))
    ahead = lambda: torch.cuda._sleep(SLEEP_CYCLES)
    behind = lambda fn: (lambda: (ahead(), fn()))
    out["shapes"][shape]["queued"] = timed_together(
        {"ahead_alone": (ahead, nothing), "c_call": (behind(raw), nothing), "op_with_backward": (behind(full), clear)})
    out["shapes"][shape]["split"] = split_timed({"c_call": (raw, nothing), "op_with_backward": (full, clear)})
    print(shape, json.dumps(out["shapes"][shape]))
json.dump(out, open(sys.argv[2], "w"), indent=1)
