#!/usr/bin/env python3
r"""peers.py: the implementations people would use instead of these stages, timed
on the same shapes and the same inputs as the C++ benchmark (build/bench/cce_bench),
written as Google Benchmark JSON so that one table script reads both.

Implementations (the "impl" part of each benchmark name):
  peer_torch_eager     logits = E @ C.T in bf16, then F.cross_entropy(logits.float(), t)
  peer_torch_compile   torch.compile of the same function
  peer_cce             cut_cross_entropy.linear_cross_entropy(E, C, t, impl="cce")
  peer_cce_nofilter    the same with filter_eps=None (no gradient filtering)
  peer_cce_exact       impl="cce_exact" (only in cut-cross-entropy after 25.1.1)
  stage10_plan_per_batch_op
                       the final stage through its PyTorch op (python/cce_stages, from
                       --cce-python, default build/python): beside cce_bench's
                       stage10_plan_per_batch, the op's own overhead
  peer_liger           Liger-Kernel's fused linear cross-entropy (fp32 accumulation
                       of the weight gradient where the version has accum_dtype)
  peer_quack           QuACK's chunked_linear_cross_entropy (quack-kernels, CuTe DSL):
                       the exact 3-GEMM chunked plan, chunks of 4096 rows, its base
                       pipeline (use_scaled_exp=False: the SM90 scaled-exp path fails at
                       llama3's shape); a V that is not a multiple of 8 is refused here
                       before the call, a failed case (its kernels failed at gpt2's V = 50257
                       and ran at 50304 on an H100). Last in the order: a failure inside a
                       CuTe DSL kernel could leave the CUDA context unusable. Optional: ../shared/tools/quack-wheels.sh says how its wheels
                       travel to a machine without a package registry
A package that is missing is reported and its implementations skipped; an
out-of-memory error skips that one case and the run goes on.

Modes: "loss" (the forward, inputs without requires_grad) and "loss_grad"
(forward and loss.backward(), producing dE and dC). Benchmark names are
IMPL/MODE/SHAPE, e.g. peer_cce/loss_grad/gemma2; each case gets the three
aggregate entries median, mean, stddev, min and max of Google Benchmark, times in ms,
with the counters
  peak_MB      device memory a call takes beyond its inputs, gradients
               included (MB = 10^6 bytes); for the stage's op, its stage
               object's kept scratch too (counted from before the object
               exists, over the warm-up calls and the measured one)
  dE_rel_err, dC_rel_err   (loss_grad) relative L2 error against an fp32
               computation from the same bf16 inputs
  loss_rel_err relative error of the loss against the same fp32 computation
  floor_ratio  time / the cuBLAS floor of the C++ benchmark (with --floor-json)
  TFLOPs       GEMM work done / time, counted like the C++ benchmark: 2·N·D·V
               for loss; for loss_grad 6·N·D·V (logits, dE, dC), 8·N·D·V for
               the CCE variants, whose backward computes the logits again

Each case's timed runs come back to back by default, one implementation after
the other. With --interleave they come in turns (run k of every implementation
before run k + 1 of any, the order reversed every other round), so that all
of them meet the GPU in the same power state: back-to-back dense work holds an
H100 or H200 at its 700 W cap, and a short series that starts cool runs faster
than a long one (bench/README.md, "Power and the length of a series"). The
reversal matters: in a fixed order a call that follows a slow, low-power one
(Liger's) starts with the clocks up. The context key timed_in_turns says which.

The inputs are the files the C++ stages write: for each generated shape
(small, gpt2, llama3, gemma2, gemma2_flat; gemma2_softcap reads gemma2's files
and applies Gemma-2's softcap, z = 30·tanh(logit/30), in every implementation,
the reference included: a peer without a softcap argument is skipped there)
    build/stages/stage01_materialized --n N --d D --v V --dtype bf16 \
        --data MODE --seed 1234 --save DIR/<shape> --save-large --iters 0
writes DIR/<shape>/{e,c,targets}.npy (bf16-rounded values stored as float32;
exit status 77 without a GPU is fine, the files are written first; --save-large
because llama3's and gemma2's c.npy pass the 1 GB that --save writes without
it); --inputs names DIR. MODE is realistic, except for gemma2_flat: gemma2's
N, D, V with --data random (flat random logits, the softmax of an untrained
model), as cce_bench's gemma2_flat. The message for a missing shape prints
its command (save_command). The trained-model shapes lm32k, lm128k and
lm128k_s0, lm128k_s30, lm128k_s100, lm128k_s300 (lm128k's model after 0, 30,
100 and 300 training steps, written by the same `lm_data.py --only lm128k`)
have the same layout in another directory, --lm-data (default
/tmp/cce-lm-data), written by bench/lm_data.py; their N, D and V come from the
files. As in cce_bench, they run by default when their files are there; one
asked for with --shapes whose files are missing is reported in one line and
skipped (a missing generated shape is an error, exit status 2).
bench/run_gpu.sh does all of this, then runs this script (for the shapes it
knows: not yet gemma2_flat and lm128k's snapshots; this script and cce_bench
run gemma2_flat by default, and the snapshots by default when their files are
there).

Running on a GPU machine that has PyTorch (and Triton) but no internet:
on a machine where pip works, fetch the wheels (all pure Python,
py3-none-any, so they fit any platform and Python >= 3.10):

    python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux_2_28_x86_64 \
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d .whl cut-cross-entropy==25.1.1 liger-kernel==0.8.5 packaging

(.whl/ is in .gitignore). The declared run-time dependencies are torch and
triton only (cut-cross-entropy 25.1.1: torch, triton; liger-kernel 0.8.5:
torch>=2.1.2, triton>=2.3.1; the rest of their metadata is optional extras),
but liger-kernel 0.8.5 also imports `packaging` without declaring it, hence
the third wheel (harmless where packaging is already installed). Copy .whl/
over, then on the GPU machine:

    python3 -m pip install --no-index --no-deps --target /tmp/site .whl/*.whl
    PYTHONPATH=/tmp/site python3 bench/peers.py --inputs /tmp/cce-inputs \
        --out docs/bench_peers.json --floor-json docs/bench_cpp.json

impl="cce_exact" is not in the 25.1.1 wheel (the latest release); it is on
the GitHub main branch of apple/ml-cross-entropy, for which you would build a
wheel yourself where GitHub can be reached (python3 -m pip wheel --no-deps
-w .whl git+https://github.com/apple/ml-cross-entropy.git; that version also
lists setuptools as a run-time dependency). Without it peer_cce_exact is
reported and skipped.

NumPy is not needed: the .npy files are read by a small reader below.
`python3 bench/peers.py --help` works without PyTorch; a run without it
prints a message and exits with status 2 (77 when PyTorch sees no GPU).
"""

import argparse
import ast
import datetime
import gc
import json
import math
import os
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:  # lm_data beside it, whoever imports peers
    sys.path.insert(0, HERE)
from lm_data import git_commit  # noqa: E402  (the standard library alone at import time)

SHAPES = {
    # name: (N, D, V), generated by stage 01's --save (save_command)
    "small": (4096, 2304, 32000),
    "gpt2": (20480, 768, 50257),
    "llama3": (8192, 4096, 128256),
    "gemma2": (8192, 2304, 256000),
    "gemma2_flat": (8192, 2304, 256000),
    "gemma2_softcap": (8192, 2304, 256000),
}
# The generator's --data of each generated shape (common/driver.cpp's flag; realistic when not listed).
SHAPE_DATA = {"gemma2_flat": "random"}
# The softcap s of a generated shape (z = s·tanh(logit/s); none when not listed): Gemma-2 caps its logits at 30.
SHAPE_SOFTCAP = {"gemma2_softcap": 30.0}
# A shape that reads another's input files (the softcap is not in the files).
SHAPE_INPUTS = {"gemma2_softcap": "gemma2"}
# Trained-model data (bench/lm_data.py): N, D, V from the files. name: the lm_data.py dataset (--only) that
# writes it; lm128k_sK is lm128k's model after K training steps, written during lm128k's training.
LM_DATASETS = {
    "lm32k": "lm32k",
    "lm128k": "lm128k",
    "lm128k_s0": "lm128k",
    "lm128k_s30": "lm128k",
    "lm128k_s100": "lm128k",
    "lm128k_s300": "lm128k",
}
LM_SHAPES = list(LM_DATASETS)
ALL_SHAPES = list(SHAPES) + LM_SHAPES
DEFAULT_LM_DATA = "/tmp/cce-lm-data"
IMPLS = [
    "peer_torch_eager",
    "peer_torch_compile",
    "peer_cce",
    "peer_cce_nofilter",
    "peer_cce_exact",
    "peer_liger",
    "stage10_plan_per_batch_op",
    "peer_quack",
]
MODES = ["loss", "loss_grad"]
SEED = 1234
WARMUP = 3
EXIT_BAD_INPUT = 2
EXIT_SKIPPED = 77


# ---------------------------------------------------------------------------
# Pure-Python parts (no torch): command line, inputs, Google Benchmark JSON.
# ---------------------------------------------------------------------------


def parse_list(text, allowed, what):
    items = [x.strip() for x in text.split(",") if x.strip()]
    bad = [x for x in items if x not in allowed]
    if bad or not items:
        raise argparse.ArgumentTypeError(
            "unknown %s %s (choose from %s)" % (what, ",".join(bad) or "(none)", ",".join(allowed))
        )
    return items


def make_parser():
    p = argparse.ArgumentParser(
        prog="peers.py",
        description="Time PyTorch, torch.compile, Cut Cross-Entropy and Liger-Kernel on the C++ "
        "benchmark's shapes and inputs; write Google Benchmark JSON.",
        epilog="See the docstring at the top of bench/peers.py for running without internet.",
    )
    p.add_argument("--inputs", default="/tmp/cce-inputs",
                   help="directory with one <shape>/ of e.npy, c.npy, targets.npy per shape (default %(default)s)")
    p.add_argument("--lm-data", default=DEFAULT_LM_DATA,
                   help="directory with <shape>/ of e.npy, c.npy, targets.npy for the trained-model shapes %s, "
                   "from bench/lm_data.py (default %%(default)s)" % ",".join(LM_SHAPES))
    p.add_argument("--shapes", default=None, type=lambda s: parse_list(s, ALL_SHAPES, "shape"),
                   help="comma-separated subset of %s (default: %s, and each trained-model shape whose files are "
                   "in --lm-data)" % (",".join(ALL_SHAPES), ",".join(SHAPES)))
    p.add_argument("--impls", default=",".join(IMPLS), type=lambda s: parse_list(s, IMPLS, "impl"),
                   help="comma-separated subset of %s (default all)" % ",".join(IMPLS))
    p.add_argument("--modes", default=",".join(MODES), type=lambda s: parse_list(s, MODES, "mode"),
                   help="comma-separated subset of %s (default both)" % ",".join(MODES))
    p.add_argument("--reps", type=int, default=10, help="timed runs per case after %d warm-up runs; "
                   "the median is reported (default %%(default)s)" % WARMUP)
    p.add_argument("--interleave", action="store_true",
                   help="time the implementations in turns (call k of each before call k + 1 of any; the order "
                   "reversed every other round), so that each meets the GPU in the same power state; their "
                   "warm-ups and memory runs still come one "
                   "implementation at a time, and all their inputs and gradients are held at once")
    p.add_argument("--out", default="docs/bench_peers.json", help="JSON output file (default %(default)s)")
    p.add_argument("--cce-python", default="build/python",
                   help="where the build put python/cce_stages (for stage10_plan_per_batch_op; default %(default)s)")
    p.add_argument("--stage-flags", default="",
                   help="flags for stage10_plan_per_batch_op, as on the stage's command line (e.g. \"--dense-head "
                   "0.5\"; one flag alone as --stage-flags=--keep-all); recorded in the JSON's context (default: none)")
    p.add_argument("--floor-json", default=None,
                   help="the C++ benchmark's JSON: adds floor_ratio = time / cublas_floor/<mode>/<shape> median")
    return p


def data_mode(shape):
    """The --data of a generated shape: random for gemma2_flat, realistic for the others."""
    return SHAPE_DATA.get(shape, "realistic")


def softcap_of(shape):
    """The shape's softcap s, or None."""
    return SHAPE_SOFTCAP.get(shape)


def save_command(inputs_dir, shape):
    """The command that writes a generated shape's inputs (--save-large: gemma2's c.npy alone is 2.4 GB)."""
    n, d, v = SHAPES[shape]
    return ("build/stages/stage01_materialized --n %d --d %d --v %d --dtype bf16 --data %s "
            "--seed %d --save %s --save-large --iters 0"
            % (n, d, v, data_mode(shape), SEED, os.path.join(inputs_dir, SHAPE_INPUTS.get(shape, shape))))


def input_folder(args, shape):
    if shape in LM_SHAPES:
        return os.path.join(args.lm_data, shape)
    return os.path.join(args.inputs, SHAPE_INPUTS.get(shape, shape))


def shape_context(args, shape, dims):
    """'name N=.. D=.. V=..' and, as in cce_bench's cce_shapes, the folder of a trained-model shape or the
    data of a generated shape whose data is not realistic."""
    text = "%s N=%d D=%d V=%d" % ((shape,) + tuple(dims))
    if shape in LM_SHAPES:
        return text + " (%s)" % input_folder(args, shape)
    notes = []
    if data_mode(shape) != "realistic":
        notes.append("%s data" % data_mode(shape))
    if softcap_of(shape) is not None:
        notes.append("softcap %g" % softcap_of(shape))
    return text + (" (%s)" % ", ".join(notes) if notes else "")


def lacking_files(folder):
    return [f for f in ("e.npy", "c.npy", "targets.npy") if not os.path.isfile(os.path.join(folder, f))]


def torch_with_cuda(prog):
    """PyTorch, when it imports and sees a CUDA device; else None, after one line on stderr saying why. For the
    probes beside this script (stage_timeline.py, plan_series.py), which then exit EXIT_SKIPPED."""
    try:
        import torch
    except ImportError as exc:
        print("%s: SKIPPED: %s: run this on a GPU machine with PyTorch" % (prog, exc), file=sys.stderr)
        return None
    if not torch.cuda.is_available():
        print("%s: SKIPPED: PyTorch sees no CUDA device" % prog, file=sys.stderr)
        return None
    return torch


def torch_and_stages(prog, python_dir):
    """(torch, the cce_stages package from python_dir) for the probes, or (None, None) after torch_with_cuda's line."""
    torch = torch_with_cuda(prog)
    if torch is None:
        return None, None
    sys.path.insert(0, python_dir)
    import cce_stages
    return torch, cce_stages


def check_probe_args(parser, calls, folders):
    """The probes' argument checks: at least one call, every input folder complete (else parser.error, exit 2)."""
    if calls < 1:
        parser.error("--calls must be >= 1")
    for folder in folders:
        if lacking_files(folder):
            parser.error("%s lacks %s" % (folder, ", ".join(lacking_files(folder))))


def default_shapes(lm_data):
    """The generated shapes, and the trained-model shapes whose files are all in lm_data."""
    return list(SHAPES) + [s for s in LM_SHAPES if not lacking_files(os.path.join(lm_data, s))]


def missing_inputs(inputs_dir, shapes):
    """[(shape, message)] for every generated shape whose input files are not all there."""
    out = []
    for shape in shapes:
        folder = os.path.join(inputs_dir, SHAPE_INPUTS.get(shape, shape))
        lacking = lacking_files(folder)
        if lacking:
            out.append((shape, "inputs for %s missing: %s lacks %s; write them with\n  %s"
                        % (shape, folder, ", ".join(lacking), save_command(inputs_dir, shape))))
    return out


def lm_shape_dims(folder):
    """(N, D, V) of a trained-model shape from its files' headers (ValueError when they disagree)."""
    shapes = {}
    for name in ("e", "c", "targets"):
        path = os.path.join(folder, name + ".npy")
        with open(path, "rb") as f:
            _, fortran, shape = read_npy_header(f)
        if fortran:
            raise ValueError("%s: Fortran order is not supported" % path)
        shapes[name] = shape
    e, c, t = shapes["e"], shapes["c"], shapes["targets"]
    if len(e) != 2 or len(c) != 2 or len(t) != 1 or c[1] != e[1] or t[0] != e[0]:
        raise ValueError("%s: e %s, c %s, targets %s are not [N,D], [V,D], [N]" % (folder, e, c, t))
    return e[0], e[1], c[0]


def lm_command(lm_data, shape):
    """The command that writes a trained-model shape (its dataset: lm128k for lm128k's snapshots)."""
    return "python3 bench/lm_data.py --out %s --only %s" % (lm_data, LM_DATASETS[shape])


def read_npy_header(f):
    """Reads the header of an .npy file; returns (descr, fortran_order, shape). f is at the data after."""
    magic = f.read(6)
    if magic != b"\x93NUMPY":
        raise ValueError("not an .npy file")
    major = f.read(2)[0]
    size_bytes = 2 if major == 1 else 4
    header_len = int.from_bytes(f.read(size_bytes), "little")
    header = ast.literal_eval(f.read(header_len).decode("latin1"))
    return header["descr"], header["fortran_order"], tuple(header["shape"])


def load_npy_bytes(path):
    """(descr, shape, bytearray of the data) of a C-order .npy file, without NumPy."""
    with open(path, "rb") as f:
        descr, fortran, shape = read_npy_header(f)
        if fortran:
            raise ValueError("%s: Fortran order is not supported" % path)
        itemsize = int(descr[2:])
        count = 1
        for s in shape:
            count *= s
        data = bytearray(count * itemsize)
        if f.readinto(data) != len(data):
            raise ValueError("%s: file is shorter than its header says" % path)
    return descr, shape, data


def aggregate_entries(run_name, real_ms, cpu_ms, counters, family_index=0):
    """Google Benchmark's median, mean, stddev, min and max aggregate entries of one case
    (min and max: the spread, written beside the median in the tables).

    real_ms, cpu_ms: one time per repetition (ms). counters: name -> value
    (the same in every repetition) or list (one value per repetition). As in
    Google Benchmark, each counter is aggregated like the time, so a constant
    counter has stddev 0.
    """
    reps = len(real_ms)
    if reps == 0 or len(cpu_ms) != reps:
        raise ValueError("need one real and one cpu time per repetition")

    def stats(values):
        values = [float(x) for x in values]
        return {
            "median": statistics.median(values),
            "mean": statistics.fmean(values),
            "stddev": statistics.stdev(values) if len(values) > 1 else 0.0,
            "min": min(values),
            "max": max(values),
        }

    per_counter = {}
    for name, value in counters.items():
        if value is None:
            continue
        values = list(value) if isinstance(value, (list, tuple)) else [value] * reps
        per_counter[name] = stats(values)
    real, cpu = stats(real_ms), stats(cpu_ms)
    entries = []
    for agg in ("median", "mean", "stddev", "min", "max"):
        entry = {
            "name": "%s_%s" % (run_name, agg),
            "family_index": family_index,
            "per_family_instance_index": 0,
            "run_name": run_name,
            "run_type": "aggregate",
            "repetitions": reps,
            "threads": 1,
            "aggregate_name": agg,
            "aggregate_unit": "time",
            "iterations": reps,
            "real_time": real[agg],
            "cpu_time": cpu[agg],
            "time_unit": "ms",
        }
        for name, s in per_counter.items():
            entry[name] = s[agg]
        entries.append(entry)
    return entries


def write_json(path, context, benchmarks):
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"context": context, "benchmarks": benchmarks}, f, indent=2, allow_nan=True)
        f.write("\n")
    os.replace(tmp, path)


_TO_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}


def load_floors(path):
    """{run_name: median real time in ms} of the cublas_floor/* benchmarks of a Google Benchmark JSON.

    Names are cut to their first three components (Google Benchmark appends
    /iterations:K/repeats:R/manual_time to the C++ names). Uses the median
    aggregate when there is one, else the median of the iteration entries."""
    with open(path) as f:
        doc = json.load(f)
    medians, runs = {}, {}
    for b in doc.get("benchmarks", []):
        run = "/".join(b.get("run_name", b.get("name", "")).split("/")[:3])
        if (not run.startswith("cublas_floor/") or b.get("error_occurred") or b.get("skipped")
                or "real_time" not in b):
            continue
        ms = float(b["real_time"]) * _TO_MS.get(b.get("time_unit", "ns"), 1e-6)
        if b.get("run_type") == "aggregate":
            if b.get("aggregate_name") == "median":
                medians[run] = ms
        else:
            runs.setdefault(run, []).append(ms)
    for run, values in runs.items():
        medians.setdefault(run, statistics.median(values))
    return medians


def package_version(dist, module):
    try:
        from importlib import metadata
        return metadata.version(dist)
    except Exception:
        pass
    try:
        return getattr(__import__(module), "__version__", "unknown")
    except Exception:
        return "missing"


def driver_version():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
        lines = out.stdout.strip().splitlines()
        return lines[0].strip() if out.returncode == 0 and lines else "unknown"
    except Exception:
        return "unknown"


def gemm_flops(impl, mode, dims):
    """The GEMM FLOPs one call does (see TFLOPs in the docstring); dims = (N, D, V)."""
    n, d, v = dims
    if mode == "loss":
        return 2.0 * n * d * v
    return (8.0 if impl.startswith("peer_cce") else 6.0) * n * d * v


def fmt(x, spec):
    return "-" if x is None else format(x, spec)


# ---------------------------------------------------------------------------
# The GPU part (torch imported in main() only).
# ---------------------------------------------------------------------------


def is_oom(torch, exc):
    oom = getattr(torch.cuda, "OutOfMemoryError", None)
    if oom is not None and isinstance(exc, oom):
        return True
    return isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower()


def free_memory(torch):
    gc.collect()
    torch.cuda.empty_cache()


def load_inputs(torch, folder, dims):
    """E, C (bf16) and t (int64) on the GPU from the .npy files of one shape of dims (N, D, V)."""
    dtypes = {"<f4": torch.float32, "<i8": torch.int64, "<i4": torch.int32}
    tensors = {}
    for name in ("e", "c", "targets"):
        path = os.path.join(folder, name + ".npy")
        descr, shape_, data = load_npy_bytes(path)
        if descr not in dtypes:
            raise ValueError("%s: dtype %s not supported (want float32 or int64)" % (path, descr))
        host = torch.frombuffer(data, dtype=dtypes[descr]).reshape(shape_)
        dev = host.to("cuda")
        del host, data
        tensors[name] = dev.to(torch.bfloat16) if name != "targets" else dev.to(torch.int64)
        del dev
    e, c, t = tensors["e"], tensors["c"], tensors["targets"]
    n, d, v = dims
    if tuple(e.shape) != (n, d) or tuple(c.shape) != (v, d) or tuple(t.shape) != (n,):
        raise ValueError("%s: e %s, c %s, targets %s do not match N=%d D=%d V=%d"
                         % (folder, tuple(e.shape), tuple(c.shape), tuple(t.shape), n, d, v))
    free_memory(torch)
    return e, c, t


class Reference:
    """fp32 loss, dE and dC from the bf16 inputs, kept on the host."""

    def __init__(self, loss, de, dc):
        self.loss, self.de, self.dc = loss, de, dc


class Unsupported(Exception):
    """A peer that cannot compute this case (its message is the reason it is skipped)."""


def softcapped(torch, logits, softcap):
    """z = s·tanh(logits/s), or the logits when there is no softcap."""
    return logits if softcap is None else softcap * torch.tanh(logits / softcap)


def compute_reference(torch, F, e, c, t, softcap=None):
    old_tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        ef = e.detach().float().requires_grad_(True)
        cf = c.detach().float().requires_grad_(True)
        loss = F.cross_entropy(softcapped(torch, ef @ cf.T, softcap), t)
        loss.backward()
        ref = Reference(float(loss), ef.grad.cpu(), cf.grad.cpu())
        del loss, ef, cf
        return ref
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old_tf32
        free_memory(torch)


def rel_l2(torch, x, ref_host, rows=8192):
    """||x - ref|| / ||ref||, in float64, a block of rows at a time (little extra memory)."""
    num = den = 0.0
    for i in range(0, ref_host.shape[0], rows):
        r = ref_host[i:i + rows].to(x.device, dtype=torch.float64)
        num += float((x[i:i + rows].to(torch.float64) - r).pow(2).sum())
        den += float(r.pow(2).sum())
        del r
    return math.sqrt(num / den) if den > 0 else float("nan")


def peer_functions(torch, F, log, cce_python="build/python", stage_flags=""):
    """{impl: function(E, C, t, softcap) -> loss, or None} and {impl: reason it is skipped}. softcap: None or s;
    a function that cannot apply it raises Unsupported."""
    funcs, skipped = {}, {}
    op, why = stage_op_function(cce_python, stage_flags)
    if op is None:
        skipped["stage10_plan_per_batch_op"] = why
    else:
        funcs["stage10_plan_per_batch_op"] = op

    def torch_eager(e, c, t, softcap):
        logits = e @ c.T
        return F.cross_entropy(softcapped(torch, logits.float(), softcap), t)

    funcs["peer_torch_eager"] = torch_eager
    if hasattr(torch, "compile"):
        funcs["peer_torch_compile"] = "compile"  # compiled afresh for each case (see make_case_function)
    else:
        skipped["peer_torch_compile"] = "torch %s has no torch.compile: skipped" % torch.__version__

    try:
        import cut_cross_entropy
        from cut_cross_entropy import linear_cross_entropy
    except Exception as exc:  # ImportError, or a broken install
        absent = isinstance(exc, ImportError) and getattr(exc, "name", None) == "cut_cross_entropy"
        reason = ("cut_cross_entropy not installed: skipped" if absent
                  else "cut_cross_entropy failed to import (%s: %s): skipped" % (type(exc).__name__, exc))
        for impl in ("peer_cce", "peer_cce_nofilter", "peer_cce_exact"):
            skipped[impl] = reason
    else:
        funcs["peer_cce"] = lambda e, c, t, s: linear_cross_entropy(e, c, t, impl="cce", softcap=s)
        funcs["peer_cce_nofilter"] = lambda e, c, t, s: linear_cross_entropy(e, c, t, impl="cce", filter_eps=None,
                                                                             softcap=s)
        impl_enum = getattr(cut_cross_entropy, "LinearCrossEntropyImpl", None)
        if impl_enum is not None and "CCE_EXACT" in impl_enum.__members__:
            funcs["peer_cce_exact"] = lambda e, c, t, s: linear_cross_entropy(e, c, t, impl="cce_exact", softcap=s)
        else:
            skipped["peer_cce_exact"] = ("cut_cross_entropy %s has no impl='cce_exact' (it is on GitHub main, "
                                         "after 25.1.1): skipped"
                                         % package_version("cut-cross-entropy", "cut_cross_entropy"))

    def add_optional(impl, package, make):
        """make() -> (function, what it calls) or (None, why it is skipped)."""
        try:
            fn, why = make()
        except Exception as exc:  # an installed version whose import or API surprises us
            fn, why = None, "%s unusable (%s: %s): skipped" % (package, type(exc).__name__, exc)
        if fn is None:
            skipped[impl] = why
        else:
            funcs[impl] = fn
            log("%s: %s" % (impl, why))

    add_optional("peer_liger", "liger_kernel", lambda: liger_function(torch))
    add_optional("peer_quack", "quack-kernels", quack_function)
    return funcs, skipped


def accepts(fn, name):
    """Whether fn's signature has a parameter called name (False when it cannot be read)."""
    import inspect
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def quack_function():
    """QuACK's chunked linear cross-entropy as f(E, C, t) -> loss, or (None, why it is skipped).

    quack-kernels 0.6.5 keys its compile cache on the values an epilogue depends on, and raises TypeError for
    some cutlass-dsl internals that it cannot key ("no fail-closed semantic key"). Such a value is keyed here by
    its type and repr instead: a cache key only, the math is unchanged."""
    try:
        from quack.gemm_runtime import identity
    except ImportError as exc:
        missing = (getattr(exc, "name", None) or "").split(".")[0] == "quack"
        return None, ("quack-kernels not installed: skipped" if missing
                      else "quack-kernels failed to import (%s): skipped" % exc)
    strict_key = identity.semantic_value_key
    if not getattr(strict_key, "keys_by_repr", False):
        def key_or_repr(value, seen):
            try:
                return strict_key(value, seen)
            except TypeError:
                return ("repr", type(value).__module__, type(value).__qualname__, repr(value))

        key_or_repr.keys_by_repr = True
        identity.semantic_value_key = key_or_repr
    from quack.linear_cross_entropy import chunked_linear_cross_entropy as fn

    takes_softcap = accepts(fn, "softcap")

    def quack(e, c, t, softcap):
        if c.shape[0] % 8 != 0:
            raise ValueError("V = %d is not a multiple of 8, which QuACK's kernels need" % c.shape[0])
        if softcap is None:
            return fn(e, c, t, chunk_size=4096, reduction="mean", use_scaled_exp=False)
        if not takes_softcap:
            raise Unsupported("chunked_linear_cross_entropy has no softcap argument")
        return fn(e, c, t, chunk_size=4096, reduction="mean", use_scaled_exp=False, softcap=softcap)

    return quack, "chunked_linear_cross_entropy(chunk_size=4096, use_scaled_exp=False)"


def stage_op_function(cce_python, flags=""):
    """The final stage through python/cce_stages, with its flags, as f(E, C, t) -> loss, or (None, why it is
    skipped)."""
    if not os.path.isdir(os.path.join(cce_python, "cce_stages")):
        return None, "no cce_stages package under --cce-python %s (build the repository first): skipped" % cce_python
    if cce_python not in sys.path:
        sys.path.insert(0, cce_python)
    try:
        import cce_stages
    except Exception as exc:  # ImportError, or a library that does not load
        return None, "cce_stages failed to import (%s: %s): skipped" % (type(exc).__name__, exc)
    def op(e, c, t, softcap):
        return cce_stages.linear_cross_entropy(e, c, t, stage="10_plan_per_batch", softcap=softcap, flags=flags)

    op.release_scratch = cce_stages.release_scratch  # run_case counts the scratch the op keeps
    return op, ""


def liger_function(torch):
    """Liger-Kernel's fused linear cross-entropy as f(E, C, t, softcap) -> loss, whichever API the version has."""
    import inspect

    def first(out):
        return out[0] if isinstance(out, (tuple, list)) else getattr(out, "loss", out)

    def no_softcap():
        raise Unsupported("liger_kernel %s takes no softcap here" % package_version("liger-kernel", "liger_kernel"))

    try:
        from liger_kernel.transformers.functional import liger_fused_linear_cross_entropy as fn
    except ImportError:
        fn = None
    if fn is not None:
        extra = {"accum_dtype": torch.float32} if accepts(fn, "accum_dtype") else {}
        takes_softcap = accepts(fn, "softcap")

        def functional(e, c, t, softcap):
            if softcap is None:
                return first(fn(e, c, t, **extra))
            if not takes_softcap:
                no_softcap()
            return first(fn(e, c, t, softcap=softcap, **extra))

        return functional, ("liger_fused_linear_cross_entropy(..., accum_dtype=torch.float32)" if extra
                            else "liger_fused_linear_cross_entropy (no accum_dtype in this version)")

    try:
        from liger_kernel.ops.fused_linear_cross_entropy import LigerFusedLinearCrossEntropyFunction as cls
    except ImportError as exc:
        missing = getattr(exc, "name", None) == "liger_kernel"
        return None, ("liger_kernel not installed: skipped" if missing
                      else "liger_kernel failed to import (%s): skipped" % exc)

    def bare(e, c, t, softcap):
        if softcap is not None:
            no_softcap()
        return first(cls.apply(e, c, t))

    # Function.apply takes positional arguments only: fill forward's defaults, set accum_dtype (and the softcap).
    try:
        names = list(inspect.signature(cls.forward).parameters.values())[1:]  # without ctx
    except (TypeError, ValueError):
        names = []
    if not names or "accum_dtype" not in [p.name for p in names]:
        return bare, "LigerFusedLinearCrossEntropyFunction.apply (no accum_dtype)"
    defaults = []
    for p in names[3:]:
        if p.default is inspect.Parameter.empty:
            return bare, "LigerFusedLinearCrossEntropyFunction.apply"
        defaults.append(torch.float32 if p.name == "accum_dtype" else p.default)
    softcap_at = next((k for k, p in enumerate(names[3:]) if p.name == "softcap"), None)

    def positional(e, c, t, softcap):
        args = list(defaults)
        if softcap is not None:
            if softcap_at is None:
                no_softcap()
            args[softcap_at] = softcap
        return first(cls.apply(e, c, t, *args))

    return positional, "LigerFusedLinearCrossEntropyFunction.apply(..., accum_dtype=torch.float32)"


def make_case_function(torch, F, funcs, impl, softcap=None):
    """The case's f(E, C, t) -> loss: the peer's function with the shape's softcap (None: none) bound."""
    f = funcs[impl]
    if f == "compile":
        import torch._dynamo
        torch._dynamo.reset()  # a fresh compile per case: no recompile limit across shapes and modes

        def loss_fn(e, c, t):
            logits = e @ c.T
            return F.cross_entropy(softcapped(torch, logits.float(), softcap), t)

        return torch.compile(loss_fn)

    def case(e, c, t):
        return f(e, c, t, softcap)

    if hasattr(f, "release_scratch"):
        case.release_scratch = f.release_scratch
    return case


class PreparedCase:
    """One implementation at one shape and mode, warmed up and measured for memory: leaves E and C of its own
    (their .grad the last call's gradients), the call `step` and `clear`, which empties the gradients."""

    def __init__(self, torch, fn, e, c, t, mode):
        grad = mode == "loss_grad"
        self.E = e.detach().requires_grad_(grad)
        self.C = c.detach().requires_grad_(grad)
        self.fn, self.t, self.grad = fn, t, grad
        self.loss = None
        # The op keeps its stage's scratch between calls: its peak counts from before its stage object exists,
        # over the warm-ups (the first call decides the plan the later ones follow) and the measured call.
        release = getattr(fn, "release_scratch", None)
        base = None
        if release is not None:
            release()
            base = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
        for _ in range(WARMUP):
            self.clear()
            self.step()
        self.clear()
        torch.cuda.synchronize()
        if base is None:
            base = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
        self.step()
        torch.cuda.synchronize()
        self.peak = torch.cuda.max_memory_allocated() - base

    def step(self):
        self.loss = self.fn(self.E, self.C, self.t)
        if self.grad:
            self.loss.backward()

    def clear(self):
        self.E.grad = None
        self.C.grad = None
        self.loss = None


def time_call(torch, case, start, end):
    """One timed call as every case is timed: synchronized, CUDA events around it. Returns (real_ms, cpu_ms)."""
    case.clear()
    torch.cuda.synchronize()
    cpu0 = time.process_time()
    start.record()
    case.step()
    end.record()
    end.synchronize()
    return start.elapsed_time(end), (time.process_time() - cpu0) * 1e3


def time_in_turns(names, reps, time_one, on_failure):
    """reps rounds; in each, one call of every case still running (--interleave), so that a drift of the GPU's
    clocks or power state falls on all of them alike: in the order given, then reversed in the next round, and
    so on, so that no case always follows the same one (a call after a slow, low-power one starts with the
    clocks up). A case whose call raises leaves the rotation (on_failure(name, exc)). Returns
    {name: [(real_ms, cpu_ms), ...]} of the cases that finished."""
    times = {name: [] for name in names}
    running = list(names)
    for round_index in range(reps):
        for name in (list(running) if round_index % 2 == 0 else running[::-1]):
            try:
                times[name].append(time_one(name))
            except Exception as exc:
                running.remove(name)
                del times[name]
                on_failure(name, exc)
    return times


def main(argv=None):
    parser = make_parser()
    args = parser.parse_args(argv)
    if args.reps < 1:
        parser.error("--reps must be >= 1")

    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        print("peers.py: PyTorch not found: run this on a GPU machine with PyTorch", file=sys.stderr)
        return EXIT_BAD_INPUT
    if not torch.cuda.is_available():
        print("peers.py: PyTorch %s sees no CUDA device: nothing to time" % torch.__version__, file=sys.stderr)
        return EXIT_SKIPPED

    if args.shapes is None:
        args.shapes = default_shapes(args.lm_data)
    missing = missing_inputs(args.inputs, [s for s in args.shapes if s in SHAPES])
    if missing:
        for _, message in missing:
            print("peers.py: " + message, file=sys.stderr)
        print("(bench/run_gpu.sh writes them into $INPUTS, default /tmp/cce-inputs)", file=sys.stderr)
        return EXIT_BAD_INPUT
    # Trained-model shapes: N, D, V from the files; one without its files is skipped, the run goes on.
    dims, skipped = {}, []
    for shape in args.shapes:
        if shape in SHAPES:
            dims[shape] = SHAPES[shape]
            continue
        folder = input_folder(args, shape)
        lacking = lacking_files(folder)
        try:
            if lacking:
                raise ValueError("%s lacks %s" % (folder, ", ".join(lacking)))
            dims[shape] = lm_shape_dims(folder)
        except (OSError, ValueError, KeyError, SyntaxError) as exc:
            reason = "%s (write it with %s)" % (exc, lm_command(args.lm_data, shape))
            print("peers.py: %s skipped: %s" % (shape, reason), file=sys.stderr)
            skipped.append({"shape": shape, "reason": reason})
    shapes = [s for s in args.shapes if s in dims]
    if not shapes:
        print("peers.py: error: no shape left to run", file=sys.stderr)
        return EXIT_BAD_INPUT

    floors = None
    if args.floor_json:
        try:
            floors = load_floors(args.floor_json)
        except (OSError, ValueError) as exc:
            print("peers.py: cannot read --floor-json %s: %s" % (args.floor_json, exc), file=sys.stderr)
            return EXIT_BAD_INPUT
        if not floors:
            print("peers.py: note: no cublas_floor/* benchmarks in %s: no floor_ratio" % args.floor_json)

    def log(msg):
        print(msg, flush=True)

    funcs, skipped_impls = peer_functions(torch, F, log, args.cce_python, args.stage_flags)
    for impl in args.impls:
        if impl in skipped_impls:
            log("%s: %s" % (impl, skipped_impls[impl]))
            skipped.append({"impl": impl, "reason": skipped_impls[impl]})

    context = {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "host_name": socket.gethostname(),
        "executable": "bench/peers.py",
        "num_cpus": os.cpu_count(),
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": package_version("triton", "triton"),
        "cut_cross_entropy": package_version("cut-cross-entropy", "cut_cross_entropy"),
        "liger_kernel": package_version("liger-kernel", "liger_kernel"),
        "quack_kernels": package_version("quack-kernels", "quack"),
        "cuda": torch.version.cuda,
        "driver": driver_version(),
        "commit": git_commit(),
        "inputs": os.path.abspath(args.inputs),
        "lm_data": os.path.abspath(args.lm_data),
        "cce_shapes": ", ".join(shape_context(args, s, dims[s]) for s in shapes),
        "warmup_runs": WARMUP,
        "timed_in_turns": args.interleave,
        "stage_flags": args.stage_flags,
        "skipped": skipped,
    }
    benchmarks = []
    log("peers.py on %s: torch %s, cut_cross_entropy %s, liger_kernel %s; %d timed runs per case (median)"
        % (context["gpu"], context["torch"], context["cut_cross_entropy"], context["liger_kernel"], args.reps))

    impls = [i for i in args.impls if i in funcs]
    family = 0
    for shape in shapes:
        n, d, v = dims[shape]
        log("\n== %s: N=%d D=%d V=%d bf16, inputs %s" % (shape, n, d, v, input_folder(args, shape)))
        try:
            e, c, t = load_inputs(torch, input_folder(args, shape), dims[shape])
        except (OSError, ValueError) as exc:  # unreadable or mismatched files
            print("peers.py: error: %s" % exc, file=sys.stderr)
            return EXIT_BAD_INPUT
        except Exception as exc:
            if not is_oom(torch, exc):
                raise
            log("%s: out of memory loading the inputs: shape skipped" % shape)
            skipped.append({"shape": shape, "reason": "out of memory loading the inputs"})
            free_memory(torch)
            continue

        ref = None
        try:
            ref = compute_reference(torch, F, e, c, t, softcap_of(shape))
        except Exception as exc:
            if not is_oom(torch, exc):
                raise
            log("%s: the fp32 reference ran out of memory: no accuracy counters at this shape" % shape)
            free_memory(torch)

        def skip(impl, mode, exc):
            run_name = "%s/%s/%s" % (impl, mode, shape)
            if is_oom(torch, exc):
                reason = "out of memory"
            elif isinstance(exc, Unsupported):
                reason = str(exc)
            else:
                reason = "failed: %s: %s" % (type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "")
            log("%s: %s: skipped" % (run_name, reason))
            skipped.append({"run_name": run_name, "reason": reason})

        def record(impl, mode, case, times, ref):
            nonlocal family
            run_name = "%s/%s/%s" % (impl, mode, shape)
            real_ms, cpu_ms = [r for r, _ in times], [u for _, u in times]
            loss, de, dc = float(case.loss.detach().float()), case.E.grad, case.C.grad
            flops = gemm_flops(impl, mode, dims[shape])
            counters = {"peak_MB": case.peak / 1e6, "TFLOPs": [flops / (ms * 1e-3) / 1e12 for ms in real_ms]}
            if ref is not None:
                counters["loss_rel_err"] = abs(loss - ref.loss) / abs(ref.loss)
                if mode == "loss_grad":
                    if de is None or dc is None:
                        raise RuntimeError("loss.backward() left E.grad or C.grad empty")
                    counters["dE_rel_err"] = rel_l2(torch, de, ref.de)
                    counters["dC_rel_err"] = rel_l2(torch, dc, ref.dc)
            del de, dc
            floor = (floors or {}).get("cublas_floor/%s/%s" % (mode, shape))
            if floor:
                counters["floor_ratio"] = [ms / floor for ms in real_ms]
            elif floors is not None:
                log("%s: no cublas_floor/%s/%s in %s: no floor_ratio" % (run_name, mode, shape, args.floor_json))
            benchmarks.extend(aggregate_entries(run_name, real_ms, cpu_ms, counters, family))
            family += 1
            med = statistics.median(real_ms)
            log("%-36s %9.3f ms  peak %9.1f MB  loss err %s  dE err %s  dC err %s  floor x%s"
                % (run_name, med, case.peak / 1e6, fmt(counters.get("loss_rel_err"), ".1e"),
                   fmt(counters.get("dE_rel_err"), ".2e"), fmt(counters.get("dC_rel_err"), ".2e"),
                   fmt(med / floor if floor else None, ".2f")))

        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for mode in args.modes:
            # --interleave: every case prepared, then their timed calls in turns; otherwise one case at a time,
            # its calls back to back, its memory freed before the next.
            for group in ([impls] if args.interleave else [[impl] for impl in impls]):
                cases = {}
                for impl in group:
                    try:
                        cases[impl] = PreparedCase(torch, make_case_function(torch, F, funcs, impl, softcap_of(shape)),
                                                   e, c, t, mode)
                    except Exception as exc:
                        skip(impl, mode, exc)
                        free_memory(torch)
                times = time_in_turns(list(cases), args.reps, lambda impl: time_call(torch, cases[impl], start, end),
                                      lambda impl, exc: skip(impl, mode, exc))
                for impl, case_times in times.items():
                    try:
                        record(impl, mode, cases[impl], case_times, ref)
                    except Exception as exc:
                        skip(impl, mode, exc)
                cases.clear()  # the group's tensors go before the next group's
                free_memory(torch)
                write_json(args.out, context, benchmarks)  # partial results survive a crash
        del e, c, t, ref
        free_memory(torch)

    write_json(args.out, context, benchmarks)
    log("\nwrote %s (%d cases, %d skipped)" % (args.out, len(benchmarks) // 3, len(skipped)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
