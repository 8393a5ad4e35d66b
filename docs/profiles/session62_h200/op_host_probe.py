"""Session 62: where the op's host time after its C call goes at lm32k's shape (issue 26; session 59 measured 0.42-0.48
ms of host work after the C call against about 0.37 ms of GPU work still queued, so the GPU waits 68-110 us).

    python3 op_host_probe.py BUILD/python /tmp/lm-gen/lm32k OUT.json

Each case: a synchronization, then host clocks (medians of REPS after WARM) around
  forward          cs.linear_cross_entropy(E, C, t): split at the C call (before / the call / after, by wrapping cce_run)
  backward         loss.backward() on that loss, split at the op's backward (by wrapping _EagerLossAndGrad.backward):
                   before it (autograd's start, the hop to the device's thread), its body, after it (AccumulateGrad, the
                   hop back)
  backward_single  the same with torch.autograd.set_multithreading_enabled(False): the engine on the calling thread
  trivial          a Function whose backward hands back two tensors it made in its forward (the engine's own cost)
  scaled_alone     the eager backward's _scaled (its C call and two kernel launches) on the main thread
Plus whether E.grad and C.grad are the op's dE and dC (AccumulateGrad took them) or copies, and torch.profiler's table of
ten calls with backward."""
import collections, json, statistics, sys, time
import numpy as np
import torch
sys.path.insert(0, sys.argv[1])
import cce_stages as cs

REPS, WARM = 50, 5
e = torch.from_numpy(np.load(sys.argv[2] + "/e.npy")).cuda().bfloat16()
c = torch.from_numpy(np.load(sys.argv[2] + "/c.npy")).cuda().bfloat16()
t = torch.from_numpy(np.load(sys.argv[2] + "/targets.npy")).cuda().long()
E, C = e.detach().requires_grad_(True), c.detach().requires_grad_(True)
marks = {}
real_lib, real_backward, real_scaled = cs._lib, cs._EagerLossAndGrad.backward, cs._scaled


class MarkedLib:
    def cce_run(self, *args):
        marks["call_in"] = time.perf_counter()
        status = real_lib.cce_run(*args)
        marks["call_out"] = time.perf_counter()
        return status

    def __getattr__(self, name):
        return getattr(real_lib, name)


def marked_backward(ctx, g):
    marks["bwd_in"] = time.perf_counter()
    out = real_backward(ctx, g)
    marks["bwd_out"] = time.perf_counter()
    return out


def marked_scaled(g, de, dc):
    marks["de_ptr"], marks["dc_ptr"] = de.data_ptr(), dc.data_ptr() if dc is not None else None
    marks["scaled_in"] = time.perf_counter()
    out = real_scaled(g, de, dc)
    marks["scaled_out"] = time.perf_counter()
    return out


cs._lib = MarkedLib()
cs._EagerLossAndGrad.backward = staticmethod(marked_backward)
cs._scaled = marked_scaled
spans = collections.defaultdict(list)
took = collections.Counter()


def clear():
    E.grad = None
    C.grad = None


def one_rep(record, single_thread=False):
    clear()
    torch.cuda.synchronize()
    h0 = time.perf_counter()
    loss = cs.linear_cross_entropy(E, C, t)
    h1 = time.perf_counter()
    torch.cuda.synchronize()
    h2 = time.perf_counter()
    if single_thread:
        with torch.autograd.set_multithreading_enabled(False):
            loss.backward()
    else:
        loss.backward()
    h3 = time.perf_counter()
    torch.cuda.synchronize()
    if not record:
        return
    tag = "backward_single" if single_thread else "backward"
    if not single_thread:
        spans["forward_before_call"].append(marks["call_in"] - h0)
        spans["forward_call"].append(marks["call_out"] - marks["call_in"])
        spans["forward_after_call"].append(h1 - marks["call_out"])
        spans["forward"].append(h1 - h0)
    spans[tag].append(h3 - h2)
    spans[tag + "_before_op"].append(marks["bwd_in"] - h2)
    spans[tag + "_op"].append(marks["bwd_out"] - marks["bwd_in"])
    spans[tag + "_op_scaled"].append(marks["scaled_out"] - marks["scaled_in"])
    spans[tag + "_after_op"].append(h3 - marks["bwd_out"])
    took[tag + "_de_taken"] += E.grad.data_ptr() == marks["de_ptr"]
    took[tag + "_dc_taken"] += C.grad.data_ptr() == marks["dc_ptr"]


class Trivial(torch.autograd.Function):
    @staticmethod
    def forward(ctx, e, c):
        ctx.grads = (torch.empty_like(e), torch.empty_like(c))
        return e.new_empty((), dtype=torch.float32)

    @staticmethod
    def backward(ctx, g):
        marks["trivial_in"] = time.perf_counter()
        grads, ctx.grads = ctx.grads, None
        return grads


def trivial_rep(record):
    clear()
    loss = Trivial.apply(E, C)
    torch.cuda.synchronize()
    h0 = time.perf_counter()
    loss.backward()
    h1 = time.perf_counter()
    torch.cuda.synchronize()
    if record:
        spans["trivial"].append(h1 - h0)
        spans["trivial_before_op"].append(marks["trivial_in"] - h0)


def scaled_alone(record, reps=20):
    """_scaled on the main thread, as the eager backward calls it (g = 1: the kernels read it and return)."""
    de, dc, one = torch.empty_like(e), torch.empty_like(c), cs._one(e.get_device())
    torch.cuda.synchronize()
    h0 = time.perf_counter()
    for _ in range(reps):
        real_scaled(one, de, dc)
    h1 = time.perf_counter()
    torch.cuda.synchronize()
    if record:
        spans["scaled_alone_each"].append((h1 - h0) / reps)


for rep in range(WARM + REPS):  # the cases in turn
    one_rep(rep >= WARM)
    one_rep(rep >= WARM, single_thread=True)
    trivial_rep(rep >= WARM)
    scaled_alone(rep >= WARM)
out = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "reps": REPS,
       "host_us_median": {k: round(statistics.median(v) * 1e6, 1) for k, v in spans.items()},
       "host_us_min": {k: round(min(v) * 1e6, 1) for k, v in spans.items()}, "grads_taken_of_reps": dict(took)}
for k in out["host_us_median"]:
    print("%-32s median %8.1f us  min %8.1f" % (k, out["host_us_median"][k], out["host_us_min"][k]))
print("grads taken (of %d):" % REPS, dict(took))

cs._lib, cs._EagerLossAndGrad.backward, cs._scaled = real_lib, real_backward, real_scaled
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
    for _ in range(10):
        clear()
        torch.cuda.synchronize()
        cs.linear_cross_entropy(E, C, t).backward()
        torch.cuda.synchronize()
table = prof.key_averages().table(sort_by="cpu_time_total", row_limit=30)
print(table)
out["profiler_table"] = table
json.dump(out, open(sys.argv[3], "w"), indent=1)
