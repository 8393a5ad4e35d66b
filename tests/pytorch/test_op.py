#!/usr/bin/env python3
"""The stages as a PyTorch op (python/cce_stages) against torch autograd in float64.

    python3 tests/pytorch/test_op.py BUILD_PYTHON_DIR CASE

CASE is one of:
  stages      every stage of the table at an odd shape (N=77, D=100, V=1129), fp32 and bf16, each
              reduction, softcap 30 or none, 10% of the targets ignored, a random upstream gradient:
              loss, dE, dC against float64 autograd on the same (rounded) inputs
  tied        c tied to an embedding that the model also uses: its gradient adds up; a frozen c
              (requires_grad False) gives no c.grad; two forwards before their backwards; two backwards
              through one loss (retain_graph) with upstream gradients 2 and 3
  frozen      every stage with a backward with c frozen (requires_grad False), reductions mean and none:
              dE against float64 autograd, c.grad None; and no [V, D] gradient held between forward
              and backward (memory_allocated after the forward, frozen against trainable c)
  stats       last_stats(): stage 10's plan, kept fraction and eps consistent with each other and with
              its flags (--plan dense, --keep-all); stages 07 to 09 report theirs; stage 01 and a stage
              that has run no backward report None
  compile     torch.library.opcheck on the five ops; the eager path (an autograd.Function) against the
              custom op, bitwise; and a model compiled with fullgraph=True
  memory      the stages' scratch comes from PyTorch's caching allocator (memory_allocated counts it), and
              release_scratch gives it back (the next call the same loss, to 1e-6)
  bad_input   a wrong shape, dtype, device, target out of range, stage name or flag: one clear
              Python exception each, never a crash
  two_devices the op on cuda:0 and cuda:1 in turns in one process (the final stage and stage 01, the
              calls made with cuda:0 current), each against float64 autograd; a target out of range on
              cuda:1; skipped with fewer than two GPUs
  threads     four Python threads on one device at once: each one's bad target (its own value) raises
              its own message, 40 times each; each thread's loss and gradients (the final stage and stage
              01, its own inputs) bitwise those of the same calls made one thread at a time
  streams     calls on two CUDA streams in turns, nothing synchronized between them (the final stage
              and stage 01, inputs of a shape whose kernels run long enough to overlap): every result
              bitwise that of the same call alone on the default stream; last_stats after them
Exit status: 0 passed, 1 failed, 77 skipped (no PyTorch, no CUDA GPU, or the library not built).
"""
import os
import sys
import threading

SKIP = 77


def skip(why):
    print("SKIPPED: " + why)
    sys.exit(SKIP)


if len(sys.argv) != 3:
    print(__doc__)
    sys.exit(2)
try:
    import torch
except ImportError:
    skip("PyTorch is not installed for " + sys.executable)
if not torch.cuda.is_available():
    skip("no CUDA GPU for PyTorch")
sys.path.insert(0, sys.argv[1])
try:
    import cce_stages
except ImportError as e:
    skip(str(e))

failures = []


def expect(condition, what):
    print(("ok    " if condition else "FAIL  ") + what)
    if not condition:
        failures.append(what)


def rel_l2(x, ref):
    x, ref = x.double(), ref.double()
    return float((x - ref).norm() / ref.norm().clamp_min(1e-300))


def reference(e, c, t, upstream, reduction, ignore_index, softcap):
    """loss, dE, dC in float64 autograd on the same values."""
    e64 = e.detach().double().requires_grad_(True)
    c64 = c.detach().double().requires_grad_(True)
    z = e64 @ c64.T
    if softcap:
        z = softcap * torch.tanh(z / softcap)
    loss = torch.nn.functional.cross_entropy(z, t, ignore_index=ignore_index, reduction=reduction)
    if reduction == "mean" and bool((t == ignore_index).all()):
        loss = z.sum() * 0.0
    (loss * upstream.double()).sum().backward()
    return loss.detach(), e64.grad, c64.grad


def inputs(n, d, v, dtype, seed, ignore_fraction=0.1, ignore_index=-100):
    g = torch.Generator(device="cuda").manual_seed(seed)
    e = torch.randn(n, d, device="cuda", generator=g) * 2.0
    c = torch.randn(v, d, device="cuda", generator=g) / d ** 0.5
    t = torch.randint(0, v, (n,), device="cuda", generator=g)
    t[torch.rand(n, device="cuda", generator=g) < ignore_fraction] = ignore_index
    return e.to(dtype), c.to(dtype), t


# Tolerances (relative L2 against float64 on the same inputs). fp32: the stages' arithmetic is
# fp32 throughout, and stages 07 and 08 drop or filter below 2^-28, 2^-12 (07's filter in fp32 is
# its eps, far below this data's entries); bf16: S is rounded to bf16 before its products
# (about 2^-9 per element), and the drop stages leave out what they document.
TOLERANCE = {torch.float32: (1e-5, 1e-4), torch.bfloat16: (1e-4, 2e-2)}  # (loss, gradients)
# This data's softmax is nearly flat, where stages 08 and 09's fixed eps (2^-8) drops every tile
# and stage 07's filter much: the op is checked with their exact settings (what they leave out is
# their own tests' subject).
EXACT_FLAGS = {"07_filter_sort": "--no-filter", "08_drop_before_recompute": "--keep-all",
               "09_deterministic_products": "--keep-all"}


def case_stages():
    n, d, v = 77, 100, 1129
    for name in cce_stages.stage_names():
        backward = name in cce_stages.stage_names(with_backward=True)
        for dtype in (torch.float32, torch.bfloat16):
            for reduction, softcap in (("mean", None), ("sum", 30.0), ("none", None)):
                e, c, t = inputs(n, d, v, dtype, seed=7)
                upstream = torch.rand(n if reduction == "none" else (), device="cuda") + 0.5
                ee = e.clone().requires_grad_(backward)
                cc = c.clone().requires_grad_(backward)
                loss = cce_stages.linear_cross_entropy(ee, cc, t, reduction=reduction, softcap=softcap, stage=name,
                                                      flags=EXACT_FLAGS.get(name, ""))
                ref_loss, ref_de, ref_dc = reference(e, c, t, upstream, reduction, -100, softcap)
                tol_loss, tol_grad = TOLERANCE[dtype]
                what = "%s %s %s%s" % (name, str(dtype).split(".")[1], reduction, " softcap" if softcap else "")
                expect(rel_l2(loss.detach(), ref_loss) <= tol_loss, "%s: loss (rel L2 %.2e)" % (what, rel_l2(loss.detach(), ref_loss)))
                if not backward:
                    continue
                (loss * upstream).sum().backward()
                expect(ee.grad is not None and ee.grad.dtype == dtype and rel_l2(ee.grad, ref_de) <= tol_grad,
                       "%s: dE (rel L2 %.2e)" % (what, rel_l2(ee.grad, ref_de)))
                expect(cc.grad is not None and rel_l2(cc.grad, ref_dc) <= tol_grad,
                       "%s: dC (rel L2 %.2e)" % (what, rel_l2(cc.grad, ref_dc)))


def case_tied():
    n, d, v = 77, 100, 1129
    torch.manual_seed(3)
    emb = torch.nn.Embedding(v, d, device="cuda")
    tokens = torch.randint(0, v, (n,), device="cuda")
    targets = torch.randint(0, v, (n,), device="cuda")
    proj = torch.randn(d, d, device="cuda") / d ** 0.5
    # The model: hidden = emb(tokens) @ proj, classifier tied to emb.weight.
    def loss_of(ce):
        h = emb(tokens) @ proj
        return ce(h, emb.weight, targets)
    ours = loss_of(lambda h, w, t: cce_stages.linear_cross_entropy(h, w, t))
    ours.backward()
    got = emb.weight.grad.clone()
    emb.weight.grad = None
    ref = loss_of(lambda h, w, t: torch.nn.functional.cross_entropy(h @ w.T, t))
    ref.backward()
    expect(rel_l2(got, emb.weight.grad) <= 1e-4, "tied weights: the embedding's gradient adds both uses (rel L2 %.2e)"
           % rel_l2(got, emb.weight.grad))
    # A frozen classifier: no c.grad, e.grad right.
    e, c, t = inputs(n, d, v, torch.float32, seed=4)
    ee = e.clone().requires_grad_(True)
    loss = cce_stages.linear_cross_entropy(ee, c, t)
    loss.backward()
    _, ref_de, _ = reference(e, c, t, torch.ones(()), "mean", -100, None)
    expect(c.grad is None and rel_l2(ee.grad, ref_de) <= 1e-4, "frozen classifier: no c.grad, dE right")
    # Two forwards, then their backwards (gradient accumulation): each call is whole.
    e2, c2, t2 = inputs(n, d, v, torch.float32, seed=5)
    a = e.clone().requires_grad_(True)
    b = e2.clone().requires_grad_(True)
    la = cce_stages.linear_cross_entropy(a, c, t, reduction="none")
    lb = cce_stages.linear_cross_entropy(b, c2, t2, reduction="none")
    (la.sum() + 2.0 * lb.sum()).backward()
    _, ra, _ = reference(e, c, t, torch.ones(n, device="cuda"), "none", -100, None)
    _, rb, _ = reference(e2, c2, t2, torch.full((n,), 2.0, device="cuda"), "none", -100, None)
    expect(rel_l2(a.grad, ra) <= 1e-4 and rel_l2(b.grad, rb) <= 1e-4,
           "two forwards before their backwards: each gradient its own")
    # Two backwards through one loss: the first scales the op's dE and dC in place, the second recomputes them.
    for reduction in ("mean", "sum"):
        a = e.clone().requires_grad_(True)
        cc = c.clone().requires_grad_(True)
        loss = cce_stages.linear_cross_entropy(a, cc, t, reduction=reduction)
        loss.backward(torch.tensor(2.0, device="cuda"), retain_graph=True)
        loss.backward(torch.tensor(3.0, device="cuda"))
        _, r_de, r_dc = reference(e, c, t, torch.tensor(5.0), reduction, -100, None)
        expect(rel_l2(a.grad, r_de) <= 1e-4 and rel_l2(cc.grad, r_dc) <= 1e-4,
               "%s: backward twice (retain_graph, upstream 2 then 3): the gradients of 5 (rel L2 %.2e, %.2e)"
               % (reduction, rel_l2(a.grad, r_de), rel_l2(cc.grad, r_dc)))


def case_frozen():
    n, d, v = 77, 100, 1129
    for name in cce_stages.stage_names(with_backward=True):
        for dtype in (torch.float32, torch.bfloat16):
            for reduction in ("mean", "none"):
                e, c, t = inputs(n, d, v, dtype, seed=11)
                upstream = torch.rand(n if reduction == "none" else (), device="cuda") + 0.5
                ee = e.clone().requires_grad_(True)
                frozen = c.clone()
                try:
                    loss = cce_stages.linear_cross_entropy(ee, frozen, t, reduction=reduction, stage=name,
                                                          flags=EXACT_FLAGS.get(name, ""))
                    (loss * upstream).sum().backward()
                except Exception as exc:  # noqa: BLE001 - report and go on
                    expect(False, "%s %s frozen c: %s: %s" % (name, reduction, type(exc).__name__, exc))
                    continue
                _, ref_de, _ = reference(e, c, t, upstream, reduction, -100, None)
                err = rel_l2(ee.grad, ref_de)
                expect(frozen.grad is None and err <= TOLERANCE[dtype][1],
                       "%s %s %s frozen c: no c.grad, dE (rel L2 %.2e)" % (name, str(dtype).split(".")[1], reduction,
                                                                          err))
    # What freezing saves: the [V, D] gradient that a trainable c's op keeps for autograd from the forward
    # to the backward. The stage object is warmed up first, so that its scratch is there in both.
    n, d, v = 512, 256, 32000
    e, c, t = inputs(n, d, v, torch.bfloat16, seed=12)
    held = {}
    for what in ("warm-up", "frozen", "trainable"):
        ee = e.clone().requires_grad_(True)
        cc = c.clone().requires_grad_(what != "frozen")
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated()
        loss = cce_stages.linear_cross_entropy(ee, cc, t)
        torch.cuda.synchronize()
        held[what] = torch.cuda.memory_allocated() - before
        loss.backward()
        del loss, ee, cc
    dc_bytes = v * d * 2
    expect(held["trainable"] - held["frozen"] >= dc_bytes,
           "frozen c: %d bytes held after the forward against %d with a trainable c (dC is %d bytes)"
           % (held["frozen"], held["trainable"], dc_bytes))


def case_stats():
    n, d, v = 77, 100, 1129
    final = cce_stages.FINAL_STAGE
    expect(cce_stages.last_stats(final, "--no-token-grouping") is None,
           "last_stats of a stage object that has run no backward: None")

    def run(name, flags, dtype=torch.bfloat16, reduction="mean"):
        e, c, t = inputs(n, d, v, dtype, seed=13)
        ee, cc = e.clone().requires_grad_(True), c.clone().requires_grad_(True)
        loss = cce_stages.linear_cross_entropy(ee, cc, t, reduction=reduction, stage=name, flags=flags)
        loss.sum().backward()
        return cce_stages.last_stats(name, flags)

    def is_candidate(log2_eps, smallest):  # -8, -8.25, ... down to smallest (as float rounds 2^-12.25)
        return (log2_eps is not None and smallest - 1e-6 <= log2_eps <= -8 + 1e-6
                and abs(4 * log2_eps - round(4 * log2_eps)) < 1e-6)

    def consistent(st):
        return (st is not None and st.units > 0 and 0 <= st.kept_units <= st.units
                and abs(st.kept_fraction - st.kept_units / st.units) < 1e-12)

    # The first batch of a shape decides after its forward.
    decided = run(final, "")
    ok = consistent(decided) and decided.plan in ("sparse", "dense") and decided.decided_kept_fraction is not None
    if ok and decided.plan == "sparse":
        ok = decided.decided_kept_fraction == decided.kept_fraction and decided.decided_kept_fraction <= 1.0 / 3.0
    elif ok:
        ok = decided.kept_fraction == 1.0 and decided.decided_kept_fraction > 1.0 / 3.0
    # bf16: the automatic eps is one of 2^-8, 2^-8.25 .. 2^-17, chosen within the misplaced-mass budget.
    ok = ok and is_candidate(decided.drop_eps_log2, -17) and decided.misplaced_mass is not None
    expect(ok and 0 <= decided.misplaced_mass <= 1, "%s mean: last_stats %s" % (final, decided))
    # The next batch of that shape (reduction none: the gradient's call runs loss and gradient) follows that
    # decision: after a dense one, the dense plan before the forward, which chooses no eps and drops nothing;
    # after a sparse one, the same inputs' statistics choose the same eps again, bit for bit.
    st = run(final, "", reduction="none")
    if decided.plan == "dense":
        ok = (consistent(st) and st.plan == "dense" and st.kept_fraction == 1.0 and st.eps == 0.0
              and st.misplaced_mass is None and st.decided_kept_fraction == decided.decided_kept_fraction)
    else:
        ok = (consistent(st) and st.plan == "sparse" and st.eps == decided.eps
              and st.misplaced_mass == decided.misplaced_mass and st.kept_units == decided.kept_units)
    expect(ok, "%s none after a %s decision: last_stats %s" % (final, decided.plan, st))
    st = run(final, "--plan dense")
    expect(consistent(st) and st.plan == "dense" and st.kept_fraction == 1.0 and st.decided_kept_fraction is None,
           "%s --plan dense: every pair, no decision: %s" % (final, st))
    st = run(final, "--keep-all", dtype=torch.float32)
    expect(consistent(st) and st.eps == 0.0 and st.drop_eps_log2 is None and st.misplaced_mass is None
           and st.kept_fraction == 1.0, "%s --keep-all: eps 0, every pair kept: %s" % (final, st))
    st = run(final, "--plan sparse --drop-eps 0.0078125")
    expect(consistent(st) and st.plan == "sparse" and st.drop_eps_log2 == -7 and st.misplaced_mass is None,
           "%s --plan sparse --drop-eps 2^-7: %s" % (final, st))
    for name in ("07_filter_sort", "08_drop_before_recompute", "09_deterministic_products"):
        st = run(name, "")
        expect(consistent(st) and st.plan is None and st.decided_kept_fraction is None and st.eps > 0,
               "%s: last_stats %s" % (name, st))
    expect(run("01_materialized", "") is None, "01_materialized drops nothing: last_stats None")


def case_compile():
    n, d, v = 77, 100, 1129
    e, c, t = inputs(n, d, v, torch.float32, seed=9)
    settings = (cce_stages.FINAL_STAGE, "", "mean", -100, 0.0)
    ops = torch.ops.cce_stages
    for name, args in (("loss_and_grad", (e.clone().requires_grad_(True), c.clone().requires_grad_(True), t) + settings),
                       ("loss", (e.clone().requires_grad_(True), c.clone().requires_grad_(True), t) + settings),
                       ("grad", (e, c, t, torch.ones((), device="cuda")) + settings),
                       ("loss_and_grad_e", (e.clone().requires_grad_(True), c, t) + settings),
                       ("grad_e", (e, c, t, torch.ones((), device="cuda")) + settings)):
        try:
            torch.library.opcheck(getattr(ops, name).default, args)
            expect(True, "opcheck cce_stages::%s" % name)
        except Exception as exc:  # noqa: BLE001 - report and go on
            expect(False, "opcheck cce_stages::%s: %s" % (name, str(exc).splitlines()[0]))

    # Eager mode takes an autograd.Function that makes the custom op's calls without its dispatch: the same bits.
    for flags in ("--plan sparse --sort-every 1", "--plan dense"):  # each call its own order (CONFIGS)
        ee, cc = e.clone().requires_grad_(True), c.clone().requires_grad_(True)
        loss = cce_stages.linear_cross_entropy(ee, cc, t, flags=flags)
        loss.backward()
        op_loss, op_de, op_dc = ops.loss_and_grad(e, c, t, cce_stages.FINAL_STAGE, flags, "mean", -100, 0.0)
        expect(type(loss.grad_fn).__name__ == "_EagerLossAndGradBackward" and torch.equal(loss.detach(), op_loss)
               and torch.equal(ee.grad, op_de) and torch.equal(cc.grad, op_dc),
               "%s: the eager path (%s) and the custom op give the same loss, dE and dC"
               % (flags, type(loss.grad_fn).__name__))

    class Head(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(d, d, device="cuda")
            self.classifier = torch.nn.Parameter(c.clone())

        def forward(self, x, targets):
            return cce_stages.linear_cross_entropy(self.proj(x), self.classifier, targets)

    model = Head()
    eager_loss = model(e, t)
    eager_loss.backward()
    eager_grad = model.classifier.grad.clone()
    model.zero_grad()
    compiled = torch.compile(model, fullgraph=True)
    loss = compiled(e, t)
    loss.backward()
    expect(torch.allclose(loss, eager_loss, rtol=1e-5, atol=0) and
           rel_l2(model.classifier.grad, eager_grad) <= 1e-4,
           "torch.compile(fullgraph=True): same loss and gradient as eager")


def case_bad_input():
    n, d, v = 77, 100, 1129
    e, c, t = inputs(n, d, v, torch.float32, seed=1, ignore_fraction=0.0)
    cases = [
        ("e not 2-D", lambda: cce_stages.linear_cross_entropy(e[0], c, t), ValueError),
        ("D disagrees", lambda: cce_stages.linear_cross_entropy(e[:, :50], c, t), ValueError),
        ("dtypes differ", lambda: cce_stages.linear_cross_entropy(e, c.bfloat16(), t), TypeError),
        ("float16", lambda: cce_stages.linear_cross_entropy(e.half(), c.half(), t), TypeError),
        ("targets int32", lambda: cce_stages.linear_cross_entropy(e, c, t.int()), TypeError),
        ("on the CPU", lambda: cce_stages.linear_cross_entropy(e.cpu(), c.cpu(), t.cpu()), ValueError),
        ("target out of range", lambda: cce_stages.linear_cross_entropy(e, c, torch.full_like(t, v)), ValueError),
        ("unknown reduction", lambda: cce_stages.linear_cross_entropy(e, c, t, reduction="avg"), ValueError),
        ("unknown stage", lambda: cce_stages.linear_cross_entropy(e, c, t, stage="99_nothing"), ValueError),
        ("bad stage flag", lambda: cce_stages.linear_cross_entropy(e, c, t, flags="--plan fast"), ValueError),
        ("ignore_index in range", lambda: cce_stages.linear_cross_entropy(e, c, t, ignore_index=3), ValueError),
    ]
    for what, call, kind in cases:
        try:
            call()
            expect(False, "%s: no exception" % what)
        except kind as exc:
            line = str(exc)
            expect(line.startswith("cce_stages: ") and "\n" not in line, "%s: %s" % (what, line))
        except Exception as exc:  # noqa: BLE001
            expect(False, "%s: %s instead of %s: %s" % (what, type(exc).__name__, kind.__name__, exc))


def case_memory():
    # A stage object not used before at this shape: its first call allocates its scratch.
    n, d, v = 300, 64, 5000
    e, c, t = inputs(n, d, v, torch.bfloat16, seed=2)
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    loss = cce_stages.linear_cross_entropy(e, c, t, stage="01_materialized", flags="")
    torch.cuda.synchronize()
    grown = torch.cuda.memory_allocated() - before - loss.numel() * loss.element_size()
    logits = n * v * 4  # stage 01's scratch: the fp32 logits
    expect(grown >= logits, "stage 01's logits (%d bytes) are in PyTorch's allocator: memory_allocated grew by %d"
           % (logits, grown))
    # release_scratch gives the stage objects' scratch back; the next call makes its object again, same result.
    held = torch.cuda.memory_allocated()
    cce_stages.release_scratch()
    freed = held - torch.cuda.memory_allocated()
    expect(freed >= logits, "release_scratch: memory_allocated fell by %d bytes, less than the logits' %d"
           % (freed, logits))
    again = cce_stages.linear_cross_entropy(e, c, t, stage="01_materialized", flags="")
    expect(abs(again.item() - loss.item()) <= 1e-6 * abs(loss.item()),
           "after release_scratch the stage gives %r, before %r" % (again.item(), loss.item()))


def case_two_devices():
    count = torch.cuda.device_count()
    if count < 2:
        skip("needs two CUDA GPUs; this machine has %d" % count)
    n, d, v = 77, 100, 1129
    tol_loss, tol_grad = TOLERANCE[torch.bfloat16]
    for turn in range(2):
        for device in (0, 1):
            for stage in (cce_stages.FINAL_STAGE, "01_materialized"):
                with torch.cuda.device(device):
                    e, c, t = inputs(n, d, v, torch.bfloat16, seed=20 + device)
                ee, cc = e.clone().requires_grad_(True), c.clone().requires_grad_(True)
                loss = cce_stages.linear_cross_entropy(ee, cc, t, stage=stage)  # cuda:0 is the current device
                loss.backward()
                ref_loss, ref_de, ref_dc = reference(e, c, t, torch.ones((), device=e.device), "mean", -100, None)
                expect(loss.device == e.device and rel_l2(loss.detach(), ref_loss) <= tol_loss
                       and rel_l2(ee.grad, ref_de) <= tol_grad and rel_l2(cc.grad, ref_dc) <= tol_grad,
                       "turn %d, cuda:%d, %s: loss, dE, dC against float64 (rel L2 %.1e, %.1e, %.1e)"
                       % (turn, device, stage, rel_l2(loss.detach(), ref_loss), rel_l2(ee.grad, ref_de),
                          rel_l2(cc.grad, ref_dc)))
    with torch.cuda.device(1):
        e, c, t = inputs(n, d, v, torch.bfloat16, seed=22, ignore_fraction=0.0)
    try:
        cce_stages.linear_cross_entropy(e, c, torch.full_like(t, v))
        expect(False, "cuda:1, a target out of range: no exception")
    except ValueError as exc:
        expect(str(exc).startswith("cce_stages: target %d" % v), "cuda:1, a target out of range: %s" % exc)


# The final stage with each plan forced (under "auto" a call's plan follows the decision of the call before
# it, so calls taken in another order may run another plan: other bits), the sparse plan sorting the vocabulary
# every call (by default a call keeps the order of the call before: other inputs before it, other bits), and
# stage 01.
CONFIGS = ((cce_stages.FINAL_STAGE, "--plan sparse --sort-every 1"), (cce_stages.FINAL_STAGE, "--plan dense"),
           ("01_materialized", ""))


def gradients(e, c, t, config):
    """loss, dE, dC of one call of the op (autograd on fresh leaves), on the current stream."""
    ee, cc = e.detach().requires_grad_(True), c.detach().requires_grad_(True)
    loss = cce_stages.linear_cross_entropy(ee, cc, t, stage=config[0], flags=config[1])
    de, dc = torch.autograd.grad(loss.sum(), (ee, cc))
    return loss.detach(), de, dc


def same_bits(got, want):
    return all(torch.equal(a, b) for a, b in zip(got, want))


def in_threads(count, body):
    """body(k) on `count` threads at once, started together; its exceptions are failures."""
    start = threading.Barrier(count)
    errors = []

    def run(k):
        try:
            start.wait()
            body(k)
        except Exception as exc:  # noqa: BLE001
            errors.append("thread %d: %s: %s" % (k, type(exc).__name__, exc))
    threads = [threading.Thread(target=run, args=(k,)) for k in range(count)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for error in errors:
        expect(False, error)


def case_threads():
    n, d, v, count, rounds = 77, 100, 1129, 4, 40
    e, c, t = inputs(n, d, v, torch.bfloat16, seed=30, ignore_fraction=0.0)
    messages = [[] for _ in range(count)]

    def bad_targets(k):
        for _ in range(rounds):
            try:
                cce_stages.linear_cross_entropy(e, c, torch.full_like(t, v + k))
                messages[k].append("no exception")
            except ValueError as exc:
                messages[k].append(str(exc))
    in_threads(count, bad_targets)
    for k in range(count):
        own = sum(m.startswith("cce_stages: target %d " % (v + k)) for m in messages[k])
        expect(own == rounds, "thread %d, target %d out of range: %d of %d messages name it (first other: %s)"
               % (k, v + k, own, rounds, next((m for m in messages[k] if not m.startswith(
                   "cce_stages: target %d " % (v + k))), "none")))
    data = [inputs(n, d, v, torch.bfloat16, seed=31 + k) for k in range(count)]
    alone = {(k, config): gradients(*data[k], config) for k in range(count) for config in CONFIGS}
    torch.cuda.synchronize()
    results = {}

    def good_calls(k):
        for turn in range(5):
            for config in CONFIGS:
                results[(k, config, turn)] = gradients(*data[k], config)
    in_threads(count, good_calls)
    torch.cuda.synchronize()
    for k in range(count):
        for config in CONFIGS:
            same = all(same_bits(results.get((k, config, turn), ()), alone[(k, config)]) for turn in range(5))
            expect(same, "thread %d, %s %s: loss, dE, dC of 5 calls among 4 threads bitwise those of one thread"
                   % (k, config[0], config[1]))


def case_streams():
    n, d, v = 4096, 1024, 32000  # about a millisecond a call: the two streams' calls overlap unless ordered
    data = [inputs(n, d, v, torch.bfloat16, seed=40 + k) for k in range(2)]
    alone = {(k, config): gradients(*data[k], config) for k in range(2) for config in CONFIGS}
    torch.cuda.synchronize()
    streams = (torch.cuda.Stream(), torch.cuda.Stream())
    results = {}
    for turn in range(3):
        for config in CONFIGS:
            for k in range(2):  # inputs k on stream k, no synchronization between the calls
                with torch.cuda.stream(streams[k]):
                    results[(k, config, turn)] = gradients(*data[k], config)
    torch.cuda.synchronize()
    for k in range(2):
        for config in CONFIGS:
            same = all(same_bits(results[(k, config, turn)], alone[(k, config)]) for turn in range(3))
            expect(same, "stream %d, %s %s: 3 calls in turns with the other stream's, bitwise the call alone"
                   % (k, config[0], config[1]))
    for config, plan in zip(CONFIGS[:2], ("sparse", "dense")):
        with torch.cuda.stream(streams[1]):
            stats = cce_stages.last_stats(config[0], config[1])
        expect(stats is not None and stats.plan == plan and 0.0 < stats.kept_fraction <= 1.0,
               "last_stats(%s) after the streams' calls: %s" % (config[1], stats))


CASES = {"stages": case_stages, "memory": case_memory, "tied": case_tied, "frozen": case_frozen, "stats": case_stats,
         "compile": case_compile, "bad_input": case_bad_input, "two_devices": case_two_devices,
         "threads": case_threads, "streams": case_streams}
if sys.argv[2] not in CASES:
    print("unknown case %s (choose from %s)" % (sys.argv[2], ", ".join(CASES)))
    sys.exit(2)
CASES[sys.argv[2]]()
print("%d failed" % len(failures) if failures else "PASSED")
sys.exit(1 if failures else 0)
