#!/usr/bin/env python3
r"""lm_data.py: inputs for the stages and benchmarks from small language models
trained on the spot, on text that ships with the machine (no download).

Two named datasets, made independently (`--only NAME` makes one):

  lm32k   a BPE vocabulary of 32000 entries; a causal transformer of 6 layers,
          width D = 768, 12 heads (GPT-2 small's head shape: D = 768, V ~ 50k)
  lm128k  a BPE vocabulary of 128000 entries, or the largest the corpus
          supports (the name stays; stats.json says the V used); 6 layers,
          D = 2048, 16 heads of 128. D = 2048 with V ~ 128k is the classifier
          shape of Llama 3.2 1B (D = 2048, V = 128256), so the softmax
          statistics of this model sit next to the llama3 benchmark shape
          (D = 4096, V = 128256) with the same vocabulary size.

lm128k also comes at four points of its training, the same held-out rows
exported from the same run (no second training) after 0 (the untrained
model), 30, 100 and 300 of its 800 steps, as lm128k_s0, lm128k_s30,
lm128k_s100 and lm128k_s300: the softmax sharpens as the model learns, and
with it what a filtered backward can drop. `--only lm128k` writes all five.
The rule (snapshot_steps): a planned step k is exported when k <= --steps; a
training shorter than 300 steps (--steps) exports only the steps it reaches
(--steps 120: s0, s30, s100), says so in its log and in stats.json
("snapshots"), and removes the arrays of a snapshot it does not reach left in
OUT by an earlier, longer run. A snapshot is taken before the update of its
step, under torch.no_grad() with the model in eval mode (the RNG states forked
and restored, the model back in train mode): the final model is the one a
run without snapshots trains (up to the variation listed under Determinism).
lr and warm-up follow the full run's schedule: s30 is inside the 100-step
warm-up.

For each dataset it writes into OUT/<name>/ (default OUT = /tmp/cce-lm-data),
and for each snapshot into OUT/<name>_s<k>/:

  e.npy        float32 [N, D]: held-out hidden states after the last norm,
               exactly the matrix the classifier multiplies
  c.npy        float32 [V, D]: the classifier weight
  targets.npy  int64 [N]: the next token of each row (the causal shift)
  stats.json   what was done and measured (below); a copy goes to
               --stats-dir/<name>.json (default docs/lm_data/, committed)
  tokenizer.model, tokenizer.json   the sentencepiece model and the options and
               corpus digest it was trained with; reused by a later run with
               the same options and corpus

E and C are rounded to bf16 (round to nearest even, what the model's bf16
GEMM reads) and stored as float32, the convention of the C++ stages' --save.
N = 8192 rows by default (--n): the positions of ceil(N/seq) windows of seq
tokens spread evenly over the held-out token stream, in window order.
The stages read them with --load OUT/<name>; build/bench/cce_bench reads them
as the shapes lm32k, lm128k and lm128k_s0 ... lm128k_s300 (--lm-data=OUT),
bench/peers.py too (--lm-data).

The corpus. Python files of the standard library (sysconfig's "stdlib", its
site-packages left out), of every site-packages directory (sysconfig's
purelib and platlib, site.getsitepackages()), and the text files of
/usr/share/doc (.gz ones decompressed with Python's gzip; files with a NUL
byte or invalid UTF-8, symbolic links, and files over --max-file-kb are
skipped; identical contents are kept once). Every file gets a key
"<source>:<path relative to its root>" and a SHA-256 of that key: files are
taken in the order of that hash until --corpus-mb megabytes are read (a
uniform sample of what is installed, the same on every machine with the same
files), and a file is held out when its hash says so (--heldout-percent of
them). The tokenizer and the model train on the training files only. The
corpus is whatever the machine has installed, so stats.json records its file
count, bytes and SHA-256: two runs are comparable when those agree.

The vocabulary. sentencepiece BPE (model_type=bpe, byte_fallback=true so that
every byte is encodable, identity normalization, whitespace kept
(remove_extra_whitespaces=false, allow_whitespace_only_pieces=true: code
indentation becomes pieces), split_digits=true, input_sentence_size=0 (every
line, no sampling), num_threads = --threads). When sentencepiece refuses the
size as too large for the corpus ("Vocabulary size too high ... <= M"), the
size steps down to M (or by a quarter when no M is given) and stats.json
records every size tried and the one used.

The model. Pre-norm transformer: learned positions, RMSNorm, causal
torch.nn.functional.scaled_dot_product_attention, a GELU MLP of 4·D, no
biases; the classifier is tied to the token embedding (as in GPT-2, Gemma and
Llama 3.2 1B: C is the embedding matrix; --untied gives it its own weight).
AdamW (betas 0.9, 0.95, weight decay 0.1 on matrices), linear warm-up then
cosine decay to a tenth of --lr, gradient clipping at 1.0, bf16 autocast on
the GPU, windows of --seq + 1 tokens at offsets drawn from a seeded generator.
Progress lines carry the elapsed seconds (flushed; PYTHONUNBUFFERED not needed).

stats.json (and its copy) holds: the model (layers, width, heads, parameters),
the vocabulary (size asked, size used, sentencepiece options), the corpus
(files, bytes, train/held-out split, digest), the training (steps of the run,
"step": the steps the exported model had, batch, seq, lr, seed, seconds of
training up to that step, the last train loss logged up to it, the loss curve
up to it), the model's held-out loss in bf16 autocast (nats per token,
--eval-tokens tokens), a snapshot's "snapshot" (of, step, the steps planned
and exported, the rule) or the final model's "snapshots" (the same list),
and the softmax statistics of the exported rows, computed in float64 on the
GPU from the bf16-rounded E and C, in chunks of rows:
  loss, entropy, max_prob     means over the rows (nats)
  entries_ge_2^-12            mean number of entries per row with p >= 2^-12
  k_mean_prob_below_2^-12     the first rank k at which the mean (over rows)
                              of the k-th largest probability is below 2^-12
  kept_frac                   the fraction of backward tiles a
                              drop-before-recompute backward keeps, for eps =
                              2^-8, 2^-10, 2^-12, 2^-14, 2^-16, with tiles of
                              128 rows x 128 and 128 x 256 vocabulary entries,
                              the vocabulary in descending order of C_j . Ebar
                              (Ebar = the mean of the rows of E; "sorted") and
                              in its natural order ("natural"). A tile is kept
                              when some non-target entry has p_ij >= eps: the
                              target's -1 is handled apart from the tiles.
  kept_frac_stage07_rule      the same with the rule stages/07_filter_sort
                              applies: a tile is kept when some entry has
                              |p_ij - [j = t_i]| >= eps, so a tile holding a
                              target is kept unless p_target > 1 - eps.
Tiles are counted as the stages count them: ceil(N/128) token tiles times
ceil(V/width) vocabulary tiles.

Determinism. Given --seed the run is repeatable as far as the libraries
allow: python, numpy and torch are seeded, the model is initialized on the
CPU, the batch offsets come from a seeded CPU generator,
torch.use_deterministic_algorithms(True, warn_only=True),
CUBLAS_WORKSPACE_CONFIG=:4096:8, cudnn.benchmark off, sentencepiece does not
sample. What can still vary (stats.json lists it, with any non-determinism
warning PyTorch raised during the run): the corpus (the installed files), the
attention backward of the SDPA kernel chosen (some accumulate with atomics),
bf16 autocast GEMM results across GPUs and cuBLAS versions or heuristics, and
the PyTorch and sentencepiece versions.

Time. Each dataset is made in one command that stays well within 10 minutes on
one H100 (the estimate printed up front assumes 200 TFLOP/s; stats.json
records the seconds actually spent):

    python3 bench/lm_data.py --out /tmp/cce-lm-data --only lm32k     # estimate: ~3 min (measured 142 s)
    python3 bench/lm_data.py --out /tmp/cce-lm-data --only lm128k    # estimate: ~6 min (measured 183 s
                                                                     # before the snapshots: ~5 s more each, est.)
    python3 bench/lm_data.py --out /tmp/cce-lm-data                  # both, one after the other

Requirements: PyTorch with a CUDA GPU, numpy, sentencepiece; no internet.
Without PyTorch, numpy or sentencepiece, or without a CUDA device, it prints
one line and exits with 77 (the tests' "skipped"); --allow-cpu runs on the
CPU instead, for smoke tests at tiny sizes, e.g.

    python3 bench/lm_data.py --allow-cpu --out /tmp/lm-smoke --stats-dir /tmp/lm-smoke/stats \
        --corpus-mb 4 --vocab-lm32k 2000 --vocab-lm128k 4000 --layers 2 --width 64 --heads 4 \
        --steps 20 --batch 8 --seq 128 --n 256 --eval-tokens 2048 --check-stats

--check-stats also computes the statistics with the NumPy reference on the
CPU (small sizes only) and exits with 1 when the two disagree. Bad arguments:
a one-line error and exit status 2. The statistics functions at the end of
the pure-Python part need NumPy only (tests/bench/test_lm_data.py runs them).
"""

import argparse
import datetime
import gzip
import hashlib
import json
import math
import os
import re
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
import zlib

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_SKIPPED = 77

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = "/tmp/cce-lm-data"
DEFAULT_STATS_DIR = os.path.join(ROOT, "docs", "lm_data")

# Per-dataset defaults; --vocab-<name>, --layers, --width, --heads, --steps and --lr override them.
# "snapshots": the training steps at which the model is also exported, as <name>_s<step> (snapshot_steps).
DATASETS = {
    "lm32k": {"vocab": 32000, "layers": 6, "width": 768, "heads": 12, "steps": 3000, "lr": 6e-4, "snapshots": ()},
    "lm128k": {"vocab": 128000, "layers": 6, "width": 2048, "heads": 16, "steps": 800, "lr": 3e-4,
               "snapshots": (0, 30, 100, 300)},
}
SNAPSHOT_RULE = ("the model after k optimizer steps of this run (k = 0: untrained), for each planned k with "
                 "k <= steps; a planned k past the last step is not exported")
EPS_EXPONENTS = (8, 10, 12, 14, 16)
TILE_ROWS = 128
TILE_COLS = (128, 256)
COUNT_EPS = 2.0 ** -12
TOPK_LIMIT = 4096           # k_mean_prob_below looks at the first this many ranks
MIN_VOCAB = 512             # 256 byte pieces, the specials and some merges
ASSUMED_TFLOPS = 200.0      # for the time estimate only (H100, bf16, eager PyTorch)
CHECK_STATS_MAX_ELEMENTS = 1 << 26  # N*V above this is too large for --check-stats
DOC_ROOT = "/usr/share/doc"
BINARY_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".ico", ".pdf", ".woff", ".woff2", ".ttf", ".otf", ".zip",
                   ".bz2", ".xz", ".zst", ".jar", ".so", ".a", ".o", ".pyc", ".mo", ".db", ".tar", ".tgz")


# ---------------------------------------------------------------------------
# Pure-Python parts (no torch): command line, corpus, options, estimates.
# ---------------------------------------------------------------------------


class OneLineParser(argparse.ArgumentParser):
    """argparse whose errors are one line on stderr (exit status 2), like the C++ tools'."""

    def error(self, message):
        self.exit(EXIT_BAD_INPUT, "%s: error: %s\n" % (self.prog, message))


def int_at_least(minimum):
    """An argparse type: an integer >= minimum, or a one-line error."""
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum:
            raise argparse.ArgumentTypeError("expected an integer >= %d, got '%s'" % (minimum, text))
        return value
    return parse


positive_int = int_at_least(1)
nonnegative_int = int_at_least(0)


def positive_float(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("expected a number > 0, got '%s'" % text)
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError("expected a number > 0, got '%s'" % text)
    return value


def make_parser():
    p = OneLineParser(prog="lm_data.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=DEFAULT_OUT, help="output directory: OUT/<name>/{e,c,targets}.npy, stats.json "
                   "(default %(default)s)")
    p.add_argument("--only", choices=list(DATASETS), help="make only this dataset (default: both)")
    p.add_argument("--stats-dir", default=DEFAULT_STATS_DIR,
                   help="where the copy <name>.json of stats.json goes (default docs/lm_data in the repository; "
                   "'' for none)")
    p.add_argument("--corpus-mb", type=positive_float, default=64.0,
                   help="megabytes of text to read (default %(default)s)")
    p.add_argument("--max-file-kb", type=positive_int, default=1024,
                   help="skip files larger than this, in KB of text (default %(default)s)")
    p.add_argument("--heldout-percent", type=positive_float, default=3.0,
                   help="share of the files held out, in percent, at most 50 (default %(default)s)")
    for name, cfg in DATASETS.items():
        p.add_argument("--vocab-" + name, type=positive_int, default=cfg["vocab"], dest="vocab_" + name,
                       help="vocabulary size asked for %s (default %%(default)s)" % name)
    p.add_argument("--layers", type=positive_int, help="transformer layers (default: 6 for both)")
    p.add_argument("--width", type=positive_int, help="model width D (default: 768 for lm32k, 2048 for lm128k)")
    p.add_argument("--heads", type=positive_int, help="attention heads (default: 12 for lm32k, 16 for lm128k)")
    p.add_argument("--untied", action="store_true", help="give the classifier its own weight (default: tied to the "
                   "token embedding)")
    p.add_argument("--steps", type=positive_int, help="training steps (default: 3000 for lm32k, 800 for lm128k)")
    p.add_argument("--batch", type=positive_int, default=32, help="sequences per step (default %(default)s)")
    p.add_argument("--seq", type=positive_int, default=512, help="tokens per sequence (default %(default)s)")
    p.add_argument("--lr", type=positive_float, help="peak learning rate (default: 6e-4 for lm32k, 3e-4 for lm128k)")
    p.add_argument("--warmup", type=nonnegative_int, default=100,
                   help="warm-up steps, at most a fifth of the steps (default %(default)s)")
    p.add_argument("--n", type=positive_int, default=8192, help="rows N of the exported E (default %(default)s)")
    p.add_argument("--eval-tokens", type=positive_int, default=131072,
                   help="held-out tokens for the model's held-out loss (default %(default)s)")
    p.add_argument("--seed", type=nonnegative_int, default=1234, help="seed of everything (default %(default)s)")
    add_machine_options(p, "smoke tests with tiny sizes only")
    p.add_argument("--log-every", type=positive_int, help="steps between progress lines (default: steps/20)")
    p.add_argument("--check-stats", action="store_true",
                   help="also compute the statistics with the NumPy reference (small N*V only); exit 1 on a mismatch")
    return p


def parse_args(argv=None):
    """Parses and validates; every problem is a one-line error and exit status 2."""
    parser = make_parser()
    args = parser.parse_args(argv)
    if args.heldout_percent > 50:
        parser.error("--heldout-percent must be at most 50, got %g" % args.heldout_percent)
    if args.seq < 2:
        parser.error("--seq must be at least 2, got %d" % args.seq)
    for name in DATASETS:
        if getattr(args, "vocab_" + name) < MIN_VOCAB:
            parser.error("--vocab-%s must be at least %d (256 byte pieces and specials), got %d"
                         % (name, MIN_VOCAB, getattr(args, "vocab_" + name)))
    for name in dataset_names(args):
        cfg = model_config(args, name)
        if cfg["width"] % cfg["heads"] != 0:
            parser.error("%s: --width %d is not a multiple of --heads %d" % (name, cfg["width"], cfg["heads"]))
    if args.stats_dir and os.path.exists(args.stats_dir) and not os.path.isdir(args.stats_dir):
        parser.error("--stats-dir %s is not a directory" % args.stats_dir)
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        parser.error("--out %s is not a directory" % args.out)
    return args


def dataset_names(args):
    return [args.only] if args.only else list(DATASETS)


def snapshot_name(name, step):
    """The shape name of a dataset's model after `step` training steps: lm128k, 30 -> lm128k_s30."""
    return "%s_s%d" % (name, step)


def snapshot_steps(planned, steps):
    """The steps at which a training of `steps` steps exports a snapshot: each planned k with 0 <= k <= steps,
    sorted, once (k = steps is the final model; a k past the last step does not exist and is left out)."""
    return sorted({int(k) for k in planned if 0 <= k <= steps})


def training_events(steps, snapshots):
    """The training loop's order: ("snapshot", k) before the update of step k, i.e. the model after k updates
    (k = 0: untrained), ("train", step) for the update of step `step`; a snapshot at k == steps comes after the
    last update. snapshots: from snapshot_steps."""
    wanted = set(snapshots)
    for step in range(steps):
        if step in wanted:
            yield ("snapshot", step)
        yield ("train", step)
    if steps in wanted:
        yield ("snapshot", steps)


def shape_names(name=None):
    """Every shape lm_data.py writes (of one dataset, or of all): the dataset itself, then its snapshots."""
    out = []
    for dataset, cfg in DATASETS.items():
        if name is None or dataset == name:
            out += [dataset] + [snapshot_name(dataset, k) for k in cfg["snapshots"]]
    return out


ARRAY_FILES = ("e.npy", "c.npy", "targets.npy", "stats.json")


def remove_stale_snapshots(out, name, steps):
    """Removes the files of the snapshots OUT/<name>_s<k>/ that this run will not write (a k past its last step):
    left from an earlier, longer run they would pass for this model's. Only the files lm_data.py writes, and the
    folder when it is then empty. Returns the paths removed."""
    removed = []
    for k in steps:
        folder = os.path.join(out, snapshot_name(name, k))
        for fname in ARRAY_FILES:
            path = os.path.join(folder, fname)
            if os.path.isfile(path):
                os.remove(path)
                removed.append(path)
        if os.path.isdir(folder) and not os.listdir(folder):
            os.rmdir(folder)
    return removed


def model_config(args, name):
    """The settings of one dataset: per-dataset defaults, overridden by the flags."""
    cfg = dict(DATASETS[name])
    cfg["vocab"] = getattr(args, "vocab_" + name)
    for key in ("layers", "width", "heads", "steps", "lr"):
        if getattr(args, key) is not None:
            cfg[key] = getattr(args, key)
    cfg["tied"] = not args.untied
    return cfg


def param_counts(vocab, layers, width, seq, tied):
    """(all parameters, those in the transformer blocks) of the model below."""
    block = 12 * width * width + 2 * width  # qkv 3D², proj D², MLP 8D², two RMSNorm gains
    blocks = layers * block
    total = blocks + vocab * width + seq * width + width  # token and position embeddings, final norm
    if not tied:
        total += vocab * width
    return total, blocks


def train_flops(cfg, vocab, batch, seq, steps):
    """GEMM and attention flops of training (forward + backward = 3x forward), for the estimate."""
    _, blocks = param_counts(vocab, cfg["layers"], cfg["width"], seq, True)
    per_token = 6.0 * (blocks + vocab * cfg["width"])  # the blocks' matrices and the classifier
    per_token += 6.0 * cfg["layers"] * seq * cfg["width"]  # causal attention: QK^T and PV, about half of 4·seq·D
    return per_token * batch * seq * steps


def estimate_seconds(args, name):
    """A rough wall-clock estimate of one dataset on one H100: (total, parts)."""
    cfg = model_config(args, name)
    corpus = 4.0 + 0.15 * args.corpus_mb            # listing and reading files
    tokenizer = 5.0 + 0.3 * args.corpus_mb * (1.0 + cfg["vocab"] / 128000.0)  # BPE merges, then encoding
    setup = 20.0                                    # importing torch, CUDA start-up, model initialization
    train = train_flops(cfg, cfg["vocab"], args.batch, args.seq, cfg["steps"]) / (ASSUMED_TFLOPS * 1e12)
    export = 10.0 + 20.0 * args.n * cfg["vocab"] / (8192 * 128000)  # held-out passes, float64 statistics, files
    # Each snapshot: a held-out pass, the statistics and the files (lm128k's c.npy is 1 GB) during the training.
    snaps = len(snapshot_steps(cfg["snapshots"], cfg["steps"]))
    snapshots = snaps * (2.0 + 4.0 * args.n * cfg["vocab"] / (8192 * 128000))
    parts = {"corpus": corpus, "tokenizer": tokenizer, "setup": setup, "training": train, "export_and_stats": export,
             "snapshots": snapshots}
    return sum(parts.values()), parts


def file_key_digest(key):
    return hashlib.sha256(key.encode("utf-8", "surrogateescape")).digest()


def is_heldout(digest, percent):
    """Whether a file is held out: bytes 8..16 of its key's SHA-256 as a fraction below percent/100."""
    return int.from_bytes(digest[8:16], "big") < percent / 100.0 * 2.0 ** 64


def site_package_dirs():
    dirs = []
    paths = sysconfig.get_paths()
    candidates = [paths.get("purelib"), paths.get("platlib")]
    try:
        import site
        candidates += list(site.getsitepackages())
    except Exception:  # some embedded or virtualenv Pythons lack it
        pass
    for d in candidates:
        if d and os.path.isdir(d):
            real = os.path.realpath(d)
            if real not in dirs:
                dirs.append(real)
    return sorted(dirs)


def corpus_sources():
    """[(label, root, kind)]: the standard library, the site-packages directories, /usr/share/doc."""
    sources = [("stdlib", os.path.realpath(sysconfig.get_paths()["stdlib"]), "py")]
    sources += [("site-packages", d, "py") for d in site_package_dirs()]
    if os.path.isdir(DOC_ROOT):
        sources.append(("doc", DOC_ROOT, "doc"))
    return sources


def list_candidates(sources):
    """[(key, path, kind)] of every candidate file, sorted by key. Skips symbolic links and __pycache__; the
    standard library walk leaves out the site-packages directories (they are walked as their own source)."""
    site_dirs = {root for label, root, _ in sources if label == "site-packages"}
    out = []
    for label, root, kind in sources:
        for folder, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not (
                label == "stdlib" and (d in ("site-packages", "dist-packages")
                                       or os.path.realpath(os.path.join(folder, d)) in site_dirs)))
            for f in sorted(files):
                path = os.path.join(folder, f)
                if os.path.islink(path):
                    continue
                if kind == "py" and not f.endswith(".py"):
                    continue
                if kind == "doc" and f.lower().endswith(BINARY_SUFFIXES):
                    continue
                out.append(("%s:%s" % (label, os.path.relpath(path, root)), path, kind))
    out.sort(key=lambda item: item[0])
    return out


def read_text(path, limit):
    """The file's text, or (None, why): too large (over limit bytes), not UTF-8, NUL bytes, unreadable."""
    try:
        if path.endswith(".gz"):
            with gzip.open(path, "rb") as f:
                data = f.read(limit + 1)
        else:
            if os.path.getsize(path) > limit:
                return None, "too_large"
            with open(path, "rb") as f:
                data = f.read(limit + 1)
    except (OSError, EOFError, zlib.error):  # gzip's BadGzipFile is an OSError
        return None, "unreadable"
    if len(data) > limit:
        return None, "too_large"
    if b"\x00" in data:
        return None, "binary"
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError:
        return None, "not_utf8"


class Corpus:
    def __init__(self):
        self.train, self.heldout = [], []  # lists of texts
        self.info = {}


def gather_corpus(cap_bytes, heldout_percent, max_file_bytes, log=print):
    """Reads files in the order of their keys' SHA-256 until cap_bytes of text; splits them by the same hash."""
    sources = corpus_sources()
    candidates = list_candidates(sources)
    ordered = sorted(((file_key_digest(key), key, path) for key, path, _ in candidates), key=lambda x: (x[0], x[1]))
    corpus = Corpus()
    seen_content = set()
    skipped = {"too_large": 0, "not_utf8": 0, "binary": 0, "unreadable": 0, "duplicate": 0, "empty": 0}
    by_source = {}
    total = 0
    digest = hashlib.sha256()
    counts = {"train": [0, 0], "heldout": [0, 0]}  # files, bytes
    for key_digest, key, path in ordered:
        if total >= cap_bytes:
            break
        text, why = read_text(path, max_file_bytes)
        if text is None:
            skipped[why] += 1
            continue
        if not text.strip():
            skipped["empty"] += 1
            continue
        content = hashlib.sha256(text.encode("utf-8")).digest()
        if content in seen_content:
            skipped["duplicate"] += 1
            continue
        seen_content.add(content)
        size = len(text.encode("utf-8"))
        total += size
        part = "heldout" if is_heldout(key_digest, heldout_percent) else "train"
        (corpus.heldout if part == "heldout" else corpus.train).append(text)
        counts[part][0] += 1
        counts[part][1] += size
        label = key.split(":", 1)[0]
        src = by_source.setdefault(label, [0, 0])
        src[0] += 1
        src[1] += size
        digest.update(key.encode("utf-8", "surrogateescape") + b"\x00" + content)
    corpus.info = {
        "sources": [{"label": label, "root": root} for label, root, _ in sources],
        "candidate_files": len(candidates),
        "files": counts["train"][0] + counts["heldout"][0],
        "bytes": total,
        "cap_bytes": int(cap_bytes),
        "max_file_bytes": int(max_file_bytes),
        "by_source": {k: {"files": v[0], "bytes": v[1]} for k, v in sorted(by_source.items())},
        "skipped": skipped,
        "train": {"files": counts["train"][0], "bytes": counts["train"][1]},
        "heldout": {"files": counts["heldout"][0], "bytes": counts["heldout"][1]},
        "selection": "files in the order of SHA-256(key), key = '<source>:<relative path>', until the cap",
        "heldout_rule": "held out when bytes 8..16 of SHA-256(key), as a fraction of 2^64, are below %g%%"
                        % heldout_percent,
        "sha256": digest.hexdigest(),
    }
    log("corpus: %d files, %.1f MB (train %d files %.1f MB, held out %d files %.1f MB) from %d candidates; "
        "skipped %s" % (corpus.info["files"], total / 1e6, counts["train"][0], counts["train"][1] / 1e6,
                        counts["heldout"][0], counts["heldout"][1] / 1e6, len(candidates),
                        ", ".join("%s %d" % kv for kv in skipped.items() if kv[1]) or "none"))
    return corpus


def sentencepiece_options(vocab, threads):
    """The trainer's options, all explicit (recorded in stats.json)."""
    return {
        "model_type": "bpe",
        "vocab_size": int(vocab),
        "byte_fallback": True,
        "character_coverage": 0.9999,
        "normalization_rule_name": "identity",
        "remove_extra_whitespaces": False,
        "allow_whitespace_only_pieces": True,
        "split_digits": True,
        "split_by_whitespace": True,
        "max_sentencepiece_length": 16,
        "max_sentence_length": 4192,
        "input_sentence_size": 0,
        "shuffle_input_sentence": False,
        "hard_vocab_limit": True,
        "unk_id": 0,
        "bos_id": 1,
        "eos_id": 2,
        "pad_id": -1,
        "num_threads": int(threads),
        "minloglevel": 2,  # errors only: its warnings name every piece with a tab
    }


_TOO_HIGH = re.compile(r"Vocabulary size too high \((\d+)\)\. Please set it to a value <= (\d+)")


def smaller_vocab(message, asked):
    """The size to try after sentencepiece refused `asked`: the one it names, else three quarters."""
    m = _TOO_HIGH.search(message)
    if m:
        return int(m.group(2))
    if "vocab" in message.lower():
        return int(asked * 0.75)
    return None


# ---------------------------------------------------------------------------
# Softmax statistics, NumPy reference (small sizes; tests/bench/test_lm_data.py).
# The GPU version in softmax_stats_torch computes the same in chunks of rows.
# ---------------------------------------------------------------------------


def eps_label(exponent):
    return "2^-%d" % exponent


def tile_label(rows, cols):
    return "%dx%d" % (rows, cols)


def vocab_order_numpy(e, c, targets):
    """The vocabulary sorted by descending C_j . Ebar, Ebar the mean of the valid rows of E (ties: lower j first)."""
    import numpy as np
    valid = np.asarray(targets) >= 0
    ebar = np.asarray(e, dtype=np.float64)[valid].mean(axis=0)
    score = np.asarray(c, dtype=np.float64) @ ebar
    return np.argsort(-score, kind="stable")


def probabilities_numpy(e, c):
    """Softmax of E C^T in float64, and the logits."""
    import numpy as np
    z = np.asarray(e, dtype=np.float64) @ np.asarray(c, dtype=np.float64).T
    m = z.max(axis=1, keepdims=True)
    w = np.exp(z - m)
    s = w.sum(axis=1, keepdims=True)
    return w / s, z, (m + np.log(s))[:, 0]


def filter_matrix_numpy(p, targets, rule):
    """The values a tile is filtered on. rule "separate": p with the target entries zeroed (the target's -1
    is handled apart); rule "stage07": |p - onehot|. Rows of ignored targets (< 0) are zero."""
    import numpy as np
    a = np.array(p, dtype=np.float64)
    t = np.asarray(targets)
    rows = np.nonzero(t >= 0)[0]
    if rule == "separate":
        a[rows, t[rows]] = 0.0
    elif rule == "stage07":
        a[rows, t[rows]] = np.abs(a[rows, t[rows]] - 1.0)
    else:
        raise ValueError("unknown rule %r" % rule)
    a[t < 0] = 0.0
    return a


def kept_tiles_numpy(p, targets, eps, tile_rows, tile_cols, order=None, rule="separate"):
    """(kept, total) tiles of tile_rows tokens x tile_cols vocabulary entries (the vocabulary taken in `order`,
    natural when None); a tile is kept when any of its filter values (filter_matrix_numpy) is >= eps. Partial
    tiles at the edges count as tiles, as in the stages."""
    a = filter_matrix_numpy(p, targets, rule)
    if order is not None:
        a = a[:, order]
    n, v = a.shape
    kept = total = 0
    for r0 in range(0, n, tile_rows):
        for c0 in range(0, v, tile_cols):
            total += 1
            if (a[r0:r0 + tile_rows, c0:c0 + tile_cols] >= eps).any():
                kept += 1
    return kept, total


def k_mean_below(mean_sorted_probs, threshold):
    """First 1-based rank whose mean probability is below threshold, or None if none of those given is."""
    for k, value in enumerate(mean_sorted_probs, start=1):
        if value < threshold:
            return k
    return None


def softmax_stats_numpy(e, c, targets, eps_exponents=EPS_EXPONENTS, tile_rows=TILE_ROWS, tile_cols=TILE_COLS):
    """Every statistic of stats.json's softmax_stats, in float64 on the CPU (see the docstring)."""
    import numpy as np
    t = np.asarray(targets)
    valid = t >= 0
    p, z, lse = probabilities_numpy(e, c)
    pv, zv, lv, tv = p[valid], z[valid], lse[valid], t[valid]
    rows = np.arange(len(tv))
    loss = lv - zv[rows, tv]
    entropy = lv - (pv * zv).sum(axis=1)
    k = min(TOPK_LIMIT, p.shape[1])
    mean_sorted = (-np.sort(-pv, axis=1))[:, :k].mean(axis=0)
    out = {
        "rows": int(valid.sum()),
        "loss": float(loss.mean()),
        "entropy": float(entropy.mean()),
        "max_prob": float(pv.max(axis=1).mean()),
        "entries_ge_2^-12": float((pv >= COUNT_EPS).sum(axis=1).mean()),
        "k_mean_prob_below_2^-12": k_mean_below(mean_sorted, COUNT_EPS),
        "target_prob": float(pv[rows, tv].mean()),
    }
    orders = {"sorted": vocab_order_numpy(e, c, t), "natural": None}
    for key, rule in (("kept_frac", "separate"), ("kept_frac_stage07_rule", "stage07")):
        out[key] = {}
        for order_name, order in orders.items():
            out[key][order_name] = {}
            for cols in tile_cols:
                fracs = {}
                for x in eps_exponents:
                    kept, total = kept_tiles_numpy(p, t, 2.0 ** -x, tile_rows, cols, order, rule)
                    fracs[eps_label(x)] = kept / total
                out[key][order_name][tile_label(tile_rows, cols)] = fracs
    return out


def compare_stats(a, b, rtol=1e-9, path=""):
    """Differences between two statistics dicts: [(path, a, b)]; numbers within rtol agree."""
    diffs = []
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                diffs.append((path + "/" + key, a.get(key), b.get(key)))
            else:
                diffs += compare_stats(a[key], b[key], rtol, path + "/" + key)
    elif isinstance(a, (int, float)) and isinstance(b, (int, float)) and a is not None and b is not None:
        if abs(a - b) > rtol * max(abs(a), abs(b), 1e-300):
            diffs.append((path, a, b))
    elif a != b:
        diffs.append((path, a, b))
    return diffs


# ---------------------------------------------------------------------------
# The torch part (torch imported in main() only).
# ---------------------------------------------------------------------------


def softmax_stats_torch(torch, e, c, targets, chunk_tiles=4, eps_exponents=EPS_EXPONENTS, tile_rows=TILE_ROWS,
                        tile_cols=TILE_COLS):
    """softmax_stats_numpy's statistics in float64 on e's device, chunk_tiles token tiles of rows at a time."""
    f64 = torch.float64
    dev = e.device
    E = e.to(dev, f64)
    C = c.to(dev, f64)
    t = targets.to(dev)
    n, v = E.shape[0], C.shape[0]
    valid = t >= 0
    ebar = E[valid].mean(dim=0)
    order = torch.sort(C @ ebar, descending=True, stable=True).indices
    orders = {"sorted": order, "natural": None}
    k = min(TOPK_LIMIT, v)
    sums = {"loss": 0.0, "entropy": 0.0, "max_prob": 0.0, "count": 0.0, "target_prob": 0.0}
    topk_sum = torch.zeros(k, dtype=f64, device=dev)
    kept = {}  # (key, order, cols, exponent) -> kept tiles
    totals = {cols: 0 for cols in tile_cols}
    chunk = chunk_tiles * tile_rows
    for r0 in range(0, n, chunk):
        r1 = min(n, r0 + chunk)
        z = E[r0:r1] @ C.T
        lse = torch.logsumexp(z, dim=1)
        p = torch.exp(z - lse[:, None])
        tc = t[r0:r1]
        vc = tc >= 0
        rows = torch.nonzero(vc).squeeze(1)
        tv = tc[rows]
        zt = z[rows, tv]
        pt = p[rows, tv]
        sums["loss"] += float((lse[rows] - zt).sum())
        sums["entropy"] += float((lse[rows] - (p[rows] * z[rows]).sum(dim=1)).sum())
        sums["max_prob"] += float(p[rows].max(dim=1).values.sum())
        sums["count"] += float((p[rows] >= COUNT_EPS).sum())
        sums["target_prob"] += float(pt.sum())
        topk_sum += torch.topk(p[rows], k, dim=1).values.sum(dim=0)
        del z
        for key in ("kept_frac", "kept_frac_stage07_rule"):
            a = p.clone()
            a[rows, tv] = 0.0 if key == "kept_frac" else (pt - 1.0).abs()
            a[~vc] = 0.0
            # Per token tile, the largest filter value of each vocabulary entry.
            tile_max = torch.stack([a[s:s + tile_rows].amax(dim=0) for s in range(0, r1 - r0, tile_rows)])
            del a
            for order_name, perm in orders.items():
                m = tile_max if perm is None else tile_max[:, perm]
                for cols in tile_cols:
                    vt = (v + cols - 1) // cols
                    padded = torch.zeros(m.shape[0], vt * cols, dtype=f64, device=dev)
                    padded[:, :v] = m
                    block_max = padded.view(m.shape[0], vt, cols).amax(dim=2)
                    for x in eps_exponents:
                        count = int((block_max >= 2.0 ** -x).sum())
                        kept[(key, order_name, cols, x)] = kept.get((key, order_name, cols, x), 0) + count
            del tile_max
        for cols in tile_cols:
            totals[cols] += ((r1 - r0 + tile_rows - 1) // tile_rows) * ((v + cols - 1) // cols)
        del p
    nvalid = int(valid.sum())
    mean_sorted = (topk_sum / max(nvalid, 1)).cpu().tolist()
    out = {
        "rows": nvalid,
        "loss": sums["loss"] / nvalid,
        "entropy": sums["entropy"] / nvalid,
        "max_prob": sums["max_prob"] / nvalid,
        "entries_ge_2^-12": sums["count"] / nvalid,
        "k_mean_prob_below_2^-12": k_mean_below(mean_sorted, COUNT_EPS),
        "target_prob": sums["target_prob"] / nvalid,
    }
    for key in ("kept_frac", "kept_frac_stage07_rule"):
        out[key] = {}
        for order_name in orders:
            out[key][order_name] = {}
            for cols in tile_cols:
                out[key][order_name][tile_label(tile_rows, cols)] = {
                    eps_label(x): kept[(key, order_name, cols, x)] / totals[cols] for x in eps_exponents}
    return out


def build_model(torch, vocab, layers, width, heads, seq, tied):
    nn = torch.nn
    F = torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1 = nn.RMSNorm(width, eps=1e-5)
            self.qkv = nn.Linear(width, 3 * width, bias=False)
            self.proj = nn.Linear(width, width, bias=False)
            self.norm2 = nn.RMSNorm(width, eps=1e-5)
            self.fc = nn.Linear(width, 4 * width, bias=False)
            self.out = nn.Linear(4 * width, width, bias=False)

        def forward(self, x):
            b, s, d = x.shape
            q, k, v = self.qkv(self.norm1(x)).view(b, s, 3, heads, d // heads).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(a.transpose(1, 2).reshape(b, s, d))
            return x + self.out(F.gelu(self.fc(self.norm2(x)), approximate="tanh"))

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(vocab, width)
            self.pos = nn.Embedding(seq, width)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.norm = nn.RMSNorm(width, eps=1e-5)
            self.head = None if tied else nn.Linear(width, vocab, bias=False)
            for name, prm in self.named_parameters():
                if prm.dim() == 2:
                    std = 0.02 / math.sqrt(2 * layers) if name.endswith(("proj.weight", "out.weight")) else 0.02
                    nn.init.normal_(prm, mean=0.0, std=std)

        def classifier(self):
            """C [V, D]: the matrix the last hidden states multiply."""
            return self.tok.weight if self.head is None else self.head.weight

        def hidden(self, idx):
            """E: the hidden states after the last norm, [B, S, D]."""
            x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))[None]
            for block in self.blocks:
                x = block(x)
            return self.norm(x)

        def forward(self, idx):
            return F.linear(self.hidden(idx), self.classifier())

    return LM()


class Log:
    def __init__(self, name):
        self.name = name
        self.start = time.time()

    def elapsed(self):
        return time.time() - self.start

    def __call__(self, msg):
        print("[%s %7.1f s] %s" % (self.name, self.elapsed(), msg), flush=True)


def train_tokenizer(spm, corpus, vocab, threads, seed, folder, log):
    """Trains (or reuses) OUT/<name>/tokenizer.model. Returns (processor, vocabulary info)."""
    model_path = os.path.join(folder, "tokenizer.model")
    meta_path = os.path.join(folder, "tokenizer.json")
    options = sentencepiece_options(vocab, threads)
    stamp = {"asked": vocab, "options": {k: v for k, v in options.items() if k not in ("num_threads", "minloglevel")},
             "corpus_sha256": corpus.info["sha256"], "seed": seed}
    if os.path.isfile(model_path) and os.path.isfile(meta_path):
        try:
            with open(meta_path) as f:
                meta = json.load(f)
            if meta.get("stamp") == stamp:
                sp = spm.SentencePieceProcessor(model_file=model_path)
                log("tokenizer: reusing %s (V=%d; same options and corpus)" % (model_path, sp.get_piece_size()))
                info = dict(meta["info"])
                info["reused"] = True
                return sp, info
        except (OSError, ValueError, KeyError, RuntimeError):
            pass
    if hasattr(spm, "set_random_generator_seed"):
        spm.set_random_generator_seed(seed)
    t0 = time.time()
    tries = []
    with tempfile.TemporaryDirectory() as tmp:
        text_path = os.path.join(tmp, "train.txt")
        with open(text_path, "w", encoding="utf-8") as f:
            for doc in corpus.train:
                f.write(doc)
                if not doc.endswith("\n"):
                    f.write("\n")
        size = vocab
        while True:
            options["vocab_size"] = size
            log("tokenizer: sentencepiece BPE, vocab_size %d, %d threads" % (size, threads))
            try:
                spm.SentencePieceTrainer.train(input=text_path, model_prefix=os.path.join(tmp, "spm"), **options)
                tries.append({"vocab_size": size, "result": "ok"})
                break
            except RuntimeError as exc:
                message = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
                smaller = smaller_vocab(message, size)
                tries.append({"vocab_size": size, "result": message})
                if smaller is None or smaller < MIN_VOCAB or smaller >= size or len(tries) >= 6:
                    raise
                log("tokenizer: %s -> trying %d" % (message, smaller))
                size = smaller
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(tmp, "spm.model"), "rb") as src, open(model_path + ".tmp", "wb") as dst:
            dst.write(src.read())
        os.replace(model_path + ".tmp", model_path)
    sp = spm.SentencePieceProcessor(model_file=model_path)
    info = {"asked": vocab, "used": sp.get_piece_size(), "tries": tries, "sentencepiece_options": options,
            "seconds": round(time.time() - t0, 2), "reused": False,
            "sentencepiece_version": getattr(spm, "__version__", "unknown")}
    with open(meta_path + ".tmp", "w") as f:
        json.dump({"stamp": stamp, "info": info}, f, indent=2)
    os.replace(meta_path + ".tmp", meta_path)
    log("tokenizer: V=%d (asked %d) in %.1f s" % (info["used"], vocab, info["seconds"]))
    return sp, info


def encode_docs(np, sp, docs, threads, eos):
    """One int32 token stream: every document's tokens followed by eos."""
    parts = []
    for s in range(0, len(docs), 512):
        batch = docs[s:s + 512]
        try:
            ids = sp.encode(batch, num_threads=threads)
        except TypeError:  # a sentencepiece without num_threads
            ids = sp.encode(batch)
        for doc_ids in ids:
            parts.append(np.asarray(doc_ids, dtype=np.int32))
            parts.append(np.asarray([eos], dtype=np.int32))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int32)


def window_starts(length, count, span):
    """count offsets of windows of span tokens spread evenly over a stream of length tokens."""
    last = length - span
    if count == 1:
        return [last // 2]
    return [round(i * last / (count - 1)) for i in range(count)]


def lr_at(step, steps, warmup, peak):
    if warmup > 0 and step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress))))


def make_optimizer(torch, model, lr, device):
    """The training's optimizer: AdamW, betas (0.9, 0.95), weight decay 0.1 on the matrices (parameters of
    2 dimensions) and none on the rest; fused on a CUDA device."""
    decay = [p for p in model.parameters() if p.dim() == 2]
    no_decay = [p for p in model.parameters() if p.dim() != 2]
    adam_args = {"lr": lr, "betas": (0.9, 0.95)}
    if device.type == "cuda":
        adam_args["fused"] = True
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                             **adam_args)


def batch_starts(torch, length, span, steps, batch, seed, device):
    """The training batches: [steps, batch] offsets of windows of span tokens in a stream of length tokens,
    drawn at once from a CPU generator seeded with seed (a host-to-device copy per step would wait for the GPU
    each time); window i of step k is stream[starts[k, i] : starts[k, i] + span]."""
    gen = torch.Generator(device="cpu")
    gen.manual_seed(seed)
    return torch.randint(0, length - span + 1, (steps, batch), generator=gen).to(device)


def heldout_mean_loss(torch, model, windows, batch, vocab, autocast):
    """The model's mean loss (nats per token) on windows [count, seq + 1] of held-out tokens, batch windows at
    a time, as trained (autocast), PyTorch's cross-entropy on the float logits; under torch.no_grad() (the
    caller puts the model in eval mode). Returns (loss, tokens)."""
    F = torch.nn.functional
    eval_loss = eval_count = 0.0
    with torch.no_grad():
        for s in range(0, windows.shape[0], batch):
            w = windows[s:s + batch]
            with autocast:
                logits = model(w[:, :-1])
            eval_loss += float(F.cross_entropy(logits.float().reshape(-1, vocab), w[:, 1:].reshape(-1),
                                               reduction="sum"))
            eval_count += w[:, 1:].numel()
            del logits
    return eval_loss / eval_count, int(eval_count)


def make_dataset(torch, np, spm, args, name, corpus, device, log):
    cfg = model_config(args, name)
    folder = os.path.join(args.out, name)
    os.makedirs(folder, exist_ok=True)
    started = time.time()
    total_est, parts = estimate_seconds(args, name)
    snaps = snapshot_steps(cfg["snapshots"], cfg["steps"])
    if cfg["snapshots"]:
        left_out = [k for k in cfg["snapshots"] if k not in snaps]
        log("snapshots: %s (the model after %s of %d steps)%s"
            % (", ".join(snapshot_name(name, k) for k in snaps) or "none", ", ".join(map(str, snaps)), cfg["steps"],
               "; not %s: the training has only %d steps" % (", ".join(snapshot_name(name, k) for k in left_out),
                                                            cfg["steps"]) if left_out else ""))
        for path in remove_stale_snapshots(args.out, name, left_out):
            log("removed %s (left from an earlier run with more steps)" % path)

    sp, vocab_info = train_tokenizer(spm, corpus, cfg["vocab"], args.threads, args.seed, folder, log)
    vocab = sp.get_piece_size()
    eos = sp.eos_id()
    t0 = time.time()
    train_ids = encode_docs(np, sp, corpus.train, args.threads, eos)
    held_ids = encode_docs(np, sp, corpus.heldout, args.threads, eos)
    log("encoded: train %d tokens, held out %d tokens (%.1f bytes per token) in %.1f s"
        % (len(train_ids), len(held_ids), corpus.info["train"]["bytes"] / max(1, len(train_ids)), time.time() - t0))
    span = args.seq + 1
    export_windows = -(-args.n // args.seq)
    eval_windows = -(-args.eval_tokens // args.seq)
    if len(train_ids) < span + 1:
        raise InputProblem("the training split has %d tokens, fewer than --seq + 2 = %d: raise --corpus-mb"
                           % (len(train_ids), span + 1))
    if len(held_ids) < export_windows * span:
        raise InputProblem("the held-out split has %d tokens; --n %d needs %d windows of --seq + 1 = %d tokens "
                           "(%d): raise --corpus-mb or --heldout-percent, or lower --n"
                           % (len(held_ids), args.n, export_windows, span, export_windows * span))

    torch.manual_seed(args.seed)
    np.random.seed(args.seed % 2 ** 32)
    model = build_model(torch, vocab, cfg["layers"], cfg["width"], cfg["heads"], args.seq, cfg["tied"])
    params = sum(p.numel() for p in model.parameters())
    model.to(device)
    opt = make_optimizer(torch, model, cfg["lr"], device)
    train_dev = torch.from_numpy(train_ids.astype(np.int64)).to(device)
    all_starts = batch_starts(torch, len(train_ids), span, cfg["steps"], args.batch, args.seed + 1, device)
    offsets = torch.arange(span, device=device)
    autocast = torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    F = torch.nn.functional
    steps = cfg["steps"]
    warmup = min(args.warmup, steps // 5)  # a smoke test of 20 steps still reaches the peak
    log_every = args.log_every or max(1, steps // 20)
    log("model: %d layers, D=%d, %d heads, V=%d, %s classifier, %.1fM parameters; %d steps of %d x %d tokens, "
        "lr %g (estimate for the whole dataset: %.1f min on an H100)"
        % (cfg["layers"], cfg["width"], cfg["heads"], vocab, "tied" if cfg["tied"] else "untied", params / 1e6, steps,
           args.batch, args.seq, cfg["lr"], total_est / 60))
    held_dev = torch.from_numpy(held_ids.astype(np.int64)).to(device)

    def windows(count):
        starts = torch.tensor(window_starts(len(held_ids), count, span), device=device)
        return held_dev[starts[:, None] + offsets[None, :]]

    def held_out_pass():
        """The model's held-out loss as trained (bf16 autocast) and the rows to export, under torch.no_grad()
        (the caller puts the model in eval mode). Returns (loss, tokens, E, targets, C) on the device."""
        with torch.no_grad():
            eval_loss, eval_count = heldout_mean_loss(torch, model, windows(eval_windows), args.batch, vocab, autocast)
            export = windows(export_windows)
            rows = []
            for s in range(0, export_windows, args.batch):
                w = export[s:s + args.batch]
                with autocast:
                    h = model.hidden(w[:, :-1])
                rows.append(h.to(torch.bfloat16).float().reshape(-1, cfg["width"]))
            e = torch.cat(rows)[:args.n].contiguous()
            t = export[:, 1:].reshape(-1)[:args.n].contiguous()
            c = model.classifier().detach().to(torch.bfloat16).float().contiguous()
        return eval_loss, eval_count, e, t, c

    def training_info(step, seconds, curve_so_far, last_lr):
        """stats.json's "training": the run's settings, and the model exported: after `step` of its steps."""
        points = [p for p in curve_so_far if p[0] <= step]
        return {
            "steps": steps, "step": step, "batch": args.batch, "seq": args.seq,
            "tokens": steps * args.batch * args.seq, "tokens_at_step": step * args.batch * args.seq,
            "lr": cfg["lr"], "warmup": warmup, "schedule": "linear warm-up, cosine to 0.1 lr",
            "lr_last_step": last_lr,
            "optimizer": "AdamW betas (0.9, 0.95), weight decay 0.1 on matrices, clip 1.0",
            "seed": args.seed, "device": str(device), "autocast": "bf16", "seconds": round(seconds, 1),
            "final_train_loss": points[-1][1] if points else None, "loss_curve": points,
        }

    statuses = []

    def write_export(out_name, e, t, c, heldout_loss, eval_count, training, warned, extra):
        """Statistics, the three arrays and stats.json of one exported model, into OUT/<out_name>/ (and the copy
        <out_name>.json in --stats-dir). extra: fields added to the report ("snapshot" or "snapshots")."""
        out_folder = os.path.join(args.out, out_name)
        os.makedirs(out_folder, exist_ok=True)
        t0 = time.time()
        stats = softmax_stats_torch(torch, e, c, t)
        stats_seconds = time.time() - t0
        sorted_kept = stats["kept_frac"]["sorted"]["128x128"]
        log("%s: softmax statistics (float64, %.1f s): loss %.4f, entropy %.3f, max p %.3f, %.1f entries >= 2^-12; "
            "kept tiles 128x128 sorted at 2^-12: %.2f%% (natural order %.2f%%)"
            % (out_name, stats_seconds, stats["loss"], stats["entropy"], stats["max_prob"],
               stats["entries_ge_2^-12"], 100 * sorted_kept["2^-12"],
               100 * stats["kept_frac"]["natural"]["128x128"]["2^-12"]))

        e_host, c_host, t_host = e.cpu().numpy(), c.cpu().numpy(), t.cpu().numpy().astype(np.int64)
        for fname, array in (("e.npy", e_host), ("c.npy", c_host), ("targets.npy", t_host)):
            path = os.path.join(out_folder, fname)
            with open(path + ".tmp", "wb") as f:
                np.save(f, array)
            os.replace(path + ".tmp", path)

        check = None
        if args.check_stats:
            reference = softmax_stats_numpy(e_host, c_host, t_host)
            diffs = compare_stats(stats, reference)
            check = {"numpy_reference": "agrees" if not diffs else "differs",
                     "differences": [[p, a, b] for p, a, b in diffs[:20]]}
            log("%s: --check-stats: the NumPy reference %s"
                % (out_name, "agrees" if not diffs else "DIFFERS: %s" % diffs[:5]))

        report = {
            "dataset": out_name,
            "schema": 2,
            "created": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "host_name": socket.gethostname(),
            "command": " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]),
            "commit": git_commit(),
            "software": software_versions(torch, np, spm, device),
            "corpus": dict(corpus.info, train_tokens=int(len(train_ids)), heldout_tokens=int(len(held_ids))),
            "vocabulary": vocab_info,
            "model": {
                "layers": cfg["layers"], "width": cfg["width"], "heads": cfg["heads"],
                "head_dim": cfg["width"] // cfg["heads"], "mlp": 4 * cfg["width"], "norm": "RMSNorm (eps 1e-5)",
                "positions": "learned", "activation": "GELU (tanh)", "biases": False,
                "classifier": "tied to the token embedding" if cfg["tied"] else "untied (its own weight)",
                "params": int(params),
                "params_blocks": int(param_counts(vocab, cfg["layers"], cfg["width"], args.seq, cfg["tied"])[1]),
            },
            "training": training,
            "heldout_loss_model": {"loss": heldout_loss, "tokens": eval_count, "windows": eval_windows,
                                   "precision": "bf16 autocast, as trained"},
            "export": {
                "n": int(e.shape[0]), "d": int(e.shape[1]), "v": int(c.shape[0]),
                "folder": os.path.abspath(out_folder), "step": training["step"],
                "rows": "positions of %d windows of %d tokens spread evenly over the held-out stream, in order"
                        % (export_windows, args.seq),
                "rounding": "bf16 (round to nearest even), stored as float32",
                "ignored_targets": int((t_host < 0).sum()),
            },
            "softmax_stats": dict(stats, precision="float64 from the bf16-rounded E and C",
                                  seconds=round(stats_seconds, 2),
                                  tile_rule={"kept_frac": "a tile is kept when a non-target entry has p >= eps "
                                                          "(the target handled apart)",
                                             "kept_frac_stage07_rule": "a tile is kept when an entry has "
                                                                       "|p - onehot| >= eps (stages/07_filter_sort)",
                                             "sorted": "vocabulary by descending C_j . mean(E rows)",
                                             "natural": "vocabulary in token-id order"}),
            "determinism": {
                "settings": ["python, numpy and torch seeded with --seed", "model initialized on the CPU",
                             "batch offsets from a CPU torch.Generator seeded with --seed + 1",
                             "torch.use_deterministic_algorithms(True, warn_only=True)",
                             "CUBLAS_WORKSPACE_CONFIG=%s" % os.environ.get("CUBLAS_WORKSPACE_CONFIG", ""),
                             "torch.backends.cudnn.benchmark = False",
                             "sentencepiece: every line, no sampling; set_random_generator_seed(--seed)",
                             "snapshots during training: torch.no_grad(), eval mode, the RNG states forked "
                             "and restored (torch.random.fork_rng), back to train mode"],
                "may_vary": ["the corpus: the files installed on the machine (compare corpus.sha256)",
                             "the attention backward of the SDPA kernel PyTorch picks (some accumulate with atomics)",
                             "bf16 autocast GEMM results across GPUs, cuBLAS versions and heuristics",
                             "PyTorch, cuBLAS and sentencepiece versions"],
                "warnings_during_training": warned,
            },
            "estimate_seconds": {k: round(v, 1) for k, v in parts.items()},
        }
        report.update(extra)
        report["seconds"] = round(time.time() - started, 1)
        if check is not None:
            report["check_stats"] = check
        write_json(os.path.join(out_folder, "stats.json"), report)
        if args.stats_dir:
            write_json(os.path.join(args.stats_dir, out_name + ".json"), report)
        log("wrote %s/{e,c,targets}.npy and stats.json%s (%.1f s since the start of %s)"
            % (out_folder, " (copy: %s)" % os.path.join(args.stats_dir, out_name + ".json") if args.stats_dir else "",
               report["seconds"], name))
        statuses.append(EXIT_CHECK_FAILED if check is not None and check["numpy_reference"] != "agrees" else EXIT_OK)

    curve = []
    import warnings
    t_train = time.time()
    running = torch.zeros((), device=device)
    running_n = 0
    last_loss = float("nan")
    last_lr = None
    snapshot_seconds = 0.0
    # A snapshot must not change the training: no gradients, the RNG states forked (nothing in it draws random
    # numbers, but the rule is then explicit), and the model back in train mode.
    fork_devices = [torch.cuda.current_device()] if device.type == "cuda" else []

    def snapshot(step, caught):
        nonlocal snapshot_seconds
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.time()
        train_seconds_so_far = t0 - t_train - snapshot_seconds
        out_name = snapshot_name(name, step)
        log("snapshot %s: the model after %d of %d steps" % (out_name, step, steps))
        model.eval()
        try:
            with torch.random.fork_rng(devices=fork_devices):
                heldout_loss, eval_count, e, t, c = held_out_pass()
        finally:
            model.train()
        log("%s: held-out loss %.4f nats over %d tokens (bf16 autocast)" % (out_name, heldout_loss, eval_count))
        write_export(out_name, e, t, c, heldout_loss, eval_count,
                     training_info(step, train_seconds_so_far, curve, last_lr), warning_texts(caught),
                     {"snapshot": {"of": name, "step": step, "steps": steps, "steps_planned": list(cfg["snapshots"]),
                                   "exported": [snapshot_name(name, k) for k in snaps],
                                   "rule": SNAPSHOT_RULE}})
        del e, t, c
        snapshot_seconds += time.time() - t0

    model.train()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for kind, step in training_events(steps, snaps):
            if kind == "snapshot":
                snapshot(step, caught)
                continue
            last_lr = lr_at(step, steps, warmup, cfg["lr"])
            for group in opt.param_groups:
                group["lr"] = last_lr
            window = train_dev[all_starts[step][:, None] + offsets[None, :]]
            x, y = window[:, :-1], window[:, 1:]
            with autocast:
                logits = model(x)
            loss = F.cross_entropy(logits.float().reshape(-1, vocab), y.reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            del logits
            running += loss.detach()
            running_n += 1
            if (step + 1) % log_every == 0 or step + 1 == steps:
                last_loss = float(running) / running_n
                running.zero_()
                running_n = 0
                curve.append([step + 1, round(last_loss, 4)])
                done = time.time() - t_train
                left = done / (step + 1) * (steps - step - 1)
                log("train step %d/%d loss %.4f lr %.2e (%.1f s, about %.0f s left)"
                    % (step + 1, steps, last_loss, opt.param_groups[0]["lr"], done, left))
        warned = warning_texts(caught)
    if device.type == "cuda":
        torch.cuda.synchronize()
    train_seconds = time.time() - t_train - snapshot_seconds

    # Held-out: the model's loss as trained (bf16 autocast), and the rows to export.
    model.eval()
    heldout_loss, eval_count, e, t, c = held_out_pass()
    log("held-out loss %.4f nats over %d tokens (bf16 autocast); exporting E [%d, %d], C [%d, %d]"
        % (heldout_loss, eval_count, e.shape[0], e.shape[1], c.shape[0], c.shape[1]))
    del model, opt, train_dev
    training = training_info(steps, train_seconds, curve, last_lr)
    training["final_train_loss"] = last_loss
    training["snapshot_seconds"] = round(snapshot_seconds, 1)
    extra = {}
    if cfg["snapshots"]:
        extra["snapshots"] = {"steps_planned": list(cfg["snapshots"]), "steps": snaps,
                              "exported": [snapshot_name(name, k) for k in snaps], "rule": SNAPSHOT_RULE}
    write_export(name, e, t, c, heldout_loss, eval_count, training, warned, extra)
    return max(statuses)


def warning_texts(caught):
    """The distinct first lines of caught warnings (at most 300 characters each), in order."""
    texts = []
    for w in caught:
        text = str(w.message).splitlines()[0][:300] if str(w.message) else w.category.__name__
        if text not in texts:
            texts.append(text)
    return texts


def add_machine_options(p, cpu_use):
    """--threads and --allow-cpu, shared with bench/train_compare.py; cpu_use says what the CPU is good for."""
    p.add_argument("--threads", type=positive_int, default=os.cpu_count() or 1,
                   help="CPU threads for sentencepiece and torch (default: the cores, %(default)s)")
    p.add_argument("--allow-cpu", action="store_true",
                   help="run on the CPU when there is no CUDA device (%s)" % cpu_use)


def import_torch(allow_cpu, cpu_use):
    """(torch, None), or (None, why to skip): PyTorch missing, or no CUDA device without --allow-cpu.
    Sets CUBLAS_WORKSPACE_CONFIG first: cuBLAS picks deterministic workspaces only when it is set
    before CUDA starts (shared with bench/train_compare.py)."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    try:
        import torch
    except ImportError as exc:
        return None, "PyTorch not found (%s): run this on a GPU machine with PyTorch" % exc
    if not torch.cuda.is_available() and not allow_cpu:
        return None, ("PyTorch %s sees no CUDA device (--allow-cpu %s)" % (getattr(torch, "__version__", "?"), cpu_use))
    return torch, None


def import_numpy_and_sentencepiece():
    """(numpy, sentencepiece, None), or (None, None, why to skip)."""
    try:
        import numpy as np
    except ImportError as exc:
        return None, None, "NumPy not found (%s)" % exc
    try:
        import sentencepiece as spm
    except ImportError as exc:
        return None, None, "sentencepiece not found (%s)" % exc
    return np, spm, None


class InputProblem(Exception):
    """A problem with the arguments found only once the data is there: one line, exit status 2."""


def write_json(path, obj):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path + ".tmp", "w") as f:
        json.dump(obj, f, indent=2, allow_nan=True)
        f.write("\n")
    os.replace(path + ".tmp", path)


def git_commit():
    """CCE_COMMIT from the environment if set (as cce_bench reads it: a device copy's git HEAD may be stale),
    otherwise the source tree's git HEAD."""
    if os.environ.get("CCE_COMMIT"):
        return os.environ["CCE_COMMIT"]
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=30,
                             cwd=ROOT)
        return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else "unknown"
    except Exception:
        return "unknown"


def software_versions(torch, np, spm, device):
    out = {"python": sys.version.split()[0], "torch": torch.__version__, "numpy": np.__version__,
           "sentencepiece": getattr(spm, "__version__", "unknown"), "cuda": torch.version.cuda,
           "device": str(device)}
    if device.type == "cuda":
        out["gpu"] = torch.cuda.get_device_name(device)
        out["cudnn"] = torch.backends.cudnn.version()
    return out


def skip(message):
    print("lm_data.py: SKIPPED: %s" % message, file=sys.stderr)
    return EXIT_SKIPPED


def main(argv=None):
    args = parse_args(argv)
    torch, why = import_torch(args.allow_cpu, "runs tiny smoke tests on the CPU")
    if torch is None:
        return skip(why)
    np, spm, why = import_numpy_and_sentencepiece()
    if np is None:
        return skip(why)

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    names = dataset_names(args)
    if args.check_stats:
        for name in names:
            if args.n * getattr(args, "vocab_" + name) > CHECK_STATS_MAX_ELEMENTS:
                print("lm_data.py: error: --check-stats: N*V = %d*%d is too large for the NumPy reference "
                      "(at most %d)" % (args.n, getattr(args, "vocab_" + name), CHECK_STATS_MAX_ELEMENTS),
                      file=sys.stderr)
                return EXIT_BAD_INPUT

    import random
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.benchmark = False
    torch.set_num_threads(args.threads)

    log = Log("lm_data")
    for name in names:
        total, parts = estimate_seconds(args, name)
        log("%s: estimate %.1f min on one H100 (%s; assumes %g TFLOP/s)%s"
            % (name, total / 60, ", ".join("%s %.0f s" % kv for kv in parts.items()), ASSUMED_TFLOPS,
               "" if device.type == "cuda" else "; this run is on the CPU (--allow-cpu): much slower per flop"))
    corpus = gather_corpus(args.corpus_mb * 1e6, args.heldout_percent, args.max_file_kb * 1024, log)
    if not corpus.train or not corpus.heldout:
        print("lm_data.py: error: the corpus has %d training and %d held-out files: raise --corpus-mb or change "
              "--heldout-percent" % (len(corpus.train), len(corpus.heldout)), file=sys.stderr)
        return EXIT_BAD_INPUT
    status = EXIT_OK
    for name in names:
        try:
            rc = make_dataset(torch, np, spm, args, name, corpus, device, Log(name))
        except InputProblem as exc:
            print("lm_data.py: error: %s: %s" % (name, exc), file=sys.stderr)
            return EXIT_BAD_INPUT
        status = max(status, rc)
    return status


if __name__ == "__main__":
    sys.exit(main())
