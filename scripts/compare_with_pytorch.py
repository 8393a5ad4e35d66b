#!/usr/bin/env python3
"""Round trip through PyTorch: a stage executable against torch autograd.

    scripts/compare_with_pytorch.py build/stages/stage06_fused_backward \\
        [--dtype fp32|bf16] [--reduction mean|sum|none] [--dloss default|ones|random]
        [--b B --t T | --n N] [--d D] [--v V] [--softcap S] [--seed S]
        [--inputs DIR] [--work DIR] [--keep] [--require-backward]

1. Builds the inputs in PyTorch as a causal LM has them (or takes e.npy, c.npy,
   targets.npy and an optional dloss.npy from --inputs DIR): hidden states
   [B, T, D] and labels [B, T]; the label of position t is the token at t+1
   (labels shifted left, ignore_index -100 at the end of each sequence and
   wherever the sequence is padded); both flattened to N = B*T rows:

       labels = F.pad(tokens, (0, 1), value=-100)[:, 1:]   # and -100 where padded
       e, targets = hidden.reshape(-1, D), labels.reshape(-1)

   The hidden state of a token is noise plus a pull towards the classifier
   rows of its next token and of a few other likely ones, so that the softmax
   has a trained LM's heavy head rather than being flat.
2. Writes them with np.save (and dloss.npy, the upstream gradient, with
   --dloss ones or random; with --dloss default no file is written, and the
   executable's default, ones, is what is checked), and runs
   `STAGE --load in --save out --backward --dtype ... --reduction ...`.
   A stage without a backward is run and compared on the forward only.
3. Computes the same in float64 with torch autograd, on the inputs the stage
   used (rounded to bf16 first with --dtype bf16), with
   `loss.backward(dloss)`, and compares loss, LSE, dE and dC.
4. With --dtype bf16 and a backward, also computes dE and dC as eager PyTorch
   does in bf16 on the same inputs: bf16 logits e_bf16 @ c_bf16.T (softcapped
   in bf16), torch.nn.functional.cross_entropy with the same reduction and
   ignore_index, and autograd in bf16 from the same dloss (in bf16), and
   measures its relative L2 error against the float64 reference exactly as
   the stage's.

Pass/fail (errors against the float64 reference; "elementwise" means
|x - ref| <= atol + rtol*|ref| for every element, with atol for dE and dC
relative to max|ref|, as the repository's own checks do):

    quantity   fp32                                   bf16
    loss, LSE  rel L2 <= 1e-5, elementwise 1e-3/1e-3  rel L2 <= 1e-4, elementwise 2e-3/2e-3
    dE, dC     rel L2 <= 1e-4, elementwise 2e-3/2e-3  rel L2 <= max(2 x eager's, 4e-3),
                                                      elementwise 2e-2/2e-2

The bf16 bound on dE and dC is tied to eager PyTorch's own error on the same
inputs, measured in the same run: the stage may be at most twice as far from
the float64 truth as what PyTorch itself gives in bf16, for each of dE and
dC. Its floor, 4e-3, is about twice bf16's unit roundoff 2^-9 (2.0e-3): the
stage writes dE and dC in bf16, and rounding the exact gradients to bf16
alone costs up to 2^-9 per element (about 1e-3 relative L2), so no bound may
ask for less than a small multiple of that, however well eager does on some
input. For stage 07, which drops gradient terms below eps on purpose, the
elementwise gradient bound is 5x (its gradient_tolerance_scale()).

Exit codes: 0 match, 1 mismatch (or the stage failed, or it reported no GPU
while torch sees one), 2 bad arguments, 77 skipped: no PyTorch, no NumPy or
torch sees no CUDA GPU (one line saying which).
"""

import argparse
import math
import os
import shutil
import subprocess
import sys
import tempfile

PROG = "compare_with_pytorch"
# Where the float64 reference runs. CCE_COMPARE_DEVICE=cpu is for testing this
# script itself without a GPU (with a stand-in for the stage executable).
DEVICE = os.environ.get("CCE_COMPARE_DEVICE", "cuda")
EXIT_SKIP = 77

# (rel L2, elementwise atol, elementwise rtol) per dtype and kind of output.
# bf16 gradients: the rel L2 bound is set per output from eager PyTorch's
# error (EAGER_FACTOR, BF16_GRADIENT_FLOOR); None until then.
TOLERANCES = {
    "fp32": {"forward": (1e-5, 1e-3, 1e-3), "gradient": (1e-4, 2e-3, 2e-3)},
    "bf16": {"forward": (1e-4, 2e-3, 2e-3), "gradient": (None, 2e-2, 2e-2)},
}
# bf16 dE and dC: rel L2 <= max(EAGER_FACTOR x eager bf16 PyTorch's rel L2,
# BF16_GRADIENT_FLOOR). The floor is about twice bf16's unit roundoff 2^-9:
# rounding the exact gradient to bf16, as the stage's output is, already
# costs up to 2^-9 per element (about 1e-3 relative L2).
EAGER_FACTOR = 2.0
BF16_GRADIENT_FLOOR = 4e-3


def skip(reason):
    print(f"{PROG}: SKIPPED: {reason}")
    sys.exit(EXIT_SKIP)


def bad_input(message):
    print(f"{PROG}: error: {message}", file=sys.stderr)
    sys.exit(2)


def parse_args():
    p = argparse.ArgumentParser(
        prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("stage", help="a stage executable, e.g. build/stages/stage06_fused_backward")
    p.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    p.add_argument("--reduction", choices=["mean", "sum", "none"], default="mean")
    p.add_argument("--dloss", choices=["default", "ones", "random"], default="default",
                   help="upstream gradient: default (no dloss.npy: the executable's ones), "
                        "ones or random U(0.5,1.5) (written as dloss.npy)")
    p.add_argument("--b", type=int, default=None, help="sequences B (default 2)")
    p.add_argument("--t", type=int, default=None, help="sequence length T (default 1024)")
    p.add_argument("--n", type=int, default=None, help="tokens N: one sequence of N (instead of --b/--t)")
    p.add_argument("--d", type=int, default=2304, help="hidden size D (default 2304)")
    p.add_argument("--v", type=int, default=256000, help="vocabulary size V (default 256000)")
    p.add_argument("--softcap", type=float, default=0.0, help="softcap s (0 = off)")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--pad-frac", type=float, default=0.25,
                   help="sequences after the first are padded at the end by up to this share of T")
    p.add_argument("--inputs", default=None,
                   help="take e.npy, c.npy, targets.npy (and dloss.npy) from this directory instead")
    p.add_argument("--work", default=None, help="working directory (default: a temporary one)")
    p.add_argument("--keep", action="store_true", help="keep the working directory")
    p.add_argument("--require-backward", action="store_true",
                   help="report a forward-only stage as skipped (77) instead of comparing its forward")
    p.add_argument("--stage-flags", default="",
                   help="more flags for the stage executable, one string (e.g. \"--no-filter\" for stage 07)")
    a = p.parse_args()
    if not os.path.isfile(a.stage) or not os.access(a.stage, os.X_OK):
        bad_input(f"{a.stage} is not an executable (build first: cmake --build build)")
    if a.n is not None and (a.b is not None or a.t is not None):
        bad_input("give either --n or --b/--t")
    if a.n is not None:
        a.b, a.t = 1, a.n
    a.b = 2 if a.b is None else a.b
    a.t = 1024 if a.t is None else a.t
    if min(a.b, a.t, a.d, a.v) <= 0:
        bad_input("B, T, D and V must be positive")
    if a.t < 2:
        bad_input("T must be at least 2 (the last position of a sequence has no label)")
    if not (a.softcap >= 0 and math.isfinite(a.softcap)):
        bad_input("--softcap must be a finite number >= 0")
    if not 0 <= a.pad_frac < 1:
        bad_input("--pad-frac must be in [0, 1)")
    if a.inputs is not None and not os.path.isdir(a.inputs):
        bad_input(f"--inputs {a.inputs}: not a directory")
    return a


def gpu_seen_by_nvidia_smi():
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
        return "GPU" in out
    except (OSError, subprocess.SubprocessError):
        return False


def import_or_skip():
    """torch and numpy, or exit 77 saying which is missing."""
    try:
        import torch
    except ImportError as e:
        gpu = "" if gpu_seen_by_nvidia_smi() else " and no CUDA GPU"
        skip(f"no PyTorch ({e.__class__.__name__} in {sys.executable}){gpu}")
    try:
        import numpy as np
    except ImportError as e:
        skip(f"no NumPy ({e.__class__.__name__} in {sys.executable})")
    if DEVICE == "cuda" and not torch.cuda.is_available():
        skip("no CUDA GPU found (torch.cuda.is_available() is False)")
    return np, torch


def build_inputs(a, torch):
    """Hidden states and shifted labels of a causal LM batch, flattened to [N, D] and [N]."""
    g = torch.Generator().manual_seed(a.seed)
    B, T, D, V = a.b, a.t, a.d, a.v
    c = torch.randn(V, D, generator=g) / math.sqrt(D)  # rows of norm ~1
    # A Zipf(1) unigram prior over a random order of the vocabulary, carried by
    # channel 0 (E[:, 0] = 8, C[:, 0] = prior / 8: logit += prior), as in the
    # repository's --data realistic; the tokens are drawn from it.
    zipf = 1.0 / torch.arange(1, V + 1, dtype=torch.float64)
    order = torch.randperm(V, generator=g)
    prior = torch.empty(V)
    prior[order] = -torch.log(torch.arange(1, V + 1, dtype=torch.float32))
    if D >= 2:
        c[:, 0] = prior / 8
    tokens = order[torch.multinomial(zipf / zipf.sum(), B * T, replacement=True, generator=g)].view(B, T)
    # Right padding: sequence b > 0 keeps its first `length` tokens.
    lengths = [T] + [T - int(torch.randint(0, int(a.pad_frac * T) + 1, (1,), generator=g)) for _ in range(B - 1)]
    labels = tokens.clone()
    for b, length in enumerate(lengths):
        labels[b, max(length, 1):] = -100
    # Position t predicts token t+1: shift left, -100 at each sequence's end.
    shifted = torch.nn.functional.pad(labels, (0, 1), value=-100)[:, 1:]
    # Hidden state: noise, pulled along the classifier rows (channels 1:) of
    # the next token and of a few distractors, so that their logits rise by
    # `boost` above their prior: the softmax gets a trained LM's heavy head.
    hidden = 0.5 * torch.randn(B, T, D, generator=g)
    k = 4
    others = order[torch.multinomial(zipf / zipf.sum(), B * T * k, replacement=True, generator=g)].view(B, T, k)
    pulls = torch.cat([shifted.clamp(min=0).unsqueeze(-1), others], dim=-1)  # [B, T, 1+k]
    boosts = torch.cat([6.0 + 8.0 * torch.rand(B, T, 1, generator=g), 8.0 * torch.rand(B, T, k, generator=g)], -1)
    boosts[..., 0] *= (shifted >= 0).float()  # no pull where there is no label
    first = 1 if D >= 2 else 0
    rows = c[pulls][..., first:]  # [B, T, 1+k, D-1]
    hidden[..., first:] += (boosts / rows.pow(2).sum(-1)).unsqueeze(-1).mul(rows).sum(-2)
    if D >= 2:
        hidden[..., 0] = 8.0
    e = hidden.reshape(B * T, D).contiguous()
    targets = shifted.reshape(B * T).contiguous()
    return e, c, targets


def write_or_read_inputs(a, np, torch, in_dir):
    """The inputs as float32/int64 torch tensors (CPU), and the dloss to use (or None for the default)."""
    if a.inputs is not None:
        e = torch.from_numpy(np.load(os.path.join(a.inputs, "e.npy"))).float()
        c = torch.from_numpy(np.load(os.path.join(a.inputs, "c.npy"))).float()
        targets = torch.from_numpy(np.load(os.path.join(a.inputs, "targets.npy"))).long()
        dloss_path = os.path.join(a.inputs, "dloss.npy")
        dloss = torch.from_numpy(np.load(dloss_path)).double() if os.path.exists(dloss_path) else None
        if dloss is not None and a.dloss != "default":
            bad_input(f"--dloss {a.dloss}: {dloss_path} already gives the upstream gradient")
        return e, c, targets, dloss, a.inputs
    e, c, targets = build_inputs(a, torch)
    n = e.shape[0]
    os.makedirs(in_dir)
    np.save(os.path.join(in_dir, "e.npy"), e.numpy())
    np.save(os.path.join(in_dir, "c.npy"), c.numpy())
    np.save(os.path.join(in_dir, "targets.npy"), targets.numpy())
    dloss = None
    shape = (n,) if a.reduction == "none" else ()
    if a.dloss == "ones":
        dloss = torch.ones(shape, dtype=torch.float32)
    elif a.dloss == "random":
        g = torch.Generator().manual_seed(a.seed + 1)
        dloss = 0.5 + torch.rand(shape, generator=g)
    if dloss is not None:
        np.save(os.path.join(in_dir, "dloss.npy"), dloss.numpy().astype(np.float32))
        dloss = dloss.double()
    return e, c, targets, dloss, in_dir


def has_backward(a):
    """Whether the stage has a backward: a forward-only one refuses --backward
    (exit 2) before any GPU work; one with a backward runs a tiny problem."""
    r = subprocess.run([a.stage, "--backward", "--n", "3", "--d", "4", "--v", "5", "--data", "random",
                        "--iters", "0"], capture_output=True, text=True)
    return not (r.returncode == 2 and "computes the forward only" in r.stderr)


def run_stage(a, torch, load_dir, out_dir):
    """Runs the stage with --backward (or without, for a forward-only stage); returns whether it ran the backward."""
    base = [a.stage, "--load", load_dir, "--save", out_dir, "--save-large", "--dtype", a.dtype,
            "--reduction", a.reduction, "--iters", "0"]
    if a.softcap > 0:
        base += ["--softcap", repr(a.softcap)]
    base += a.stage_flags.split()
    for backward in (True, False):
        cmd = base + (["--backward"] if backward else [])
        print("$ " + " ".join(cmd), flush=True)
        r = subprocess.run(cmd, capture_output=True, text=True)
        if backward and r.returncode == 2 and "computes the forward only" in r.stderr:
            print("  (the stage has no backward: comparing the forward only)")
            continue
        for line in (r.stdout + r.stderr).splitlines():
            print("  | " + line)
        if r.returncode == EXIT_SKIP:
            # Skipping is for a machine without a GPU. Where torch sees one,
            # a stage that does not is broken, not a reason to skip.
            if torch.cuda.is_available():
                print(f"{PROG}: FAILED: {os.path.basename(a.stage)} saw no usable CUDA GPU (exit 77) "
                      f"while torch sees {torch.cuda.get_device_name(0)}")
                sys.exit(1)
            skip(f"{os.path.basename(a.stage)} found no CUDA GPU, and torch sees none either")
        if r.returncode != 0:
            print(f"{PROG}: FAILED: {os.path.basename(a.stage)} exited with {r.returncode}")
            sys.exit(1)
        return backward
    raise AssertionError("unreachable")


def reference(a, torch, e, c, targets, dloss, backward):
    """loss, LSE, dE, dC in float64 with torch autograd, on the GPU."""
    dev = torch.device(DEVICE)
    if a.dtype == "bf16":  # what the stage sees: inputs rounded to bf16 (nearest even)
        e, c = e.bfloat16(), c.bfloat16()
    e64 = e.to(dev).double().requires_grad_(backward)
    c64 = c.to(dev).double().requires_grad_(backward)
    t = targets.to(dev)
    logits = e64 @ c64.T
    if a.softcap > 0:
        logits = a.softcap * torch.tanh(logits / a.softcap)
    with torch.no_grad():
        lse = torch.logsumexp(logits, dim=-1)
    loss = torch.nn.functional.cross_entropy(logits, t, ignore_index=-100, reduction=a.reduction)
    de = dc = None
    if backward:
        if dloss is None:  # the executable's default: ones, i.e. loss.backward() / loss.sum().backward()
            dloss = torch.ones_like(loss)
        loss.backward(dloss.to(dev).reshape(loss.shape))
        de, dc = e64.grad, c64.grad
    return loss.detach(), lse, de, dc


def eager_bf16_gradients(a, torch, e, c, targets, dloss):
    """dE and dC (bf16, on the device) as eager PyTorch computes them in bf16 training."""
    dev = torch.device(DEVICE)
    e16 = e.bfloat16().to(dev).requires_grad_(True)
    c16 = c.bfloat16().to(dev).requires_grad_(True)
    logits = e16 @ c16.T  # bf16 logits [N, V], as eager materializes them
    if a.softcap > 0:
        logits = a.softcap * torch.tanh(logits / a.softcap)
    loss = torch.nn.functional.cross_entropy(logits, targets.to(dev), ignore_index=-100, reduction=a.reduction)
    upstream = torch.ones_like(loss) if dloss is None else dloss.to(dev, torch.bfloat16).reshape(loss.shape)
    loss.backward(upstream)
    return e16.grad.detach(), c16.grad.detach()


def relative_l2(got, ref):
    """||got - ref|| / ||ref|| (the plain norm when ref is all zero); got is cast to ref's dtype and device."""
    diff = got.reshape(ref.shape).to(ref.device, ref.dtype) - ref
    ref_norm = ref.norm().item()
    return diff.norm().item() / ref_norm if ref_norm > 0 else diff.norm().item()


def compare(name, got, ref, tol, bound_note=""):
    """(passed, line): rel L2 and max abs error of got against ref (both float64 tensors on one device)."""
    rel_l2_tol, atol, rtol = tol
    got = got.reshape(ref.shape).to(ref.device, ref.dtype)
    diff = (got - ref).abs()
    max_ref = ref.abs().max().item() if ref.numel() else 0.0
    rel_l2 = relative_l2(got, ref)
    if name in ("dE", "dC"):
        atol *= max_ref  # gradients: atol relative to the largest reference value
    bound = atol + rtol * ref.abs()
    bad = int((~(diff <= bound)).sum().item())  # NaN counts as bad
    finite = bool(got.isfinite().all().item())
    ok = finite and bad == 0 and rel_l2 <= rel_l2_tol
    line = (f"  {name:5s} max abs err {diff.max().item():.3e}  (max |ref| {max_ref:.3e})  rel L2 {rel_l2:.3e} "
            f"(<= {rel_l2_tol:.3g}{bound_note})  elementwise atol {atol:.2e} rtol {rtol:g}: {bad} of {ref.numel()} outside"
            f"{'' if finite else ', NON-FINITE values'}  {'ok' if ok else 'MISMATCH'}")
    return ok, line


def main():
    a = parse_args()
    np, torch = import_or_skip()
    if a.require_backward and not has_backward(a):
        skip("the stage has no backward (--require-backward)")
    work = a.work or tempfile.mkdtemp(prefix="cce_pytorch_")
    if a.work:  # cleared first, so only a directory of ours: absent, empty, or in/ and out/
        if os.path.isdir(work) and not set(os.listdir(work)) <= {"in", "out"}:
            bad_input(f"--work {work} holds other files than in/ and out/; give a new or empty directory")
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
    in_dir, out_dir = os.path.join(work, "in"), os.path.join(work, "out")
    e, c, targets, dloss, load_dir = write_or_read_inputs(a, np, torch, in_dir)
    n, d, v = e.shape[0], e.shape[1], c.shape[0]
    valid = int((targets != -100).sum())
    if a.inputs is not None:
        upstream = "dloss.npy from " + a.inputs if dloss is not None else "ones (no dloss.npy in " + a.inputs + ")"
    else:
        upstream = {"default": "ones (no dloss.npy)", "ones": "dloss.npy of ones",
                    "random": "dloss.npy U(0.5,1.5)"}[a.dloss]
    print(f"{PROG}: {os.path.basename(a.stage)}, N={n} D={d} V={v} ({valid} tokens with a label), {a.dtype}, "
          f"reduction {a.reduction}, softcap {a.softcap:g}, upstream gradient {upstream}; work directory {work}")

    backward = run_stage(a, torch, load_dir, out_dir)

    # The inputs the stage used must be those the reference rounds to.
    saved_e = torch.from_numpy(np.load(os.path.join(out_dir, "e.npy")))
    rounded_e = e.bfloat16().float() if a.dtype == "bf16" else e
    if not torch.equal(saved_e, rounded_e):
        print(f"{PROG}: FAILED: the stage's inputs (out/e.npy) differ from the reference's {a.dtype} inputs")
        sys.exit(1)

    # Eager bf16 first, keeping only its bf16 gradients: its logits and the
    # float64 reference's need not be on the GPU at once.
    eager = eager_bf16_gradients(a, torch, e, c, targets, dloss) if a.dtype == "bf16" and backward else None
    loss, lse, de, dc = reference(a, torch, e, c, targets, dloss, backward)
    tol = TOLERANCES[a.dtype]
    grad_tol = tol["gradient"]
    if os.path.basename(a.stage).startswith("stage07") and "--no-filter" not in a.stage_flags.split():
        # filtering: the stage's gradient_tolerance_scale() of 5
        grad_tol = (grad_tol[0], grad_tol[1] * 5, grad_tol[2] * 5)
    load = lambda name: torch.from_numpy(np.load(os.path.join(out_dir, name))).double()  # noqa: E731
    results = [compare("loss", load("loss.npy"), loss, tol["forward"]),
               compare("LSE", load("lse.npy"), lse, tol["forward"])]
    if backward:
        for name, file, ref, eager_grad in (("dE", "de.npy", de, eager[0] if eager else None),
                                            ("dC", "dc.npy", dc, eager[1] if eager else None)):
            output_tol, note = grad_tol, ""
            if eager_grad is not None:  # bf16: the bound follows eager PyTorch's error on these inputs
                eager_rel_l2 = relative_l2(eager_grad, ref)
                output_tol = (max(EAGER_FACTOR * eager_rel_l2, BF16_GRADIENT_FLOOR),) + grad_tol[1:]
                note = (f" = max({EAGER_FACTOR:g} x eager bf16 PyTorch's {eager_rel_l2:.3e}, "
                        f"floor {BF16_GRADIENT_FLOOR:g})")
            results.append(compare(name, load(file), ref, output_tol, note))
    print(f"{PROG}: errors against torch autograd in float64:")
    for _, line in results:
        print(line)
    passed = all(ok for ok, _ in results)
    if passed and not a.keep:
        shutil.rmtree(work, ignore_errors=True)  # gigabytes at realistic sizes
    else:
        print(f"{PROG}: the inputs and outputs are in {work}")
    print(f"{PROG}: {'PASSED' if passed else 'FAILED'}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
