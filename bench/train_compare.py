#!/usr/bin/env python3
r"""train_compare.py: train bench/lm_data.py's model from scratch several times, the runs differing only in
how the loss on the classifier is computed, and compare their held-out losses and times.

Each run trains lm_data.py's model (the same tokenizer, corpus, model, optimizer, learning-rate schedule and
batches; dataset lm128k by default, lm32k with --dataset) from the initialization its seed gives, on the same
batches (--data-seed), and computes the loss of the hidden states h [B*T, D] after the final norm against the
tied classifier C [V, D] (both cast to bf16, what lm_data.py's bf16 autocast GEMM reads) with one of:

  torch                 F.cross_entropy(F.linear(h, C).float(), targets): PyTorch's own, exactly lm_data.py's
                        loss (bf16 logits [B*T, V], then float); seeds S1 and S2 by default: the noise band
  final                 cce_stages.linear_cross_entropy(h, C, targets): the final stage (10_plan_per_batch)
                        through python/cce_stages; seeds S1 and S2
  final_no_correction   the same with flags="--no-correction" (the dropped tail not corrected); seed S1
  stage07               the same with stage="07_filter_sort" (the seed paper's gradient filter); seed S1
  cce                   cut_cross_entropy.linear_cross_entropy(h, C, targets, impl="cce") where it imports
                        (seed S1); otherwise the run is skipped and the JSON says why
  final_sort_every_batch  the final stage with flags="--sort-every 1" (the vocabulary order sorted every step,
                        where the default keeps it for 16): beside final:K, what the kept order costs in pairs and
                        time; not in the default runs
  torch_fp32_logits     F.cross_entropy(F.linear(h.float(), C.float()), targets) with TF32 matmuls: PyTorch's
                        loss on fp32 logits (bf16 values are exact in TF32, so the products are those of the bf16
                        inputs, summed in fp32), as the stages compute them; not in the default runs

--runs picks runs as KIND:K (K the 1-based index into --seeds; KIND alone is KIND:1), comma-separated, e.g.
--runs torch:1,final:1; the default is the seven runs above. Runs go in the order given.

What one step does (the step's parts timed on the GPU with CUDA events, not synchronizing inside the step):

  [step start]  the batch, the model up to h under bf16 autocast, h and C cast to bf16 and cut from the graph
  [loss start]  loss = the run's loss of (h, C, targets); loss.backward()  -> dL/dh, dL/dC
  [loss end]    the rest of the backward (the model, through h and through C: the tied embedding adds up),
                gradient clipping at 1.0, AdamW
  [step end]

"loss_ms" is [loss start, loss end]: the loss's forward and backward and nothing else (for the cce_stages runs
this includes the op's Python and ctypes overhead and the host synchronization it does to check the targets);
"step_ms" is [step start, step end]. Both are per step; the means in the summary leave out the first
--timing-skip steps (first calls allocate, compile and autotune). Every --eval-every steps (and at step 0 and
at the last step) the held-out loss is computed the same way for every run, so that the runs are comparable:
lm_data.py's heldout_mean_loss (the model's logits under bf16 autocast, PyTorch's cross-entropy on the float
logits) on lm_data.py's held-out windows (--eval-tokens tokens, the same rows for every run).

Recorded per step: the training loss, loss_ms, step_ms, the learning rate, the gradient norm before clipping,
and for the cce_stages runs what the stage's backward decided (cce_stages.last_stats, read after the step so
that stage 07's read of its GPU counter does not stall the step): kept_frac, the share of the (token block,
vocabulary tile) pairs its decision keeps (stage 07: of its tiles), drop_eps_log2, the log2 of the eps it
dropped below, and dense_plan, 1 where the final stage ran its dense plan (every pair by cuBLAS, chosen when
more than a third would be kept), 0 for its sparse plan; null for the other runs.

Output:
  --out JSON        (default docs/train_compare_<dataset>.json): context (GPU, versions, commit, arguments,
                    model, corpus, vocabulary), per-run series and the summary; rewritten at every evaluation
                    and after every run, so a run cut short leaves its partial series (status "running")
  --figure PNG      (default docs/figures/train_compare_<dataset>.png; '' for none): held-out loss against step
                    for all runs, the held-out loss minus the torch runs' mean with the band, loss_ms against
                    step, and kept_frac against step (the dense plan's steps marked); drawn from the JSON by
                    plot_figure(), which --plot-only JSON also uses
  a summary table   final held-out loss per run, the torch seeds' spread, whether each other run is within the
                    band max(2 x spread, 0.01 nats) of the torch runs' mean, mean loss_ms and step_ms per run

Every claim the summary prints is a check with the word PASS, FAIL or SKIP (and why): that each run completed.
Where each run ends against the band is a measurement, printed as MEASURED (inside or outside the band, by how
much) or NOT MEASURED (why), never as a check. The exit status is 1 when a run failed to complete (an exception,
a non-finite training loss, or a run left "running" in a file given to --plot-only); 0 otherwise; 2 for bad
input (one line on stderr: bad arguments, cce_stages not importable for runs that need it, a stage refusing its
flags, a --merge file made with other settings); 77 without PyTorch, numpy or sentencepiece, or without a CUDA
device (--allow-cpu: the torch runs only, on the CPU, for smoke tests at tiny sizes).

--merge keeps the runs of an existing --out file made with the same settings (and corpus, vocabulary and GPU)
and replaces those run again: the seven runs can be made in two commands, each within a 10-minute limit.

Time (estimates, printed at the start and recorded in the JSON; lm_data.py measured 124 s for lm128k's 800
torch steps on an H100, 0.155 s a step; stage07 assumed 1.6 times slower a step, cut_cross_entropy 30 s of
Triton compilation and autotuning): the defaults, 250 steps of lm128k for the seven runs, about 8 minutes on
one H100 including the corpus and tokenizer (about 1.3 minutes; the tokenizer is reused from --tokenizer-dir,
lm_data.py's folder, when it was trained with the same options and corpus). --steps shortens it:

    python3 bench/train_compare.py                                                        # lm128k, 7 runs
    python3 bench/train_compare.py --runs torch:1,torch:2,final:1,final:2                 # ~5 min, then
    python3 bench/train_compare.py --runs final_no_correction,stage07,cce --merge         # ~5 min
    python3 bench/train_compare.py --dataset lm32k                                        # 1200 steps, ~7 min
                                                                     # (one H200: the seven runs in 286 s)
    python3 bench/train_compare.py --plot-only docs/train_compare_lm128k.json             # figure and summary

Smoke test on the CPU (torch runs only, tiny sizes):

    python3 bench/train_compare.py --allow-cpu --runs torch:1,torch:2 --corpus-mb 2 --vocab 1000 --layers 1 \
        --width 32 --heads 2 --steps 6 --batch 2 --seq 32 --eval-every 3 --eval-tokens 256 \
        --tokenizer-dir /tmp/tc-smoke/tok --out /tmp/tc-smoke/out.json --figure /tmp/tc-smoke/out.png

Requirements: PyTorch with a CUDA GPU, numpy, sentencepiece; the cce_stages package (--cce-python, default
build/python of the repository) for the runs final, final_no_correction and stage07; cut-cross-entropy for the
run cce (optional); matplotlib for the figure (without it the figure is left out with one line). The summary,
the JSON handling and --plot-only need only the standard library (and matplotlib for the figure).
"""

import argparse
import datetime
import json
import math
import os
import socket
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if HERE not in sys.path:
    sys.path.insert(0, HERE)
import lm_data  # noqa: E402  (imports neither torch nor numpy at import time)
from peers import package_version  # noqa: E402  (the same: torch only when a benchmark runs)

PROG = "train_compare.py"
EXIT_OK = 0
EXIT_RUN_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_SKIPPED = 77
SCHEMA = 1

# The loss functions, in the default order. "needs": the package the run needs; "stage" and "flags": the
# cce_stages op's arguments (stage None: the op's default, the final stage).
RUN_KINDS = {
    "torch": {"needs": None, "loss": "F.cross_entropy(F.linear(h, C).float(), targets): PyTorch's own, bf16 "
                                     "logits then float (lm_data.py's loss)"},
    "final": {"needs": "cce_stages", "stage": None, "flags": "",
              "loss": "cce_stages.linear_cross_entropy(h, C, targets): the final stage"},
    "final_no_correction": {"needs": "cce_stages", "stage": None, "flags": "--no-correction",
                            "loss": "cce_stages.linear_cross_entropy(h, C, targets, flags='--no-correction')"},
    "final_sort_every_batch": {"needs": "cce_stages", "stage": None, "flags": "--sort-every 1",
                               "loss": "cce_stages.linear_cross_entropy(h, C, targets, flags='--sort-every 1'): "
                                       "the vocabulary sorted every step, not every 16th"},
    "stage07": {"needs": "cce_stages", "stage": "07_filter_sort", "flags": "",
                "loss": "cce_stages.linear_cross_entropy(h, C, targets, stage='07_filter_sort')"},
    "cce": {"needs": "cut_cross_entropy",
            "loss": "cut_cross_entropy.linear_cross_entropy(h, C, targets, impl='cce')"},
    "torch_fp32_logits": {"needs": None, "loss": "F.cross_entropy(F.linear(h.float(), C.float()), targets), TF32 "
                                                 "matmuls: PyTorch's loss on fp32 logits"},
}
DEFAULT_RUNS = "torch:1,torch:2,final:1,final:2,final_no_correction:1,stage07:1,cce:1"
DEFAULT_SEEDS = "1234,5678"
DEFAULT_STEPS = {"lm32k": 1200, "lm128k": 250}
BAND_FLOOR = 0.01           # nats: the band is max(2 x the torch seeds' spread, this)
BAND_FACTOR = 2.0
STATUSES = ("ok", "failed", "skipped", "running")
SERIES_KEYS = ("step", "train_loss", "loss_ms", "step_ms", "lr", "grad_norm", "kept_frac", "drop_eps_log2",
               "dense_plan")
EVAL_KEYS = ("step", "heldout_loss")
# Settings that define the experiment: two files can be merged only when all of them agree.
SETTING_KEYS = ("dataset", "steps", "batch", "seq", "lr", "warmup", "layers", "width", "heads", "vocab_asked",
                "tied", "data_seed", "seeds", "eval_every", "eval_tokens", "corpus_mb", "max_file_kb",
                "heldout_percent", "timing_skip")

# For the time estimate only. lm_data.py's torch training at its default sizes on an H100 (docs/lm_data/*.json:
# training.seconds / training.steps); other sizes are scaled by lm_data.train_flops.
MEASURED_STEP_SECONDS = {"lm32k": 104.1 / 3000, "lm128k": 124.1 / 800}
KIND_STEP_FACTOR = {"torch": 1.0, "final": 1.0, "final_sort_every_batch": 1.0, "final_no_correction": 1.0,
                    "stage07": 1.6, "cce": 1.0, "torch_fp32_logits": 1.3}
KIND_FIRST_CALL_SECONDS = {"cce": 30.0}  # Triton compilation and autotuning of cut_cross_entropy
KEPT_FRAC_AND_EPS = ("cce_stages.last_stats(stage, flags) after each step of the cce_stages runs: kept_frac is "
                     "the share of (token block, vocabulary tile) pairs the backward's decision keeps (stage 10: "
                     "decided_kept_fraction, also under its dense plan, which then recomputes every pair; stages "
                     "07 to 09: kept_fraction, stage 07's of its tiles), drop_eps_log2 the log2 of the eps it "
                     "dropped below (null: nothing dropped), dense_plan 1 where stage 10 ran its dense plan, 0 its "
                     "sparse one (null for the other stages); all null for the torch and cce runs")


# ---------------------------------------------------------------------------
# Command line (no torch).
# ---------------------------------------------------------------------------


def parse_seeds(text):
    """'1234,5678' -> [1234, 5678]: at least one, non-negative, distinct."""
    items = [x.strip() for x in text.split(",")]
    if not items or any(not x for x in items):
        raise argparse.ArgumentTypeError("expected comma-separated integers >= 0, got '%s'" % text)
    try:
        seeds = [int(x) for x in items]
    except ValueError:
        raise argparse.ArgumentTypeError("expected comma-separated integers >= 0, got '%s'" % text)
    if any(s < 0 for s in seeds):
        raise argparse.ArgumentTypeError("expected comma-separated integers >= 0, got '%s'" % text)
    if len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError("the seeds must be distinct, got '%s'" % text)
    return seeds


def parse_runs(text, n_seeds):
    """'torch:1,final' -> [("torch", 1), ("final", 1)]: KIND or KIND:K, K a 1-based index into the seeds.
    Raises ValueError with a one-line message for an empty list, an unknown kind, a bad or out-of-range
    index, or a run named twice."""
    items = [x.strip() for x in text.split(",")]
    if not text.strip() or any(not x for x in items):
        raise ValueError("--runs: expected KIND[:K],... (KIND one of %s), got '%s'" % (", ".join(RUN_KINDS), text))
    runs = []
    for item in items:
        kind, _, index = item.partition(":")
        if kind not in RUN_KINDS:
            raise ValueError("--runs: unknown run kind '%s' (one of %s)" % (kind, ", ".join(RUN_KINDS)))
        if not index:
            k = 1
        else:
            try:
                k = int(index)
            except ValueError:
                k = None
            if k is None or k < 1:
                raise ValueError("--runs: '%s': K must be an integer >= 1 (the K-th of --seeds)" % item)
        if k > n_seeds:
            raise ValueError("--runs: '%s' needs seed %d, but --seeds has %d" % (item, k, n_seeds))
        if (kind, k) in runs:
            raise ValueError("--runs: '%s:%d' is named twice" % (kind, k))
        runs.append((kind, k))
    return runs


def run_id(kind, k):
    return "%s:%d" % (kind, k)


def make_parser():
    p = lm_data.OneLineParser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", choices=list(lm_data.DATASETS), default="lm128k",
                   help="lm_data.py's dataset whose model and data are trained (default %(default)s)")
    p.add_argument("--runs", default=DEFAULT_RUNS,
                   help="the runs, KIND[:K],... with KIND one of %s and K the K-th seed of --seeds (default "
                        "%%(default)s)" % ", ".join(RUN_KINDS))
    p.add_argument("--seeds", type=parse_seeds, default=parse_seeds(DEFAULT_SEEDS),
                   help="the model initialization's seeds S1,S2,... (default %s; S1 is lm_data.py's --seed)"
                        % DEFAULT_SEEDS)
    p.add_argument("--data-seed", type=lm_data.nonnegative_int, default=1234,
                   help="lm_data.py's --seed for the data: the tokenizer's seed, and the batches from a generator "
                        "seeded with it + 1; the same for every run (default %(default)s)")
    p.add_argument("--steps", type=lm_data.positive_int,
                   help="training steps of every run (default: %s)"
                        % ", ".join("%d for %s" % (v, k) for k, v in DEFAULT_STEPS.items()))
    p.add_argument("--eval-every", type=lm_data.positive_int,
                   help="steps between held-out evaluations (default: steps/10); also at step 0 and the last step")
    p.add_argument("--eval-tokens", type=lm_data.positive_int, default=131072,
                   help="held-out tokens per evaluation (default %(default)s, lm_data.py's)")
    p.add_argument("--timing-skip", type=lm_data.nonnegative_int, default=10,
                   help="first steps left out of the summary's mean times (default %(default)s)")
    p.add_argument("--batch", type=lm_data.positive_int, default=32, help="sequences per step (default %(default)s)")
    p.add_argument("--seq", type=lm_data.positive_int, default=512, help="tokens per sequence (default %(default)s)")
    p.add_argument("--lr", type=lm_data.positive_float, help="peak learning rate (default: lm_data.py's for the "
                   "dataset)")
    p.add_argument("--warmup", type=lm_data.nonnegative_int, default=100,
                   help="warm-up steps, at most a fifth of the steps (default %(default)s)")
    p.add_argument("--layers", type=lm_data.positive_int, help="transformer layers (default: lm_data.py's)")
    p.add_argument("--width", type=lm_data.positive_int, help="model width D (default: lm_data.py's)")
    p.add_argument("--heads", type=lm_data.positive_int, help="attention heads (default: lm_data.py's)")
    p.add_argument("--vocab", type=lm_data.positive_int, help="vocabulary size asked (default: lm_data.py's)")
    p.add_argument("--corpus-mb", type=lm_data.positive_float, default=64.0,
                   help="megabytes of text to read (default %(default)s, lm_data.py's)")
    p.add_argument("--max-file-kb", type=lm_data.positive_int, default=1024,
                   help="skip files larger than this (default %(default)s)")
    p.add_argument("--heldout-percent", type=lm_data.positive_float, default=3.0,
                   help="share of the files held out, in percent, at most 50 (default %(default)s)")
    p.add_argument("--tokenizer-dir",
                   help="where the tokenizer is reused from or trained into (default: lm_data.py's %s/<dataset>)"
                        % lm_data.DEFAULT_OUT)
    p.add_argument("--cce-python", default=os.path.join(ROOT, "build", "python"),
                   help="the directory holding the cce_stages package (default: build/python of the repository)")
    p.add_argument("--out", help="the JSON written (default docs/train_compare_<dataset>.json)")
    p.add_argument("--figure", help="the figure written ('' for none; default docs/figures/"
                                    "train_compare_<dataset>.png)")
    p.add_argument("--merge", action="store_true",
                   help="keep the runs of an existing --out made with the same settings; replace those run again")
    p.add_argument("--plot-only", metavar="JSON",
                   help="train nothing: print the summary of JSON and draw its figure (--figure)")
    lm_data.add_machine_options(p, "torch runs at tiny sizes only")
    return p


def parse_args(argv=None):
    """Parses and validates; every problem is a one-line error and exit status 2."""
    parser = make_parser()
    args = parser.parse_args(argv)
    if args.plot_only is not None:
        return args
    try:
        args.run_list = parse_runs(args.runs, len(args.seeds))
    except ValueError as exc:
        parser.error(str(exc))
    if args.heldout_percent > 50:
        parser.error("--heldout-percent must be at most 50, got %g" % args.heldout_percent)
    if args.seq < 2:
        parser.error("--seq must be at least 2, got %d" % args.seq)
    if args.vocab is not None and args.vocab < lm_data.MIN_VOCAB:
        parser.error("--vocab must be at least %d (256 byte pieces and specials), got %d"
                     % (lm_data.MIN_VOCAB, args.vocab))
    cfg = model_config(args)
    if cfg["width"] % cfg["heads"] != 0:
        parser.error("%s: --width %d is not a multiple of --heads %d" % (args.dataset, cfg["width"], cfg["heads"]))
    needing = [run_id(k, i) for k, i in args.run_list if RUN_KINDS[k]["needs"] == "cce_stages"]
    if needing and not os.path.isdir(os.path.join(args.cce_python, "cce_stages")):
        parser.error("--cce-python %s holds no cce_stages package (build the repository: cmake --build build), "
                     "which the runs %s need; leave them out with --runs" % (args.cce_python, ",".join(needing)))
    out = output_path(args)
    if os.path.isdir(out):
        parser.error("--out %s is a directory" % out)
    if args.merge and not os.path.isfile(out):
        parser.error("--merge: %s does not exist (nothing to merge with)" % out)
    return args


def model_config(args):
    """The model and training settings: lm_data.py's defaults for the dataset, overridden by the flags."""
    base = lm_data.DATASETS[args.dataset]
    cfg = {key: getattr(args, key) if getattr(args, key, None) is not None else base[key]
           for key in ("layers", "width", "heads", "lr")}
    cfg["vocab"] = args.vocab if args.vocab is not None else base["vocab"]
    cfg["steps"] = args.steps if args.steps is not None else DEFAULT_STEPS[args.dataset]
    cfg["warmup"] = min(args.warmup, cfg["steps"] // 5)  # as lm_data.py: a short run still reaches the peak
    cfg["eval_every"] = args.eval_every if args.eval_every is not None else max(1, cfg["steps"] // 10)
    cfg["tied"] = True
    return cfg


def settings(args):
    """What defines the experiment (SETTING_KEYS), from the arguments."""
    cfg = model_config(args)
    return {"dataset": args.dataset, "steps": cfg["steps"], "batch": args.batch, "seq": args.seq, "lr": cfg["lr"],
            "warmup": cfg["warmup"], "layers": cfg["layers"], "width": cfg["width"], "heads": cfg["heads"],
            "vocab_asked": cfg["vocab"], "tied": cfg["tied"], "data_seed": args.data_seed, "seeds": list(args.seeds),
            "eval_every": cfg["eval_every"], "eval_tokens": args.eval_tokens, "corpus_mb": args.corpus_mb,
            "max_file_kb": args.max_file_kb, "heldout_percent": args.heldout_percent,
            "timing_skip": args.timing_skip}


def output_path(args):
    return args.out if args.out else os.path.join(ROOT, "docs", "train_compare_%s.json" % args.dataset)


def figure_path(args, dataset):
    if args.figure is not None:
        return args.figure
    return os.path.join(ROOT, "docs", "figures", "train_compare_%s.png" % dataset)


def eval_steps(steps, every):
    """The steps after which the held-out loss is computed: 0 (untrained), every `every` steps, and the last."""
    out = list(range(0, steps + 1, every))
    if out[-1] != steps:
        out.append(steps)
    return out


def estimate_seconds(args, runs):
    """A rough wall-clock estimate of the whole command on one H100: (total, parts)."""
    cfg = model_config(args)
    base = lm_data.DATASETS[args.dataset]
    flops = lm_data.train_flops(cfg, cfg["vocab"], args.batch, args.seq, 1)
    base_flops = lm_data.train_flops(base, base["vocab"], 32, 512, 1)
    step = MEASURED_STEP_SECONDS[args.dataset] * flops / base_flops
    params = lm_data.param_counts(cfg["vocab"], cfg["layers"], cfg["width"], args.seq, True)[0]
    eval_batches = math.ceil(math.ceil(args.eval_tokens / args.seq) / args.batch)
    evals = len(eval_steps(cfg["steps"], cfg["eval_every"]))
    parts = {
        "setup": 20.0 + 4.0 + 0.15 * args.corpus_mb + 5.0 + 0.3 * args.corpus_mb * (1.0 + cfg["vocab"] / 128000.0),
        "training": sum(cfg["steps"] * step * KIND_STEP_FACTOR[k] for k, _ in runs),
        "first_calls": sum(KIND_FIRST_CALL_SECONDS.get(k, 0.0) for k, _ in runs),
        "model_init": len(runs) * (2.0 + 1e-8 * params),
        "evaluation": len(runs) * evals * eval_batches * step / 3.0,
    }
    return sum(parts.values()), parts


# ---------------------------------------------------------------------------
# The JSON document (no torch).
# ---------------------------------------------------------------------------


class DocumentError(Exception):
    """A JSON file that is not train_compare.py's: one line, exit status 2."""


def new_run(kind, k, seed, steps):
    """A run's record before it starts."""
    return {"id": run_id(kind, k), "kind": kind, "seed_index": k, "seed": seed,
            "loss_function": RUN_KINDS[kind]["loss"], "status": "running", "reason": None,
            "steps_planned": steps, "steps_done": 0, "seconds": None, "peak_memory_MB": None,
            "series": {key: [] for key in SERIES_KEYS}, "eval": {key: [] for key in EVAL_KEYS}, "warnings": []}


def validate_document(doc):
    """Raises DocumentError (one line) unless doc has the schema written here."""
    if not isinstance(doc, dict):
        raise DocumentError("the top level is not an object")
    if doc.get("schema") != SCHEMA:
        raise DocumentError("schema is %r, expected %d" % (doc.get("schema"), SCHEMA))
    context = doc.get("context")
    if not isinstance(context, dict) or not isinstance(context.get("settings"), dict):
        raise DocumentError("context.settings is missing")
    missing = [k for k in SETTING_KEYS if k not in context["settings"]]
    if missing:
        raise DocumentError("context.settings lacks %s" % ", ".join(missing))
    runs = doc.get("runs")
    if not isinstance(runs, list):
        raise DocumentError("runs is not a list")
    seen = set()
    for i, run in enumerate(runs):
        where = "runs[%d]" % i
        if not isinstance(run, dict):
            raise DocumentError("%s is not an object" % where)
        for key in ("id", "kind", "seed", "status", "steps_planned", "steps_done", "series", "eval"):
            if key not in run:
                raise DocumentError("%s lacks %s" % (where, key))
        if run["kind"] not in RUN_KINDS:
            raise DocumentError("%s: unknown kind %r" % (where, run["kind"]))
        if run["status"] not in STATUSES:
            raise DocumentError("%s: unknown status %r" % (where, run["status"]))
        if run["id"] in seen:
            raise DocumentError("%s: id %s appears twice" % (where, run["id"]))
        seen.add(run["id"])
        for part, keys in (("series", SERIES_KEYS), ("eval", EVAL_KEYS)):
            block = run[part]
            if not isinstance(block, dict) or any(not isinstance(block.get(k), list) for k in keys):
                raise DocumentError("%s.%s must hold the lists %s" % (where, part, ", ".join(keys)))
            lengths = {len(block[k]) for k in keys}
            if len(lengths) != 1:
                raise DocumentError("%s.%s: the lists %s differ in length" % (where, part, ", ".join(keys)))
    return doc


def load_document(path):
    try:
        with open(path) as f:
            doc = json.load(f)
    except OSError as exc:
        raise DocumentError("cannot read %s (%s)" % (path, exc.strerror or exc))
    except ValueError as exc:
        raise DocumentError("%s is not JSON (%s)" % (path, str(exc).splitlines()[0]))
    try:
        return validate_document(doc)
    except DocumentError as exc:
        raise DocumentError("%s: %s" % (path, exc))


def write_json(path, doc):
    """Atomically; non-finite numbers are written as null (strict JSON)."""
    def clean(x):
        if isinstance(x, float) and not math.isfinite(x):
            return None
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [clean(v) for v in x]
        return x
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    with open(path + ".tmp", "w") as f:
        f.write(dumps(clean(doc)))
        f.write("\n")
    os.replace(path + ".tmp", path)


def dumps(obj, level=0):
    """JSON indented by object, with every list of plain values on one line (the per-step series stay short)."""
    pad, inner = " " * level, " " * (level + 1)
    if isinstance(obj, dict):
        if not obj:
            return "{}"
        items = ["%s%s: %s" % (inner, json.dumps(str(k)), dumps(v, level + 1)) for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(obj, (list, tuple)):
        if all(not isinstance(v, (dict, list, tuple)) for v in obj):
            return json.dumps(list(obj), allow_nan=False)
        return "[\n" + ",\n".join(inner + dumps(v, level + 1) for v in obj) + "\n" + pad + "]"
    return json.dumps(obj, allow_nan=False)


def merge_mismatch(old_doc, new_settings):
    """Why a file cannot be merged with a run of new_settings (one line), or None."""
    old = old_doc["context"]["settings"]
    for key in SETTING_KEYS:
        if old.get(key) != new_settings.get(key):
            return "it was made with %s = %s, this command has %s" % (key, json.dumps(old.get(key)),
                                                                    json.dumps(new_settings.get(key)))
    return None


def merge_runs(old_runs, new_runs):
    """The old runs in their order, each replaced by a new run of the same id; the other new runs after them."""
    by_id = {r["id"]: r for r in new_runs}
    out = [by_id.pop(r["id"], r) for r in old_runs]
    return out + [r for r in new_runs if r["id"] in by_id]


# ---------------------------------------------------------------------------
# The summary (no torch).
# ---------------------------------------------------------------------------


def final_heldout(run):
    """The held-out loss after the run's last step, or None (not completed, or not measured there)."""
    ev = run["eval"]
    if run["status"] != "ok" or not ev["step"] or ev["step"][-1] != run["steps_planned"]:
        return None
    return ev["heldout_loss"][-1]


def mean_after(values, skip):
    """Mean of values[skip:] (of all when there are no more than skip), None values left out; None if empty."""
    vals = [v for v in (values[skip:] if len(values) > skip else values) if v is not None]
    return statistics.fmean(vals) if vals else None


def summarize(doc):
    """The summary of a document: rows per run, the torch runs' mean and spread, the band, the checks (each
    {"result": PASS | FAIL | SKIP, "what", "detail"}: a run completed, or was skipped; a FAIL sets the exit
    status) and the band's measurements (each {"result": MEASURED | NOT MEASURED, "what", "detail"})."""
    skip = doc["context"]["settings"]["timing_skip"]
    rows, checks = [], []
    for run in doc["runs"]:
        rows.append({"id": run["id"], "kind": run["kind"], "seed": run["seed"], "status": run["status"],
                     "steps_done": run["steps_done"], "steps_planned": run["steps_planned"],
                     "final_heldout_loss": final_heldout(run),
                     "mean_loss_ms": mean_after(run["series"]["loss_ms"], skip),
                     "mean_step_ms": mean_after(run["series"]["step_ms"], skip)})
        what = "run %s completed %d/%d steps" % (run["id"], run["steps_done"], run["steps_planned"])
        if run["status"] == "ok" and run["steps_done"] == run["steps_planned"] and final_heldout(run) is not None:
            checks.append({"result": "PASS", "what": what, "detail": ""})
        elif run["status"] == "skipped":
            checks.append({"result": "SKIP", "what": "run %s" % run["id"], "detail": run.get("reason") or ""})
        else:
            why = run.get("reason") or ("still running when the file was written (cut short?)"
                                        if run["status"] == "running" else "no held-out loss at the last step")
            checks.append({"result": "FAIL", "what": what, "detail": why})
    torch_losses = [r["final_heldout_loss"] for r in rows if r["kind"] == "torch" and
                    r["final_heldout_loss"] is not None]
    mean = statistics.fmean(torch_losses) if torch_losses else None
    spread = max(torch_losses) - min(torch_losses) if len(torch_losses) >= 2 else None
    band = max(BAND_FACTOR * spread, BAND_FLOOR) if spread is not None else None
    measured = []
    for row in rows:
        row["delta_vs_torch_mean"] = (row["final_heldout_loss"] - mean
                                      if mean is not None and row["final_heldout_loss"] is not None else None)
        row["within_band"] = None
        if row["kind"] == "torch":
            continue
        what = "%s held-out loss against the torch seeds' mean" % row["id"]
        if band is None:
            measured.append({"result": "NOT MEASURED", "what": what,
                             "detail": "needs two completed torch runs (have %d)" % len(torch_losses)})
        elif row["final_heldout_loss"] is None:
            measured.append({"result": "NOT MEASURED", "what": what, "detail": "%s did not complete" % row["id"]})
        else:
            delta = row["delta_vs_torch_mean"]
            inside = abs(delta) <= band
            row["within_band"] = inside
            measured.append({"result": "MEASURED", "what": what,
                             "detail": "%.4f vs %.4f: %+.4f, %s the band %.4f = max(%g x spread %.4f, %g)"
                                       % (row["final_heldout_loss"], mean, delta,
                                          "inside" if inside else "outside (%s)" % ("below" if delta < 0 else
                                                                                    "above"),
                                          band, BAND_FACTOR, spread, BAND_FLOOR)})
    failed = [c["what"] for c in checks if c["result"] == "FAIL"]
    return {"rows": rows, "torch_mean": mean, "torch_spread": spread, "torch_runs_completed": len(torch_losses),
            "band": band, "band_rule": "max(%g x the torch seeds' spread (max - min), %g nats)"
                                       % (BAND_FACTOR, BAND_FLOOR),
            "checks": checks, "band_measured": measured, "failed_runs": failed,
            "exit_status": EXIT_RUN_FAILED if failed else EXIT_OK}


def fmt(x, spec):
    return "-" if x is None else format(x, spec)


def format_summary(summary, settings_=None):
    lines = []
    if settings_:
        lines.append("train_compare: %s, %d steps of %d x %d tokens, seeds %s, held-out loss over %d tokens"
                     % (settings_["dataset"], settings_["steps"], settings_["batch"], settings_["seq"],
                        ",".join(map(str, settings_["seeds"])), settings_["eval_tokens"]))
    header = ("run", "seed", "status", "steps", "held-out", "vs torch", "in band", "loss ms", "step ms")
    table = [header]
    for r in summary["rows"]:
        table.append((r["id"], str(r["seed"]), r["status"], "%d/%d" % (r["steps_done"], r["steps_planned"]),
                      fmt(r["final_heldout_loss"], ".4f"), fmt(r["delta_vs_torch_mean"], "+.4f"),
                      "-" if r["within_band"] is None else ("yes" if r["within_band"] else "no"),
                      fmt(r["mean_loss_ms"], ".2f"), fmt(r["mean_step_ms"], ".2f")))
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for j, row in enumerate(table):
        lines.append("  ".join(c.ljust(w) if i < 3 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))))
        if j == 0:
            lines.append("  ".join("-" * w for w in widths))
    lines.append("torch seeds: %d completed, mean %s, spread (max - min) %s; band %s = %s"
                 % (summary["torch_runs_completed"], fmt(summary["torch_mean"], ".4f"),
                    fmt(summary["torch_spread"], ".4f"), fmt(summary["band"], ".4f"), summary["band_rule"]))
    for c in summary["checks"] + summary["band_measured"]:
        lines.append("%s  %s%s" % (c["result"], c["what"], ": " + c["detail"] if c["detail"] else ""))
    lines.append("%s: %s" % ("FAIL" if summary["failed_runs"] else "PASS",
                             "%d run(s) did not complete" % len(summary["failed_runs"]) if summary["failed_runs"]
                             else "every run that was not skipped completed"))
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# The figure (matplotlib only).
# ---------------------------------------------------------------------------

KIND_COLORS = {"torch": "black", "final": "tab:blue", "final_no_correction": "tab:orange", "stage07": "tab:green",
               "cce": "tab:red", "torch_fp32_logits": "tab:gray"}
SEED_STYLES = ("-", "--", ":", "-.")


def plot_figure(doc, path):
    """Draws the document's figure into path (PNG): held-out loss against step for all runs; the held-out loss
    minus the torch runs' mean at the same step, with the band of the summary; loss_ms against step; kept_frac
    against step for the cce_stages runs, the steps of the dense plan marked."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = summarize(doc)
    s = doc["context"]["settings"]
    runs = [r for r in doc["runs"] if r["status"] != "skipped"]
    fig, axes = plt.subplots(2, 2, figsize=(14, 9.5))
    (ax_loss, ax_delta), (ax_time, ax_kept) = axes

    torch_evals = [dict(zip(r["eval"]["step"], r["eval"]["heldout_loss"])) for r in runs
                   if r["kind"] == "torch" and r["status"] == "ok"]
    common = sorted(set.intersection(*(set(e) for e in torch_evals))) if torch_evals else []
    torch_mean = {k: statistics.fmean(e[k] for e in torch_evals) for k in common
                  if all(e[k] is not None for e in torch_evals)}
    for r in runs:
        style = dict(color=KIND_COLORS.get(r["kind"], "gray"),
                     linestyle=SEED_STYLES[(r.get("seed_index", 1) - 1) % len(SEED_STYLES)],
                     label="%s (seed %s)%s" % (r["id"], r["seed"], "" if r["status"] == "ok" else ", " + r["status"]))
        pts = [(k, v) for k, v in zip(r["eval"]["step"], r["eval"]["heldout_loss"]) if v is not None]
        if pts:
            ax_loss.plot([p[0] for p in pts], [p[1] for p in pts], marker=".", **style)
        dpts = [(k, v - torch_mean[k]) for k, v in pts if k in torch_mean and k > 0]
        if dpts:
            ax_delta.plot([p[0] for p in dpts], [p[1] for p in dpts], marker=".", **style)
        tpts = [(k, v) for k, v in zip(r["series"]["step"], r["series"]["loss_ms"]) if v is not None]
        if tpts:
            ax_time.plot([p[0] for p in tpts], [p[1] for p in tpts], linewidth=0.8, **style)
        kpts = [(k, v, d) for k, v, d in zip(r["series"]["step"], r["series"]["kept_frac"],
                                             r["series"].get("dense_plan", [None] * len(r["series"]["step"])))
                if v is not None]
        if kpts:
            ax_kept.plot([p[0] for p in kpts], [p[1] for p in kpts], linewidth=0.8, **style)
            dense = [p for p in kpts if p[2] == 1]
            if dense:
                ax_kept.scatter([p[0] for p in dense], [p[1] for p in dense], s=6, color=style["color"], marker="x")
    ax_loss.set_title("held-out loss (%s, %d tokens)" % (s["dataset"], s["eval_tokens"]))
    ax_loss.set_xlabel("step")
    ax_loss.set_ylabel("nats per token")
    finals = [v for r in runs for v in r["eval"]["heldout_loss"][1:] if v is not None]
    if finals:  # the untrained model's loss (step 0) would flatten the rest
        lo, hi = min(finals), max(finals)
        ax_loss.set_ylim(lo - 0.05 * (hi - lo + 1e-9), hi + 0.05 * (hi - lo + 1e-9))
    if ax_loss.get_legend_handles_labels()[0]:
        ax_loss.legend(fontsize=7)
    ax_delta.axhline(0.0, color="black", linewidth=0.6)
    if summary["band"] is not None:
        ax_delta.axhspan(-summary["band"], summary["band"], color="gray", alpha=0.15,
                         label="band at the last step: +-%.4f" % summary["band"])
        ax_delta.legend(fontsize=7)
    ax_delta.set_title("held-out loss minus the torch seeds' mean")
    ax_delta.set_xlabel("step")
    ax_delta.set_ylabel("nats per token")
    ax_time.set_title("the loss part's time (forward + backward of the loss)")
    ax_time.set_xlabel("step")
    ax_time.set_ylabel("ms")
    settled = [v for r in runs for v in r["series"]["loss_ms"][s["timing_skip"]:] if v is not None]
    if settled:  # first calls (allocation, compilation, autotuning) may go off the top
        ax_time.set_ylim(0, 1.3 * max(settled))
    else:
        ax_time.set_ylim(bottom=0)
    ax_kept.set_title("kept fraction of the backward's (token block, tile) pairs (x: dense plan ran)")
    ax_kept.set_xlabel("step")
    ax_kept.set_ylabel("share of pairs")
    ax_kept.axhline(1.0 / 3.0, color="gray", linewidth=0.6, linestyle=":")
    ax_kept.set_ylim(0, 1.02)
    if ax_kept.get_legend_handles_labels()[0]:
        ax_kept.legend(fontsize=7)
    ctx = doc["context"]
    fig.suptitle("train_compare %s: %d steps, %s, commit %s" % (s["dataset"], s["steps"], ctx.get("gpu") or "?",
                                                                ctx.get("commit") or "?"), fontsize=10)
    fig.tight_layout()
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def draw(doc, path, log):
    """plot_figure with a one-line message when matplotlib is missing. Returns the path or None."""
    if not path:
        return None
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:
        log("figure not drawn: matplotlib is not importable (%s); draw it later with --plot-only" % exc)
        return None
    plot_figure(doc, path)
    log("wrote %s" % path)
    return path


def plot_only(args):
    try:
        doc = load_document(args.plot_only)
    except DocumentError as exc:
        print("%s: error: --plot-only: %s" % (PROG, exc), file=sys.stderr)
        return EXIT_BAD_INPUT
    summary = summarize(doc)
    print(format_summary(summary, doc["context"]["settings"]), flush=True)
    path = figure_path(args, doc["context"]["settings"]["dataset"])
    if path:
        try:
            import matplotlib  # noqa: F401
        except ImportError as exc:
            print("%s: error: --plot-only needs matplotlib (%s)" % (PROG, exc), file=sys.stderr)
            return EXIT_BAD_INPUT
        plot_figure(doc, path)
        print("wrote %s" % path)
    return summary["exit_status"]


# ---------------------------------------------------------------------------
# The torch part (torch imported in main() only).
# ---------------------------------------------------------------------------


def stage_statistics(kind, cce_stages):
    """(kept_frac, drop_eps_log2, dense_plan) of the last backward of the run's stage (KEPT_FRAC_AND_EPS), or
    Nones for a run that does not go through cce_stages."""
    spec = RUN_KINDS[kind]
    if spec["needs"] != "cce_stages" or cce_stages is None:
        return None, None, None
    st = cce_stages.last_stats(spec["stage"] or cce_stages.FINAL_STAGE, spec["flags"])
    if st is None:
        return None, None, None
    kept = st.decided_kept_fraction if st.decided_kept_fraction is not None else st.kept_fraction
    dense = None if st.plan is None else int(st.plan == "dense")
    return (None if kept is None else round(kept, 6)), st.drop_eps_log2, dense


def loss_functions(torch, kinds, cce_stages, cce_lce):
    """{kind: f(h, C, targets) -> scalar loss}; h and C bf16 leaves."""
    F = torch.nn.functional
    out = {}
    for kind in kinds:
        spec = RUN_KINDS[kind]
        if kind == "torch":
            out[kind] = lambda h, c, y: F.cross_entropy(F.linear(h, c).float(), y)
        elif kind == "torch_fp32_logits":
            def fp32_logits_loss(h, c, y):
                # On for the step's backward too; the other runs multiply no fp32 matrices (bf16 autocast, stages).
                torch.backends.cuda.matmul.allow_tf32 = True
                return F.cross_entropy(F.linear(h.float(), c.float()), y)
            out[kind] = fp32_logits_loss
        elif spec["needs"] == "cce_stages":
            kw = {"flags": spec["flags"]}
            if spec["stage"]:
                kw["stage"] = spec["stage"]
            out[kind] = (lambda kw: lambda h, c, y: cce_stages.linear_cross_entropy(h, c, y, **kw))(kw)
        elif kind == "cce" and cce_lce is not None:
            out[kind] = lambda h, c, y: cce_lce(h, c, y, impl="cce")
    return out


def probe_stages(torch, kinds, functions, device):
    """Runs each cce_stages loss once on a small problem (forward and backward): a stage name or flags the op
    refuses is found before any training. Returns None or a one-line reason."""
    for kind in kinds:
        if RUN_KINDS[kind]["needs"] != "cce_stages":
            continue
        gen = torch.Generator(device="cpu").manual_seed(0)
        h = torch.randn(256, 64, generator=gen).to(device, torch.bfloat16).requires_grad_()
        c = torch.randn(512, 64, generator=gen).to(device, torch.bfloat16).requires_grad_()
        y = torch.randint(0, 512, (256,), generator=gen).to(device)
        try:
            loss = functions[kind](h, c, y)
            loss.backward()
            torch.cuda.synchronize()
            ok = math.isfinite(float(loss)) and h.grad is not None and c.grad is not None
        except Exception as exc:  # the op's ValueError for refused flags, or a library problem
            return "the run %s's loss does not run on a small problem (%s: %s)" % (
                kind, type(exc).__name__, (str(exc).strip().splitlines() or [""])[0])
        if not ok:
            return "the run %s's loss gives a non-finite loss or no gradient on a small problem" % kind
    return None


class NonFinite(Exception):
    pass


class Trainer:
    """The data and model settings shared by every run, and one run's training."""

    def __init__(self, torch, np, device, args, cfg, vocab, train_ids, held_ids, log):
        self.torch, self.device, self.args, self.cfg, self.vocab, self.log = torch, device, args, cfg, vocab, log
        span = args.seq + 1
        self.span = span
        self.train_dev = torch.from_numpy(train_ids.astype(np.int64)).to(device)
        held_dev = torch.from_numpy(held_ids.astype(np.int64)).to(device)
        self.offsets = torch.arange(span, device=device)
        count = -(-args.eval_tokens // args.seq)
        starts = torch.tensor(lm_data.window_starts(len(held_ids), count, span), device=device)
        self.eval_windows = held_dev[starts[:, None] + self.offsets[None, :]]
        self.eval_tokens = int(self.eval_windows[:, 1:].numel())
        self.starts = lm_data.batch_starts(torch, len(train_ids), span, cfg["steps"], args.batch,
                                           args.data_seed + 1, device)
        self.autocast = torch.autocast(device_type=device.type, dtype=torch.bfloat16)
        self.cuda = device.type == "cuda"

    def build(self, seed):
        torch, cfg = self.torch, self.cfg
        torch.manual_seed(seed)  # as lm_data.py: seeded, then the model initialized on the CPU
        model = lm_data.build_model(torch, self.vocab, cfg["layers"], cfg["width"], cfg["heads"], self.args.seq,
                                    cfg["tied"])
        model.to(self.device)
        return model, lm_data.make_optimizer(torch, model, cfg["lr"], self.device)

    def evaluate(self, model):
        model.eval()
        try:
            loss, _ = lm_data.heldout_mean_loss(self.torch, model, self.eval_windows, self.args.batch, self.vocab,
                                                self.autocast)
        finally:
            model.train()
        return loss

    def stamp(self):
        if self.cuda:
            ev = self.torch.cuda.Event(enable_timing=True)
            ev.record()
            return ev
        return time.perf_counter()

    def elapsed_ms(self, a, b):
        return a.elapsed_time(b) if self.cuda else (b - a) * 1e3

    def train(self, run, loss_fn, cce_stages, save):
        """Trains one run, filling run["series"] and run["eval"]; save() is called after every evaluation."""
        torch, cfg = self.torch, self.cfg
        steps, width = cfg["steps"], cfg["width"]
        evals = set(eval_steps(steps, cfg["eval_every"]))
        if self.cuda:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        model, opt = self.build(run["seed"])
        series, ev = run["series"], run["eval"]
        pending = []  # (step, loss, grad norm, lr, (kept, eps, dense), stamps) not yet read back

        def flush():
            if not pending:
                return
            if self.cuda:
                torch.cuda.synchronize()
            losses = torch.stack([p[1] for p in pending]).float().cpu().tolist()
            norms = torch.stack([p[2] for p in pending]).float().cpu().tolist()
            for (step, _, _, lr, (kept, eps, dense), st), loss, norm in zip(pending, losses, norms):
                series["step"].append(step)
                series["train_loss"].append(round(loss, 6) if math.isfinite(loss) else loss)
                series["loss_ms"].append(round(self.elapsed_ms(st[1], st[2]), 4))
                series["step_ms"].append(round(self.elapsed_ms(st[0], st[3]), 4))
                series["lr"].append(lr)
                series["grad_norm"].append(round(norm, 6) if math.isfinite(norm) else norm)
                series["kept_frac"].append(kept)
                series["drop_eps_log2"].append(eps)
                series["dense_plan"].append(dense)
            pending.clear()
            run["steps_done"] = series["step"][-1]
            bad = [s for s, v in zip(series["step"], series["train_loss"]) if not math.isfinite(v)]
            if bad:
                raise NonFinite("non-finite training loss at step %d" % bad[0])

        def evaluate(step):
            flush()
            loss = self.evaluate(model)
            ev["step"].append(step)
            ev["heldout_loss"].append(loss)
            run["steps_done"] = step
            if not math.isfinite(loss):
                raise NonFinite("non-finite held-out loss after step %d" % step)
            self.log("%s: step %d/%d held-out %.4f, train %s, loss part %s ms, step %s ms"
                     % (run["id"], step, steps, loss, fmt(series["train_loss"][-1] if series["train_loss"] else None,
                                                          ".4f"),
                        fmt(mean_after(series["loss_ms"][-cfg["eval_every"]:], 0), ".2f"),
                        fmt(mean_after(series["step_ms"][-cfg["eval_every"]:], 0), ".2f")))
            save()

        try:
            model.train()
            evaluate(0)
            for step in range(steps):
                lr = lm_data.lr_at(step, steps, cfg["warmup"], cfg["lr"])
                for group in opt.param_groups:
                    group["lr"] = lr
                opt.zero_grad(set_to_none=True)
                t0 = self.stamp()
                window = self.train_dev[self.starts[step][:, None] + self.offsets[None, :]]
                x, y = window[:, :-1], window[:, 1:].reshape(-1)
                with self.autocast:
                    h = model.hidden(x)
                hb = h.to(torch.bfloat16).reshape(-1, width)
                cb = model.classifier().to(torch.bfloat16)
                hl, cl = hb.detach().requires_grad_(), cb.detach().requires_grad_()
                t1 = self.stamp()
                loss = loss_fn(hl, cl, y)
                loss.backward()
                t2 = self.stamp()
                torch.autograd.backward([hb, cb], [hl.grad, cl.grad])
                norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                t3 = self.stamp()
                stats = stage_statistics(run["kind"], cce_stages)  # after t3: stage 07's read waits for the GPU
                pending.append((step + 1, loss.detach(), norm.detach(), lr, stats, (t0, t1, t2, t3)))
                del h, hb, cb, hl, cl, loss
                if step + 1 in evals:
                    evaluate(step + 1)
            flush()
            run["status"] = "ok"
        finally:
            if self.cuda:
                run["peak_memory_MB"] = round(torch.cuda.max_memory_allocated() / 1e6, 1)


def error(message):
    print("%s: error: %s" % (PROG, message), file=sys.stderr)
    return EXIT_BAD_INPUT


def skip(message):
    print("%s: SKIPPED: %s" % (PROG, message), file=sys.stderr)
    return EXIT_SKIPPED


def main(argv=None):
    args = parse_args(argv)
    if args.plot_only is not None:
        return plot_only(args)
    out_path = output_path(args)
    fig_path = figure_path(args, args.dataset)
    cfg = model_config(args)
    current = settings(args)
    old_doc = None
    if args.merge:
        try:
            old_doc = load_document(out_path)
        except DocumentError as exc:
            return error("--merge: %s" % exc)
        why = merge_mismatch(old_doc, current)
        if why:
            return error("--merge: %s cannot be merged: %s" % (out_path, why))

    torch, why = lm_data.import_torch(args.allow_cpu, "runs the torch runs on the CPU, for smoke tests")
    if torch is None:
        return skip(why)
    kinds = [k for k, _ in args.run_list]
    if not torch.cuda.is_available():
        others = [run_id(k, i) for k, i in args.run_list if k != "torch"]
        if others:
            return error("without a CUDA device (--allow-cpu) only the torch runs can run; leave out %s"
                         % ",".join(others))
    cce_stages = None
    if any(RUN_KINDS[k]["needs"] == "cce_stages" for k in kinds):
        if args.cce_python not in sys.path:
            sys.path.insert(0, args.cce_python)
        try:
            import cce_stages
        except Exception as exc:  # ImportError, or a library that does not load
            return error("cannot import cce_stages from --cce-python %s (%s: %s), which the runs %s need"
                         % (args.cce_python, type(exc).__name__, (str(exc).strip().splitlines() or [""])[0],
                            ",".join(run_id(k, i) for k, i in args.run_list
                                     if RUN_KINDS[k]["needs"] == "cce_stages")))
    np, spm, why = lm_data.import_numpy_and_sentencepiece()
    if np is None:
        return skip(why)
    cce_lce, cce_reason = None, None
    if "cce" in kinds:
        try:
            from cut_cross_entropy import linear_cross_entropy as cce_lce
        except Exception as exc:  # ImportError, or a broken install
            absent = isinstance(exc, ImportError) and getattr(exc, "name", None) == "cut_cross_entropy"
            cce_reason = ("cut_cross_entropy not installed" if absent else "cut_cross_entropy failed to import "
                          "(%s: %s)" % (type(exc).__name__, (str(exc).strip().splitlines() or [""])[0]))

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    functions = loss_functions(torch, kinds, cce_stages, cce_lce)
    if cce_stages is not None:
        names = cce_stages.stage_names(with_backward=True)
        for k in kinds:
            stage = RUN_KINDS[k].get("stage")
            if RUN_KINDS[k]["needs"] == "cce_stages" and stage and stage not in names:
                return error("the run %s needs the stage %s, which cce_stages does not have (%s)"
                             % (k, stage, ", ".join(names)))
        why = probe_stages(torch, kinds, functions, device)
        if why:
            return error(why)

    import random
    import warnings
    random.seed(args.data_seed)
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.benchmark = False
    torch.set_num_threads(args.threads)
    log = lm_data.Log("train_compare")
    total, parts = estimate_seconds(args, args.run_list)
    log("%s: %d runs (%s), %d steps each; estimate %.1f min on one H100 (%s)%s"
        % (args.dataset, len(args.run_list), ",".join(run_id(k, i) for k, i in args.run_list), cfg["steps"],
           total / 60, ", ".join("%s %.0f s" % kv for kv in parts.items()),
           "" if device.type == "cuda" else "; this run is on the CPU (--allow-cpu)"))

    corpus = lm_data.gather_corpus(args.corpus_mb * 1e6, args.heldout_percent, args.max_file_kb * 1024, log)
    if not corpus.train or not corpus.heldout:
        return error("the corpus has %d training and %d held-out files: raise --corpus-mb or change "
                     "--heldout-percent" % (len(corpus.train), len(corpus.heldout)))
    tok_dir = args.tokenizer_dir or os.path.join(lm_data.DEFAULT_OUT, args.dataset)
    sp, vocab_info = lm_data.train_tokenizer(spm, corpus, cfg["vocab"], args.threads, args.data_seed, tok_dir, log)
    vocab = sp.get_piece_size()
    train_ids = lm_data.encode_docs(np, sp, corpus.train, args.threads, sp.eos_id())
    held_ids = lm_data.encode_docs(np, sp, corpus.heldout, args.threads, sp.eos_id())
    log("encoded: train %d tokens, held out %d tokens; V = %d" % (len(train_ids), len(held_ids), vocab))
    if len(train_ids) < args.seq + 2 or len(held_ids) < args.seq + 1:
        return error("the corpus gives %d training and %d held-out tokens; --seq %d needs at least %d and %d: "
                     "raise --corpus-mb" % (len(train_ids), len(held_ids), args.seq, args.seq + 2, args.seq + 1))

    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else None
    context = {
        "tool": "bench/train_compare.py",
        "created": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "host_name": socket.gethostname(),
        "command": " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]),
        "commit": lm_data.git_commit(),
        "python": sys.version.split()[0], "torch": torch.__version__, "cuda": torch.version.cuda,
        "numpy": np.__version__, "sentencepiece": getattr(spm, "__version__", "unknown"),
        "cut_cross_entropy": package_version("cut-cross-entropy", "cut_cross_entropy"),
        "cce_stages": ({"path": os.path.abspath(args.cce_python), "final_stage": cce_stages.FINAL_STAGE}
                       if cce_stages is not None else None),
        "device": str(device), "gpu": gpu,
        "gpu_memory_bytes": torch.cuda.get_device_properties(device).total_memory if gpu else None,
        "settings": current,
        "model": {"layers": cfg["layers"], "width": cfg["width"], "heads": cfg["heads"], "vocab": vocab,
                  "classifier": "tied to the token embedding", "builder": "bench/lm_data.py build_model",
                  "params": int(lm_data.param_counts(vocab, cfg["layers"], cfg["width"], args.seq, True)[0])},
        "vocabulary": {"asked": cfg["vocab"], "used": vocab, "reused": vocab_info.get("reused"),
                       "folder": os.path.abspath(tok_dir)},
        "corpus": {"files": corpus.info["files"], "bytes": corpus.info["bytes"], "sha256": corpus.info["sha256"],
                   "train_tokens": int(len(train_ids)), "heldout_tokens": int(len(held_ids))},
        "training": {"optimizer": "AdamW betas (0.9, 0.95), weight decay 0.1 on matrices, clip 1.0 "
                                  "(lm_data.make_optimizer)",
                     "schedule": "linear warm-up, cosine to 0.1 lr (lm_data.lr_at)", "autocast": "bf16",
                     "batches": "lm_data.batch_starts seeded with data_seed + 1: the same for every run",
                     "initialization": "torch.manual_seed(seed), lm_data.build_model on the CPU"},
        "losses": {k: RUN_KINDS[k]["loss"] for k in RUN_KINDS},
        "loss_inputs": "h [B*T, D] after the final norm and the classifier C [V, D], both cast to bf16 and cut "
                       "from the graph; the loss's dL/dh and dL/dC then go through the rest of the backward",
        "timing": "CUDA events (on the CPU: perf_counter): loss_ms around the loss's forward and backward only, "
                  "step_ms around the whole step (batch, forward, backward, clipping, AdamW); no synchronization "
                  "inside a step; the summary's means leave out the first timing_skip steps",
        "heldout": "lm_data.heldout_mean_loss (bf16 autocast logits, PyTorch's cross-entropy on float logits) on "
                   "lm_data.py's held-out windows, for every run, at the steps of eval_steps",
        "kept_frac_and_eps": KEPT_FRAC_AND_EPS,
        "determinism": ["torch.use_deterministic_algorithms(True, warn_only=True)",
                        "CUBLAS_WORKSPACE_CONFIG=%s" % os.environ.get("CUBLAS_WORKSPACE_CONFIG", ""),
                        "torch.backends.cudnn.benchmark = False"],
        "estimate_seconds": {k: round(v, 1) for k, v in parts.items()},
        "invocations": [],
    }
    if old_doc is not None:
        old = old_doc["context"]
        for key, new in (("corpus sha256", context["corpus"]["sha256"]), ("vocabulary size", vocab), ("gpu", gpu)):
            was = {"corpus sha256": old.get("corpus", {}).get("sha256"),
                   "vocabulary size": old.get("vocabulary", {}).get("used"), "gpu": old.get("gpu")}[key]
            if was != new:
                return error("--merge: %s cannot be merged: its %s is %s, this machine's %s"
                             % (out_path, key, was, new))
        context["invocations"] = list(old.get("invocations", []))
    context["invocations"].append({"created": context["created"], "commit": context["commit"],
                                   "command": context["command"],
                                   "runs": [run_id(k, i) for k, i in args.run_list]})

    trainer = Trainer(torch, np, device, args, cfg, vocab, train_ids, held_ids, log)
    context["settings"]["eval_tokens_used"] = trainer.eval_tokens
    new_runs = [new_run(k, i, args.seeds[i - 1], cfg["steps"]) for k, i in args.run_list]
    doc = {"schema": SCHEMA, "context": context, "runs": merge_runs(old_doc["runs"] if old_doc else [], new_runs)}

    def save():
        doc["summary"] = summarize(doc)
        write_json(out_path, doc)

    for (kind, k), run in zip(args.run_list, new_runs):
        if kind == "cce" and cce_lce is None:
            run.update(status="skipped", reason=cce_reason)
            log("%s: skipped: %s" % (run["id"], cce_reason))
            save()
            continue
        log("%s: seed %d, %s" % (run["id"], run["seed"], RUN_KINDS[kind]["loss"]))
        t0 = time.time()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                trainer.train(run, functions[kind], cce_stages, save)
            except Exception as exc:  # the run fails; the others go on
                import traceback
                traceback.print_exc()
                run.update(status="failed", reason="%s: %s" % (type(exc).__name__,
                                                               (str(exc).strip().splitlines() or [""])[0]))
                log("%s: FAILED after %d steps: %s" % (run["id"], run["steps_done"], run["reason"]))
            run["warnings"] = lm_data.warning_texts(caught)
        run["seconds"] = round(time.time() - t0, 1)
        if device.type == "cuda":
            torch.cuda.empty_cache()
        save()
        log("%s: %s in %.1f s" % (run["id"], run["status"], run["seconds"]))

    save()
    log("wrote %s" % out_path)
    summary = doc["summary"]
    print(format_summary(summary, current), flush=True)
    try:
        draw(doc, fig_path, log)
    except Exception as exc:  # the JSON is written; the figure can be drawn later with --plot-only
        log("figure not drawn (%s: %s); draw it with --plot-only %s" % (type(exc).__name__, exc, out_path))
    return summary["exit_status"]


if __name__ == "__main__":
    sys.exit(main())
