#!/usr/bin/env python3
"""Stage 11's step on P GPUs, drawn as a data flow: one lane per GPU, the collectives across them.

    /usr/bin/python3 bench/sharded_flow_figure.py [--out docs/figures/sharded_flow.png] [--gpus 2]
    /usr/bin/python3 bench/sharded_flow_figure.py --step dense     # docs/figures/sharded_dense_flow.png

No GPU and no data: the figure is a schematic of one step (forward, then
backward) of stages/11_sharded_vocabulary, with P = --gpus (2 or 4). GPU p
holds the rows of C that shard_vocabulary (sharded_vocabulary.cu) gives it,
and E and t whole. It mirrors, top to bottom:
  - ShardedVocabulary::step (sharded_vocabulary.cu): forward_states_keeping_order
    (stage 10: stage 08's sorted forward, the shard's vocabulary order kept
    from its batch before) on the shard, then combine_row_states (combine.cu):
    shard_max_kernel, the all-reduce max, rescale_kernel, the all-reduce sum,
    lse_and_loss_kernel and finish_loss;
  - ShardedVocabulary::backward_to_accumulator: begin_backward (stage 10),
    joined_decision (measure_for_decision, join_misplaced_mass, with grouped
    rows regroup_for_decision and join_misplaced_mass again, finish_decision,
    join_kept_pairs), choose_plan, run_backward_plan;
  - then add_target_terms (stage 09) and reduce_de (combine.cu): the
    all-reduce of dE, and its rounding to bf16 (round_de_kernel).
A step that runs stage 10's dense plan before the forward (dense_step, after
a batch that kept most pairs) makes the same joins per chunk of rows, and one
more all-reduce, of the chunk's target logits (sum_over_shards): --step dense
draws that step (dense_step's calls, in order, are checked against the
figure's rows) and its arithmetic is checked in float64 with every figure.

The script checks what the figure claims, and exits 1 (DOES NOT HOLD) when
one fails:
  - the collectives drawn are the code's: the ncclAllReduce calls of
    combine.cu (count, type, operation) and their order in step() and
    backward_to_accumulator();
  - on small random E, C and t in float64 (numpy; uneven shards, ignored
    tokens, a softcap), done as the code does it: combining the shards'
    (max, sum) per row gives the full LSE, the loss is the unsharded loss,
    each shard's dC rows are the unsharded dC's rows and the summed dE^p is
    the unsharded dE, all within 1e-12; and so are the dense plan's before
    the forward (dense_step's joins, one chunk of every row).
Exit 2 on a bad flag. Needs numpy and matplotlib.
"""

import re
import sys
from pathlib import Path

import figure_cli

REPO = Path(__file__).resolve().parent.parent
STAGE = REPO / "stages" / "11_sharded_vocabulary"
DEFAULT_OUT = REPO / "docs" / "figures" / "sharded_flow.png"
IGNORE_INDEX = -100
TOLERANCE = 1e-12

# The collectives in the order a step runs them: (function in combine.cu, NCCL count, type, op,
# what the figure says it carries, its size in bytes).
# combine_row_states makes its two through join_rows, reduce_de its one through sum_and_round_de.
COLLECTIVES = [
    ("join_rows", "n", "ncclFloat32", "ncclMax", "N fp32", "4N bytes"),
    ("join_rows", "2 * n", "ncclFloat32", "ncclSum", "2N fp32", "8N bytes"),
    ("join_misplaced_mass", "s10::kAutoCandidates", "ncclUint64", "ncclSum", "37 uint64", "296 bytes"),
    ("join_kept_pairs", "2", "ncclInt64", "ncclSum", "2 int64", "16 bytes"),
    ("sum_and_round_de", "count", "ncclFloat32", "ncclSum", "N·D fp32", "4·N·D bytes"),
]
# The one collective of combine.cu that the figure does not draw: the dense plan before the forward (dense_step)
# sums each chunk's target logits over the shards with it, then joins the chunk's LSE and dE with the ones above.
NOT_DRAWN = [("sum_over_shards", "count", "ncclFloat32", "ncclSum")]
# The calls each function makes, in the order it makes them: the collectives' order in a step.
STEP_ORDER = ["forward_states_keeping_order", "combine_row_states", "backward_to_accumulator", "add_target_terms",
              "reduce_de"]
BACKWARD_ORDER = ["begin_backward", "measure_for_decision", "join_misplaced_mass", "finish_decision",
                  "join_kept_pairs", "choose_plan", "run_backward_plan"]
# dense_step's calls in the order the second figure draws them.
DENSE_ORDER = ["begin_dense_chunks", "indexed_dot", "sum_over_shards", "set_chunk_reference", "fold_chunk",
               "join_chunk_lse", "chunk_products", "chunk_de_sums", "sum_and_round_de", "finish_dense_chunks"]


PROG = "sharded_flow_figure.py"
Parser = figure_cli.parser_class(PROG)


def fail(message, status=2):
    figure_cli.fail(PROG, message, status)


# ---- the code's collectives, read from its sources ----

def call_arguments(text, start):
    """The top-level arguments of the call whose '(' is at text[start]."""
    depth, args, current = 0, [], ""
    for ch in text[start:]:
        if ch in "([{":
            depth += 1
            if depth == 1:
                continue
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                args.append(current.strip())
                return args
        if ch == "," and depth == 1:
            args.append(current.strip())
            current = ""
        else:
            current += ch
    return args


def code_collectives(combine_text):
    """(function, count, type, op) of each ncclAllReduce in combine.cu, in file order."""
    found, function = [], None
    definition = re.compile(r"^[A-Za-z][\w:<>,\s\*&]*?\b(\w+)\(")
    offset = 0
    for line in combine_text.splitlines(keepends=True):
        match = definition.match(line)
        if match and not line.startswith((" ", "}", "#", "/")):
            function = match.group(1)
        column = line.find("ncclAllReduce(")
        if column >= 0:
            args = call_arguments(combine_text, offset + column + len("ncclAllReduce"))
            count = re.sub(r"^static_cast<size_t>\((.*)\)$", r"\1", args[2])
            found.append((function, count, args[3], args[4]))
        offset += len(line)
    return found


def body(text, signature):
    """The text of the function whose definition starts with `signature`, up to its closing brace."""
    start = text.find(signature)
    if start < 0:
        return ""
    end = text.find("\n}\n", start)
    return text[start:end]


def in_order(text, names):
    positions = [text.find(name + "(") for name in names]
    return all(p >= 0 for p in positions) and positions == sorted(positions)


def source_claims():
    try:
        combine = (STAGE / "combine.cu").read_text()
        sharded = (STAGE / "sharded_vocabulary.cu").read_text()
        plan = (REPO / "stages" / "10_plan_per_batch" / "plan_per_batch.h").read_text()
    except OSError as error:
        return [(False, f"the stage's sources are readable ({error})")]
    first = re.search(r"kAutoFirstExponent\s*=\s*(\d+)", plan)
    last = re.search(r"kAutoLastExponent\s*=\s*(\d+)", plan)
    steps = re.search(r"kAutoStepsPerExponent\s*=\s*(\d+)", plan)
    counted = re.search(r"kAutoCandidates\s*=\s*kAutoStepsPerExponent \* \(kAutoLastExponent - kAutoFirstExponent\) \+ 1;",
                        plan)
    candidates = (int(steps.group(1)) * (int(last.group(1)) - int(first.group(1))) + 1
                  if first and last and steps and counted else None)
    drawn = [(f, count, kind, op) for f, count, kind, op, _, _ in COLLECTIVES] + NOT_DRAWN
    functions = [f for f, *_ in drawn]
    # combine.cu's file order, put in the step's order function by function (a stable sort)
    code_in_step_order = sorted(code_collectives(combine),
                                key=lambda c: functions.index(c[0]) if c[0] in functions else len(functions))
    step = body(sharded, "void ShardedVocabulary::step(")
    backward = body(sharded, "float* ShardedVocabulary::backward_to_accumulator(")
    # the joined decision's calls read where backward_to_accumulator() calls it
    call = backward.find("joined_decision(")
    if call >= 0:
        backward = backward[:call] + body(sharded, "s10::KeptPairs ShardedVocabulary::joined_decision(") + backward[call:]
    dense = body(sharded, "void ShardedVocabulary::dense_step(")
    return [
        (code_in_step_order == drawn,
         "the ncclAllReduce calls of combine.cu are the five drawn and the dense plan's sum_over_shards (count, type, op)"),
        (candidates == 37,
         "join_misplaced_mass carries 37 candidates (kAutoFirstExponent..kAutoLastExponent, a quarter exponent apart)"),
        (in_order(step, STEP_ORDER), "step() runs forward, combine, backward, target terms, dE's all-reduce in order"),
        (in_order(backward, BACKWARD_ORDER),
         "backward_to_accumulator() joins the misplaced mass, then the kept pairs, then runs the plan"),
        ("ncclCommInitAll" in sharded and "std::thread" in sharded, "one process, a host thread per GPU"),
        (in_order(dense, DENSE_ORDER),
         "dense_step() sums the target logit, folds, joins the LSE, runs the products, sums dE, in order"),
    ]


# ---- the arithmetic, in float64 ----

def shard_vocabulary(v, shards):
    """sharded_vocabulary.cu's shard_vocabulary: the first V mod P shards get one row more."""
    base, longer = divmod(v, shards)
    ranges, begin = [], 0
    for p in range(shards):
        rows = base + (1 if p < longer else 0)
        ranges.append((begin, begin + rows))
        begin += rows
    return ranges


def shard_targets(targets, begin, end):
    """combine.cu's shard_targets: t − begin inside the shard, rows() outside it, ignored ones kept."""
    import numpy as np
    rows = end - begin
    inside = (targets >= begin) & (targets < end)
    return np.where(targets == IGNORE_INDEX, IGNORE_INDEX, np.where(inside, targets - begin, rows))


def logits(e, c, softcap):
    import numpy as np
    raw = e @ c.T
    if softcap <= 0:
        return raw, np.ones_like(raw)
    z = softcap * np.tanh(raw / softcap)
    return z, 1.0 - (z / softcap) ** 2  # z and dz/draw


def unsharded(e, c, targets, softcap):
    """The reference on one device: loss (mean), LSE, dE, dC."""
    import numpy as np
    z, slope = logits(e, c, softcap)
    valid = targets != IGNORE_INDEX
    top = z.max(axis=1)
    lse = top + np.log(np.exp(z - top[:, None]).sum(axis=1))
    rows = np.arange(len(targets))
    target_logit = np.where(valid, z[rows, np.where(valid, targets, 0)], 0.0)
    loss = np.where(valid, lse - target_logit, 0.0).sum() / max(valid.sum(), 1)
    g = np.where(valid, 1.0 / max(valid.sum(), 1), 0.0)
    s = np.exp(z - lse[:, None])
    s[rows[valid], targets[valid]] -= 1.0
    s *= g[:, None] * slope
    return loss, lse, s @ c, s.T @ e


def sharded(e, c, targets, softcap, gpus):
    """stage 11's step, GPU by GPU, with the all-reduces as combine.cu does them."""
    import numpy as np
    n = len(targets)
    valid = targets != IGNORE_INDEX
    ranges = shard_vocabulary(c.shape[0], gpus)
    states = []
    for begin, end in ranges:  # the forward on each shard: (m_i^p, s_i^p) and z_i^p
        z, _ = logits(e, c[begin:end], softcap)
        local = shard_targets(targets, begin, end)
        m = z.max(axis=1)
        s = np.exp(z - m[:, None]).sum(axis=1)
        mine = (local != IGNORE_INDEX) & (local < end - begin)
        zt = np.where(mine, z[np.arange(n), np.where(mine, local, 0)], 0.0)
        states.append((m, s, zt))
    row_max = np.max([m for m, _, _ in states], axis=0)  # all-reduce max, N
    sums = sum(np.concatenate([np.where(m == -np.inf, 0.0, s * np.exp(m - row_max)), zt])
               for m, s, zt in states)  # rescale_kernel, then all-reduce sum, 2N
    lse = row_max + np.log(sums[:n])  # lse_and_loss_kernel, on every GPU
    loss = np.where(valid, lse - sums[n:], 0.0).sum() / max(valid.sum(), 1)  # finish_loss (mean)

    g = np.where(valid, 1.0 / max(valid.sum(), 1), 0.0)
    dc, de_parts = [], []
    for begin, end in ranges:  # the backward on each shard, from the full LSE
        z, slope = logits(e, c[begin:end], softcap)
        local = shard_targets(targets, begin, end)
        s = np.exp(z - lse[:, None])
        mine = np.nonzero((local != IGNORE_INDEX) & (local < end - begin))[0]
        s[mine, local[mine]] -= 1.0  # a target outside the shard is in none of its columns
        s *= g[:, None] * slope
        dc.append(s.T @ e)  # complete: stays on its GPU
        de_parts.append(s @ c[begin:end])
    de = sum(de_parts)  # reduce_de: all-reduce sum, N·D
    return ranges, loss, lse, de, dc


def targets_for_dot(targets, begin, end):
    """combine.cu's targets_for_dot: shard_targets with a target on another shard ignored (its dot 0 here)."""
    import numpy as np
    local = shard_targets(targets, begin, end)
    return np.where(local == end - begin, IGNORE_INDEX, local)


def sharded_dense_before(e, c, targets, softcap, gpus):
    """dense_step (sharded_vocabulary.cu): stage 10's dense plan before the forward on each shard, one chunk of every
    row, q = exp(z − R)·softcap' against the joined target logit R, the chunk's LSE joined from each shard's
    (LSE^p, 1), S = α·q with the target's term apart on its shard, dE's parts summed."""
    import numpy as np
    n = len(targets)
    rows = np.arange(n)
    valid = targets != IGNORE_INDEX
    ranges = shard_vocabulary(c.shape[0], gpus)
    raw_dot = np.zeros(n)
    for begin, end in ranges:  # each shard's indexed dot, then sum_over_shards
        dot = targets_for_dot(targets, begin, end)
        mine = dot != IGNORE_INDEX
        raw_dot += np.where(mine, (e * c[begin + np.where(mine, dot, 0)]).sum(axis=1), 0.0)
    reference = softcap * np.tanh(raw_dot / softcap) if softcap > 0 else raw_dot  # set_chunk_reference
    shard_lse, parts = [], []
    for begin, end in ranges:  # fold_chunk on each shard: its LSE, and the target logit where it is its own
        z, _ = logits(e, c[begin:end], softcap)
        top = z.max(axis=1)
        shard_lse.append(top + np.log(np.exp(z - top[:, None]).sum(axis=1)))
        local = shard_targets(targets, begin, end)
        mine = (local != IGNORE_INDEX) & (local < end - begin)
        parts.append(np.where(mine, z[rows, np.where(mine, local, 0)], 0.0))
    row_max = np.max(shard_lse, axis=0)  # join_chunk_lse: the states (LSE^p, 1), as combine_row_states joins
    lse = row_max + np.log(sum(np.exp(x - row_max) for x in shard_lse))
    loss = np.where(valid, lse - sum(parts), 0.0).sum() / max(valid.sum(), 1)
    g = np.where(valid, 1.0 / max(valid.sum(), 1), 0.0)
    r = np.where(valid, reference, lse)  # an ignored row: R = +inf and g = 0 (no q, no α)
    alpha = np.where(valid, g * np.exp(r - lse), 0.0)
    de, dc = np.zeros_like(e), []
    for begin, end in ranges:  # chunk_products on each shard
        z, slope = logits(e, c[begin:end], softcap)
        q = np.where(valid[:, None], np.exp(z - r[:, None]) * slope, 0.0)
        local = shard_targets(targets, begin, end)
        mine = np.nonzero((local != IGNORE_INDEX) & (local < end - begin))[0]
        q[mine, local[mine]] = 0.0  # the target's entry: its term apart, in fp32
        term = np.zeros(n)
        term[mine] = g[mine] * (np.exp(z[mine, local[mine]] - lse[mine]) - 1.0) * slope[mine, local[mine]]
        de_part = alpha[:, None] * (q @ c[begin:end])
        de_part[mine] += term[mine, None] * c[begin + local[mine]]
        de += de_part  # chunk_de_sums, then sum_and_round_de
        dc_shard = q.T @ (alpha[:, None] * e)
        np.add.at(dc_shard, local[mine], term[mine, None] * e[mine])  # the target rows, on their shard
        dc.append(dc_shard)
    return ranges, loss, lse, de, dc


def arithmetic_claims(gpus):
    import numpy as np
    rng = np.random.default_rng(11)
    n, d, v, softcap = 24, 16, 37, 20.0  # V = 37: uneven shards for P = 2 and 4
    e = rng.standard_normal((n, d)) * 0.9
    c = rng.standard_normal((v, d)) * 0.9
    targets = rng.integers(0, v, n)
    targets[[3, 10, 17]] = IGNORE_INDEX
    loss0, lse0, de0, dc0 = unsharded(e, c, targets, softcap)
    ranges, loss, lse, de, dc = sharded(e, c, targets, softcap, gpus)
    close = lambda a, b: np.allclose(a, b, rtol=TOLERANCE, atol=TOLERANCE)  # noqa: E731
    every_shard = all(any(b <= t < en for t in targets) for b, en in ranges)
    return ranges, [
        (every_shard, "every shard holds some of the targets (targets inside and outside each shard)"),
        (close(lse, lse0), "combining the shards' (max, sum) per row gives the full LSE"),
        (close(loss, loss0), "the loss from the joined sums is the unsharded loss"),
        (all(close(part, dc0[b:en]) for part, (b, en) in zip(dc, ranges)),
         "each GPU's dC rows, without communication, are the unsharded dC's rows"),
        (close(de, de0), "the sum of the GPUs' dE^p is the unsharded dE"),
    ] + dense_claims(e, c, targets, softcap, gpus, (loss0, lse0, de0, dc0), close)


def dense_claims(e, c, targets, softcap, gpus, reference, close):
    loss0, lse0, de0, dc0 = reference
    ranges, loss, lse, de, dc = sharded_dense_before(e, c, targets, softcap, gpus)
    return [
        (close(lse, lse0) and close(loss, loss0),
         "the dense plan before the forward: each shard's LSE joined as (LSE^p, 1) gives the full LSE and the loss"),
        (close(de, de0) and all(close(part, dc0[b:en]) for part, (b, en) in zip(dc, ranges)),
         "the dense plan before the forward: α_i from the summed target logit, dE's parts summed, dC on its shard"),
    ]


# ---- the figure ----

def fraction(k, p):
    """k·V/p, written short: 0, V/4, V/2, 3V/4, V."""
    from fractions import Fraction
    f = Fraction(k, p)
    if f == 0:
        return "0"
    if f == 1:
        return "V"
    return f"V/{f.denominator}" if f.numerator == 1 else f"{f.numerator}V/{f.denominator}"


def dc_stays_de_part(p, span, sub, small, rows):
    """A backward row's two boxes in lane p: its dC rows, which stay, and its part of dE [rows, D]."""
    return (f"dC rows {span(p)}:\n" + ("stays here" if small else "complete, stays here\n(no communication)"),
            f"$dE^{sub(p)}$ [{rows}, D] fp32")


def decided_step(gpus, sub, span, small):
    """The rows of a step that decides (forward, the joined decision, the backward), top to bottom: (kind, height,
    left title, left note, lane text(p) or bar text); its title and the note under it."""
    rows = [
        ("section", 0.42, "forward", None, None),
        ("local", 0.95, "1  forward on the shard",
         "forward_states_keeping_order (stage 10): per row i,\n"
         r"$m_i^p = \max_{j\in p} z_{ij}$,  $s_i^p = \sum_{j\in p} e^{z_{ij}-m_i^p}$;" "\n"
         r"$z_i^p$ = the target logit if $t_i$ is in shard p, else 0",
         lambda p: f"$m_i^{sub(p)},\\ s_i^{sub(p)},\\ z_i^{sub(p)}$\n"
                   + (f"over V/{gpus} rows" if small else f"over its V/{gpus} rows of C")
                   + f"\n2·N·D·V/{gpus} flops"),
        ("collective", 0.62, "2  all-reduce max",
         "combine_row_states: ncclAllReduce, ncclMax",
         r"$M_i = \max_p\ m_i^p$" "      N fp32 = 4N bytes"),
        ("local", 0.62, "3  each shard's sum, rescaled",
         r"rescale_kernel: $s_i^p\,e^{m_i^p - M_i}$, next to $z_i^p$",
         lambda p: f"$s_i^{sub(p)}\\,e^{{m_i^{sub(p)} - M_i}}$,  $z_i^{sub(p)}$"),
        ("collective", 0.62, "4  all-reduce sum",
         "combine_row_states: ncclAllReduce, ncclSum",
         r"$S_i = \sum_p s_i^p e^{m_i^p - M_i}$,   $z_i = \sum_p z_i^p$" "      2N fp32 = 8N bytes"),
        ("local", 0.78, "5  LSE and loss, on every GPU",
         "lse_and_loss_kernel, finish_loss:\n"
         r"$\mathrm{LSE}_i = M_i + \log S_i$,  $\mathrm{loss}_i = \mathrm{LSE}_i - z_i$;" "\nloss = their mean",
         lambda p: "LSE [N], loss\nsame bits on every GPU" if not small else "LSE [N], loss\n(same bits)"),
        ("section", 0.42, "backward", "(a loss alone ends above)", None),
        ("local", 0.78, "6  the misplaced mass per eps",
         "begin_backward, measure_for_decision (stage 10):\n"
         r"on its own tiles, for eps = $2^{-8}, 2^{-8.25}\ldots 2^{-17}$" "\n(fixed point); on a first step, after 7, the\n"
         "rows regrouped near its eps (regroup_for_decision)",
         lambda p: "its tiles' misplaced\nmass, 37 candidates"),
        ("collective", 0.62, "7  all-reduce sum (automatic eps)",
         "join_misplaced_mass: ncclAllReduce, ncclSum\n(twice on a first step with grouped rows;\nnot with --drop-eps or --plan dense)",
         "misplaced mass per candidate eps, summed      37 uint64 = 296 bytes"),
        ("local", 0.78, "8  eps chosen; kept pairs counted",
         "finish_decision: every GPU chooses the same eps\nfrom the same sums, then counts its "
         "kept\n(token block, tile) pairs at that eps",
         lambda p: "eps (same on all)\nits kept pairs" if small else "eps (same on all)\nits kept and all pairs"),
        ("collective", 0.62, "9  all-reduce sum, then to the host",
         "join_kept_pairs: ncclAllReduce, ncclSum\nnot with --plan dense",
         "kept pairs, all pairs      2 int64 = 16 bytes"),
        ("backward", 1.72, "10  the backward on the shard",
         "choose_plan: sparse or dense, the same on every\nGPU; run_backward_plan (stage 10) and\n"
         "add_target_terms (stage 09), from the full LSE:\n"
         r"$S_{ij} = g_i\,(p_{ij} - [j = t_i])\cdot\mathrm{softcap}'$" "\n"
         r"$dC_j = \sum_i S_{ij} E_i$: complete, for its rows" "\n"
         r"$dE_i^p = \sum_{j\in p} S_{ij} C_j$: its shard's part",
         lambda p: dc_stays_de_part(p, span, sub, small, "N")),
        ("collective", 0.62, "11  all-reduce sum of dE",
         "reduce_de: ncclAllReduce, ncclSum;\nthen, for bf16, round_de_kernel",
         r"$dE = \sum_p dE^p$" "      N·D fp32 = 4·N·D bytes"),
        ("local", 0.78, "after the step",
         "every GPU: the same loss, LSE, dE, eps, plan;\n"
         "dC is split: GPU p holds its rows only\n(download() copies the shards to the host)",
         lambda p: f"loss, LSE, dE\ndC rows {span(p)}"),
    ]
    title = f"Stage 11: C's rows sharded over P = {gpus} GPUs, the shards joined by all-reduces"
    footer = ("Each all-reduce's buffer has the same size on every GPU, whatever P: 12N bytes in the forward, 312 bytes "
              "of\nthe plan's statistics, 4·N·D bytes in the backward (gemma2, N = 8192, D = 2304: 98 kB and 75.5 MB). "
              "A ring\nall-reduce moves about 2(P − 1)/P times that in and out of each GPU, while the flops shrink as 1/P.")
    return rows, title, footer


def dense_step(gpus, sub, span, small):
    """The rows of a step planned dense from the one before (dense_step): stage 10's dense plan before the forward
    on each shard, the chunk's target logit, LSE and dE rows joined."""
    rows = [
        ("section", 0.42, "a step planned dense", "(the step before kept more than a third of the pairs)", None),
        ("local", 0.78, "1  the grad scale, the targets' runs",
         "begin_dense_chunks (stage 10): $g_i$; the rows sorted\nby target, this shard's targets only "
         "(a target\noutside it is rows() here: no run)",
         lambda p: "$g$ [N]\nits targets' runs"),
        ("section", 0.42, "per chunk of rows", "(gemma2_flat at P = 2: one chunk of all 8192)", None),
        ("local", 0.78, "2  the target logit's part",
         "s04::indexed_dot on targets_for_dot:\n" r"$C_{t_i}\cdot E_i$ where $t_i$ is in shard p, else 0",
         lambda p: f"$z_{{i,t_i}}^{sub(p)}$ (0 off the shard)"),
        ("collective", 0.62, "3  all-reduce sum",
         "sum_over_shards: ncclAllReduce, ncclSum;\nthen set_chunk_reference: the softcap",
         r"$R_i = \mathrm{softcap}(\sum_p z_{i,t_i}^p)$" "      N fp32 = 4N bytes"),
        ("local", 0.95, "4  the fold, keeping q",
         "fold_chunk (stage 10's FoldThenKeepTile):\n"
         r"$q_{ij} = e^{z_{ij} - R_i}\cdot\mathrm{softcap}'_{ij}$ in bf16, for the" "\nshard's columns; its "
         r"$\mathrm{LSE}_i^p$",
         lambda p: f"q [rows, V/{gpus}] bf16\n" + f"$\mathrm{{LSE}}_i^{sub(p)}$"),
        ("collective", 0.62, "5  the LSE joined",
         "join_chunk_lse: the states $(\mathrm{LSE}_i^p, 1)$ joined as\nin the forward: ncclMax, then ncclSum",
         r"$\mathrm{LSE}_i = \log\sum_p e^{\mathrm{LSE}_i^p}$, loss" "      12N bytes"),
        ("backward", 1.72, "6  the products on the shard",
         "chunk_products: " r"$\alpha_i = g_i\,e^{R_i - \mathrm{LSE}_i}$, $S = \alpha\circ q$," "\n"
         r"$S_{i,t_i}$ in fp32 on the target's shard only;" "\n"
         r"$dC = Q^T(\alpha\circ E)$ + its target rows: complete" "\n"
         r"$dE_i^p = \alpha_i (Q C)_i\ [+\ S_{i,t_i} C_{t_i}]$: its part" "\n(chunk_de_sums: fp32, not rounded)",
         lambda p: dc_stays_de_part(p, span, sub, small, "rows")),
        ("collective", 0.62, "7  all-reduce sum of dE's rows",
         "sum_and_round_de: ncclAllReduce, ncclSum;\nthen, for bf16, round_de_kernel",
         r"$dE = \sum_p dE^p$" "      rows·D fp32"),
        ("local", 0.78, "after the last chunk",
         "finish_dense_chunks: the loss; several chunks:\ndC rounded from fp32, then its target rows.\n"
         "Three products per shard, no forward",
         lambda p: f"loss, LSE, dE\ndC rows {span(p)}"),
    ]
    title = f"Stage 11, a flat batch: stage 10's dense plan before the forward on P = {gpus} GPUs"
    footer = ("Every 16th step of a dense run decides again on a sample of 1024 rows, as stage 10 does (the first "
              "figure's\nforward and decision on those rows). Per chunk the joins move 16 bytes a row and dE's 4·D. "
              "Each GPU pays\n3 × 2·N·D·V/P flops, where a forward and the dense plan after it pay 4 × 2·N·D·V/P.")
    return rows, title, footer


STEPS = {"decided": (decided_step, DEFAULT_OUT), "dense": (dense_step, REPO / "docs" / "figures" / "sharded_dense_flow.png")}


def draw(out, gpus, step="decided"):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle

    lane_tints = ["#e3eef9", "#e5f4e3", "#f6ebf7", "#fdf1df"]
    lane_edges = ["#2b6cb0", "#2f855a", "#8e44ad", "#c05621"]
    coll_face, coll_edge, grey = "#fde2c4", "#d9731a", "#555555"
    dc_face = "#d7f0d2"
    width = 10.0
    lx0, lx1 = 3.75, width - 0.1  # the lanes; left of them, what each step is and its code
    lane = (lx1 - lx0) / gpus
    small = gpus > 2
    pad = 0.1 if small else 0.2  # between a lane's edge and its boxes
    sub = lambda p: f"{{{p}}}"  # noqa: E731
    span = lambda p: f"[{fraction(p, gpus)}, {fraction(p + 1, gpus)})"  # noqa: E731
    rows, title, footer = STEPS[step][0](gpus, sub, span, small)
    gap = 0.26  # between rows: the arrows
    top = 1.55  # below the title and the lane headers
    height = top + sum(h for _, h, *_ in rows) + gap * (len(rows) - 1) + 1.0

    fig = plt.figure(figsize=(width, height))
    ax = fig.add_axes([0, 0, 1, 1])
    ax.set_xlim(0, width)
    ax.set_ylim(height, 0)
    ax.axis("off")
    ax.text(width / 2, 0.28, title, ha="center", va="center", fontsize=13.5, weight="bold")
    ax.text(width / 2, 0.62, "one process, a host thread and a stream per GPU (ncclCommInitAll); "
            "E [N, D] and the targets t are whole on every GPU", ha="center", va="center", fontsize=10,
            color=grey)

    # the lanes: a tinted column per GPU, its header on top
    y_lanes = top - 0.5
    lane_bottom = height - 0.9
    for p in range(gpus):
        x = lx0 + p * lane
        ax.add_patch(Rectangle((x + 0.04, y_lanes), lane - 0.08, lane_bottom - y_lanes, facecolor=lane_tints[p],
                               edgecolor="none", zorder=0))
        header = f"GPU {p}\nC rows {span(p)}"
        ax.text(x + lane / 2, y_lanes + 0.24, header, ha="center", va="center", fontsize=11 if not small else 10,
                weight="bold", color=lane_edges[p])

    y = top
    previous_kind = None
    for kind, h, title, note, content in rows:
        if kind == "section":
            ax.text(0.15, y + h / 2, title.upper(), ha="left", va="center", fontsize=12, weight="bold",
                    color="#333333")
            if note:
                after = max(1.35, 0.2 + 0.14 * len(title))  # right of the title, about 0.14 inch a capital
                ax.text(after, y + h / 2, note, ha="left", va="center", fontsize=9.5, color=grey, style="italic")
            ax.plot([0.15, width - 0.1], [y + h, y + h], color="#999999", lw=1.0, ls=(0, (5, 4)), zorder=1)
            y += h + gap
            continue
        # the left column
        ax.text(0.15, y + 0.02, title, ha="left", va="top", fontsize=11, weight="bold",
                color=coll_edge if kind == "collective" else "#222222")
        if note:
            ax.text(0.3, y + 0.27, note, ha="left", va="top", fontsize=9.3, color=grey, linespacing=1.3)
        if kind == "collective":
            ax.add_patch(FancyBboxPatch((lx0 + 0.12, y + 0.06), lx1 - lx0 - 0.24, h - 0.12,
                                        boxstyle="round,pad=0.02,rounding_size=0.08", facecolor=coll_face,
                                        edgecolor=coll_edge, lw=2.0, zorder=3))
            ax.text((lx0 + lx1) / 2, y + h / 2, content, ha="center", va="center", fontsize=11.5, zorder=4)
        elif kind == "local":
            for p in range(gpus):
                x = lx0 + p * lane
                ax.add_patch(FancyBboxPatch((x + pad, y + 0.04), lane - 2 * pad, h - 0.08,
                                            boxstyle="round,pad=0.02,rounding_size=0.06", facecolor="white",
                                            edgecolor=lane_edges[p], lw=1.4, zorder=3))
                ax.text(x + lane / 2, y + h / 2, content(p), ha="center", va="center",
                        fontsize=10 if not small else 9.2, linespacing=1.3, zorder=4)
        else:  # the backward: dC stays, dE^p goes on to the all-reduce
            for p in range(gpus):
                x = lx0 + p * lane
                dc_text, de_text = content(p)
                h_dc = h * 0.56
                ax.add_patch(FancyBboxPatch((x + pad, y + 0.04), lane - 2 * pad, h_dc - 0.1,
                                            boxstyle="round,pad=0.02,rounding_size=0.06", facecolor=dc_face,
                                            edgecolor=lane_edges[p], lw=1.4, zorder=3))
                ax.text(x + lane / 2, y + h_dc / 2 - 0.01, dc_text, ha="center", va="center",
                        fontsize=10 if not small else 9.2, linespacing=1.3, zorder=4)
                ax.add_patch(FancyBboxPatch((x + pad, y + h_dc + 0.04), lane - 2 * pad, h - h_dc - 0.08,
                                            boxstyle="round,pad=0.02,rounding_size=0.06", facecolor="white",
                                            edgecolor=lane_edges[p], lw=1.4, zorder=3))
                ax.text(x + lane / 2, y + h_dc + (h - h_dc) / 2, de_text, ha="center", va="center",
                        fontsize=10 if not small else 9.2, zorder=4)
        # arrows from the row above into this one, one per lane
        if previous_kind is not None:
            for p in range(gpus):
                xc = lx0 + (p + 0.5) * lane
                ax.add_patch(FancyArrowPatch((xc, y - gap - 0.02), (xc, y + 0.04), arrowstyle="-|>",
                                             mutation_scale=12, color=lane_edges[p], lw=1.5, zorder=5,
                                             shrinkA=0, shrinkB=0))
        previous_kind = kind
        y += h + gap
    # what the collectives move, per step
    ax.text(width / 2, height - 0.62, footer, ha="center", va="top", fontsize=9.5, color=grey, linespacing=1.35)
    figure_cli.save_png(plt, fig, out, colors="palette")


def main(argv):
    parser = Parser(description="Stage 11's step on P GPUs as a data flow, drawn and checked (no GPU).")
    parser.add_argument("--out", default=None,
                        help="the PNG to write (default docs/figures/sharded_flow.png, or sharded_dense_flow.png "
                             "with --step dense)")
    parser.add_argument("--gpus", type=int, choices=(2, 4), default=2, help="P, the lanes drawn (2 or 4)")
    parser.add_argument("--step", choices=tuple(STEPS), default="decided",
                        help="decided: a step that runs the forward and decides (default); dense: a step planned "
                             "dense, stage 10's dense plan before the forward")
    args = parser.parse_args(argv)
    out = figure_cli.checked_png(PROG, args.out if args.out is not None else STEPS[args.step][1])
    figure_cli.require_plotting(PROG)

    draw(out, args.gpus, args.step)
    ranges, arithmetic = arithmetic_claims(args.gpus)
    claims = source_claims() + arithmetic
    shards = " ".join(f"[{b}, {e})" for b, e in ranges)
    print(f"{out}: P = {args.gpus}, {len(COLLECTIVES)} all-reduces ("
          + ", ".join(size for *_, size in COLLECTIVES) + f"); float64 check at V = {ranges[-1][1]}: shards {shards}")
    return figure_cli.verdict(PROG, claims)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
