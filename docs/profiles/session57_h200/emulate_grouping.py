#!/usr/bin/env python3
"""Stage 10's token grouping emulated on the CPU for the orders tried in session 57 (NumPy).

    /usr/bin/python3 emulate_grouping.py DIR/lm128k_pairs.npz [...] [--budget 0.022] [--thresholds] [--out F.json]

Reads session 56's dump_pairs_probe.py files (<label>_pairs.npz and .json; <label>_bound.npz where it came back: at
the generated shapes it did not at gemma2, and every bound is then taken as 0, so that the choice is 2^-8, as stage 10
chose there on the GPU). Uses session 56's emulate_orders.py for the blocks, R_k and the choice on the quarter grid.
Orders (a row needs tile T when its level is at most 32, m_iT - LSE_i >= ln 2^-12, as stage 10's grouping):
  count          main's: the count of needed tiles, most first
  rarest         the rarest needed tile (fewest rows needing it, then the index), then the count (commit 6a9574a)
  bucket_rarest  floor(log2(count + 1)), most first, then the rarest needed tile, then the count (commit 972ad68)
  regroup        bucket_rarest, eps chosen over its blocks, then bucket_rarest again with the need tested 1.5
                 exponents below that eps (12 levels; at most the dump's last, 2^-17), eps chosen again (branch
                 wip/s57-regroup)
--thresholds adds `rarest` with the need tested at 2^-9 ... 2^-15.75 instead of 2^-12.
First it checks the count order against the dump's own kept pairs per candidate: exit 1 if they differ.
"""
import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "session56_h200"))
import emulate_orders as eo  # noqa: E402

NEED_LEVEL = 32  # levels count eighths of an exponent from 2^-8: 32 is 2^-12
REGROUP_LEVELS = 12  # stage 10's kRegroupExponents, 1.5, in eighths


def bucketed(level, valid, need_level):
    need = (level <= need_level) & valid[:, None]
    count = need.sum(axis=1)
    bucket = np.floor(np.log2(count + 1.0)).astype(np.int64)
    return eo.stable_order([-bucket, eo.rarest_hot_tile(need), -count], valid)


def orders_of(level, valid, thresholds):
    need = (level <= NEED_LEVEL) & valid[:, None]
    count = need.sum(axis=1)
    rarest = eo.rarest_hot_tile(need)
    out = {"count": eo.stable_order([-count], valid),
           "rarest": eo.stable_order([rarest, -count], valid),
           "bucket_rarest": bucketed(level, valid, NEED_LEVEL)}
    if thresholds:
        for lv in range(8, 64, 2):
            r = eo.rarest_hot_tile((level <= lv) & valid[:, None])
            out[f"rarest_at_2^-{8 + lv / 8:g}"] = eo.stable_order([r, -count], valid)
    return out


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("pairs", nargs="+")
    p.add_argument("--budget", type=float, default=0.022)
    p.add_argument("--thresholds", action="store_true")
    p.add_argument("--out")
    a = p.parse_args(argv)
    result = {}
    for path in map(Path, a.pairs):
        meta = json.loads(path.with_suffix(".json").read_text())
        with np.load(path) as f:
            level, valid = f["level"], f["valid"].astype(bool)
        bound_path = path.with_name(path.name.replace("_pairs.npz", "_bound.npz"))
        with_bound = bound_path.exists()
        if with_bound:
            with np.load(bound_path) as f:
                bound = eo.bf16_to_float(f["bound"])
        else:
            bound = np.zeros(level.shape, dtype=np.float32)
        cand = meta["candidates"]
        quarter = list(range(0, cand, 2))
        orders = orders_of(level, valid, a.thresholds)
        r_k, _, _ = eo.evaluate(level, bound, valid, orders["bucket_rarest"], cand)
        first = eo.choose(r_k, quarter, a.budget)
        orders["regroup"] = bucketed(level, valid, min(first + REGROUP_LEVELS, cand - 1))
        _, kept_k, _ = eo.evaluate(level, bound, valid, orders["count"], cand)
        if kept_k != meta["count_order"]["kept_k"]:
            print(f"{meta['label']}: the count order does not reproduce the dump's kept pairs: DOES NOT HOLD")
            return 1
        rows, base = {}, None
        for name, order in orders.items():
            r_k, kept_k, pairs = eo.evaluate(level, bound, valid, order, cand)
            k = eo.choose(r_k, quarter, a.budget)
            rows[name] = {"log2_eps": -(8 + k / 8), "R": r_k[k], "kept": kept_k[k] / pairs}
            base = base if base is not None else rows[name]["kept"]
            rows[name]["kept_vs_count"] = rows[name]["kept"] / base
        print(f"{meta['label']} (budget {a.budget}, quarter grid{'' if with_bound else '; no bound: R taken as 0'}):")
        for name, r in rows.items():
            print(f"  {name:22s} 2^{r['log2_eps']:g} R {r['R']:.4f} kept {100 * r['kept']:.2f}% "
                  f"({r['kept_vs_count']:.3f}x the count order)")
        result[meta["label"]] = {"with_bound": with_bound, "orders": rows}
    if a.out:
        Path(a.out).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
