#!/usr/bin/env python3
"""emulate_drop.py (session 51, for the next device session): what stage 10's drop would cost in error at each eps,
and what its decision's measures say there, computed from one shape's inputs in fp32 with PyTorch, beside eager
PyTorch's own error on the same inputs. The data for choosing a budget other than the mean dropped mass.

    python3 docs/profiles/session51_h200/emulate_drop.py --self-check
    python3 docs/profiles/session51_h200/emulate_drop.py --shapes lm128k,lm128k_s30 --out emulated.json

It follows stage 10's sparse plan (stages 08-10's READMEs): the vocabulary sorted by key_j = C_j·ΣE (valid rows),
on the key's top 16 bits, descending, ties in index order; tiles of 128 sorted entries; the rows with a gradient
sorted by how many tiles hold an entry >= 2^-12 (most first), in blocks of 128 rows; a (block, tile) pair dropped at
eps when every row's m_iT - LSE_i (m_iT the tile's largest logit) is below ln eps. A dropped pair's rows get the tail
correction: M_iT/|T| at every entry of the tile (M_iT its mass less the target's own entry), the target's term exact.
Per shape and eps it writes: the kept share of the pairs; D, the mean dropped mass per row with a gradient (the
budget's measure); R, the mean of the correction's residual bound M_iT·(1 - M_iT/(|T|·p_max,iT)) (half the largest
L1 residual a tile of mass M_iT and largest entry p_max can leave: 0 for a flat tile, M_iT for a single entry);
the residual's exact squared L2 norm per row and its bound 2·p_max·R (the drop's noise, to set against eager's,
about u²·Σ_j p_ij²·z_ij² per row with u = 2^-9/√3, written per shape exactly and from the statistics alone);
drop_dE, drop_dC: the relative L2 error that the drop and correction alone add to dE and dC (fp32 arithmetic);
bf16_dE, bf16_dC: the same gradient made as stage 10 rounds it, roughly (S rounded to bf16, bf16 products with fp32
sums, one rounding of the output; not stage 10's own order of sums). And per shape: eager PyTorch's errors (bf16
logits, F.cross_entropy in fp32, as bench/peers.py times it) and the logits' scale under the softmax.
"""
import argparse
import datetime
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "..", "..", "..", "bench")
sys.path.insert(0, os.path.abspath(BENCH))
import peers  # noqa: E402  (input folders, dims and loading, as bench/peers.py reads them)

TILE = 128  # sorted vocabulary entries per tile (bf16)
BLOCK = 128  # rows per token block
GROUPING_EXPONENT = 12
DEFAULT_EXPONENTS = "8,9,10,11,12,13,14,15,16,17,18,20"


def rel_l2(torch, x, ref):
    """||x - ref|| / ||ref|| in float64, a block of rows at a time."""
    num = den = 0.0
    for i in range(0, ref.shape[0], 8192):
        r = ref[i:i + 8192].double()
        num += float((x[i:i + 8192].double() - r).pow(2).sum())
        den += float(r.pow(2).sum())
    return math.sqrt(num / den) if den > 0 else float("nan")


def vocabulary_order(torch, ef, cf, valid):
    """Stage 08's order: key_j = C_j·ΣE over the valid rows, its top 16 bits, descending, stable."""
    key = (cf @ ef[valid].sum(0)).contiguous()
    top = (key.view(torch.int32) & -65536).view(torch.float32)
    return torch.sort(top, descending=True, stable=True).indices


def emulate(torch, F, e, c, t, exponents, self_check=False):
    torch.backends.cuda.matmul.allow_tf32 = False
    n, d = e.shape
    v = c.shape[0]
    dev = e.device
    ef, cf = e.float(), c.float()
    valid = t >= 0
    rows_g = int(valid.sum())
    g = valid.float() / rows_g  # mean reduction, upstream 1
    tc = t.clamp(min=0)
    rows = torch.arange(n, device=dev)

    z = ef @ cf.T
    lse = torch.logsumexp(z, 1)
    p = torch.exp(z - lse[:, None])
    ez, ez2 = (p * z).sum(1), (p * z * z).sum(1)
    p2z2 = (p * p * z * z).sum(1)  # eager's rounding noise per row is about u²·Σ_j p_ij²·z_ij², u = 2^-9/√3
    p_t = p[rows, tc]
    scale = {"rms_logit_under_p": float(ez2.sqrt()[valid].mean()),
             "p2z2_per_row": float(p2z2[valid].mean()),
             "spread_under_p": float((ez2 - ez * ez).clamp(min=0).sqrt()[valid].mean()),
             "lse": float(lse[valid].mean()), "target_logit": float(z[rows, tc][valid].mean()),
             "target_p": float(p_t[valid].mean())}

    # Exact gradients: U = P - Y on the rows with a gradient.
    u = p.clone()
    u[rows[valid], tc[valid]] -= 1.0
    u[~valid] = 0.0
    de_exact = g[:, None] * (u @ cf)
    dc_exact = u.T @ (g[:, None] * ef)
    del u

    # Eager PyTorch as peers.py times it.
    eb, cb = e.detach().clone().requires_grad_(True), c.detach().clone().requires_grad_(True)
    loss = F.cross_entropy((eb @ cb.T).float(), t)
    loss.backward()
    eager = {"dE": rel_l2(torch, eb.grad.float(), de_exact), "dC": rel_l2(torch, cb.grad.float(), dc_exact)}
    del eb, cb, loss

    # Sorted tiles: each row's mass and largest logit per tile.
    order = vocabulary_order(torch, ef, cf, valid)
    rank = torch.empty_like(order)
    rank[order] = torch.arange(v, device=dev)
    tiles = (v + TILE - 1) // TILE
    vp = tiles * TILE
    ps = torch.zeros(n, vp, device=dev)
    ps[:, :v] = p[:, order]
    del p
    zs = torch.full((n, vp), -math.inf, device=dev)
    zs[:, :v] = z[:, order]
    del z
    m = zs.view(n, tiles, TILE).amax(2)
    del zs
    width = torch.full((tiles,), float(TILE), device=dev)
    width[-1] = v - (tiles - 1) * TILE
    tpos = rank[tc]
    ttile = tpos // TILE
    mass = ps.view(n, tiles, TILE).sum(2)
    # The same noise from the statistics alone: Σ_T p_max,iT·(tile mass)·m_iT², the tile's largest entry standing
    # for its others.
    pmax = torch.exp(m - lse[:, None])
    scale["p2z2_from_statistics_per_row"] = float((pmax * mass * m * m).sum(1)[valid].mean())
    mass[rows, ttile] -= p_t
    mass.clamp_(min=0.0)
    mass[~valid] = 0.0
    log_pmax = m - lse[:, None]
    resid = mass * (1.0 - mass / (width[None, :] * pmax)).clamp(min=0.0)

    # Token blocks of grouped rows.
    count = (log_pmax >= math.log(2.0 ** -GROUPING_EXPONENT)).sum(1)
    row_key = torch.where(valid, tiles - count, torch.full_like(count, tiles + 1))
    token_order = torch.sort(row_key, stable=True).indices
    blocks = (n + BLOCK - 1) // BLOCK
    lp = torch.where(valid[:, None], log_pmax, torch.full_like(log_pmax, -math.inf))
    lp_sorted = torch.full((blocks * BLOCK, tiles), -math.inf, device=dev)
    lp_sorted[:n] = lp[token_order]
    pair_max = lp_sorted.view(blocks, BLOCK, tiles).amax(1)
    del lp, lp_sorted
    block_of_row = torch.empty(n, dtype=torch.long, device=dev)
    block_of_row[token_order] = torch.arange(n, device=dev) // BLOCK

    c_sorted = torch.zeros(vp, d, device=dev)
    c_sorted[:v] = cf[order]
    ge = g[:, None] * ef
    de_norm = float(de_exact.double().pow(2).sum().sqrt())
    dc_norm = float(dc_exact.double().pow(2).sum().sqrt())
    u_sorted = ps.clone()  # U in the sorted order, for the bf16 emulation
    u_sorted[rows[valid], tpos[valid]] -= 1.0
    u_sorted[~valid] = 0.0
    column_in_v = (torch.arange(vp, device=dev) < v).float()
    results = []
    for ex in exponents:
        dropped_pair = pair_max < math.log(2.0 ** -ex)
        dropped = dropped_pair[block_of_row] & valid[:, None]
        dropped_f = dropped.float()
        # The residual of the correction: M/|T| - p at every entry of a dropped pair, M/|T| at its target.
        corr = (mass / width[None, :]) * dropped_f
        du = corr[:, :, None].expand(n, tiles, TILE).reshape(n, vp) * column_in_v[None, :]
        du -= ps * dropped_f[:, :, None].expand(n, tiles, TILE).reshape(n, vp)
        hit = valid & dropped[rows, ttile]
        du[rows[hit], tpos[hit]] += p_t[hit]
        if self_check:  # the correction moves no mass within a dropped tile (where M was not clamped)
            sums = du.view(n, tiles, TILE).sum(2)
            assert float(sums.abs().max()) < 1e-5, "a dropped tile's residual does not sum to 0"
        residual_l2sq = float(du.pow(2).sum()) / rows_g  # Σ_j ε_ij², at most 2·p_max·R per dropped tile
        dde = g[:, None] * (du @ c_sorted)
        ddc = du.T @ ge
        drop_de = float(dde.double().pow(2).sum().sqrt()) / de_norm
        drop_dc = float(ddc.double().pow(2).sum().sqrt()) / dc_norm
        del dde, ddc
        # Stage 10's arithmetic, roughly: S = g·(U + dU) in bf16, bf16 products, fp32 sums, one rounding.
        s = (g[:, None] * (u_sorted + du)).to(torch.bfloat16)
        de_b = (s @ c_sorted.to(torch.bfloat16)).float()
        dc_b = (s.T @ e).float()[:v]
        dc_b_vocab = torch.empty_like(dc_b)
        dc_b_vocab[order] = dc_b
        bf16_de = rel_l2(torch, de_b, de_exact)
        bf16_dc = rel_l2(torch, dc_b_vocab, dc_exact)
        del du, s, de_b, dc_b, dc_b_vocab
        kept = 1.0 - float(dropped_pair.float().mean())
        results.append({"eps_exponent": ex, "kept_pairs": kept,
                        "plan_at_this_share": "dense" if kept > 1.0 / 3.0 else "sparse",
                        "dropped_mass_per_row": float((mass * dropped_f).sum()) / rows_g,
                        "residual_bound_per_row": float((resid * dropped_f).sum()) / rows_g,
                        "residual_l2sq_per_row": residual_l2sq,
                        "residual_l2sq_bound_per_row": float((2.0 * pmax * resid * dropped_f).sum()) / rows_g,
                        "drop_dE": drop_de, "drop_dC": drop_dc, "bf16_dE": bf16_de, "bf16_dC": bf16_dc})
    return {"n": n, "d": d, "v": v, "rows_with_gradient": rows_g, "scale": scale, "eager": eager, "eps": results}


def self_check(torch, F):
    """A small random problem with odd sizes: the identities that hold whatever the data."""
    gen = torch.Generator(device="cuda").manual_seed(51)
    n, d, v = 300, 64, 1000
    e = (torch.randn(n, d, device="cuda", generator=gen) * 0.5).to(torch.bfloat16)
    c = (torch.randn(v, d, device="cuda", generator=gen) * 0.5).to(torch.bfloat16)
    t = torch.randint(0, v, (n,), device="cuda", generator=gen)
    t[::7] = -100
    out = emulate(torch, F, e, c, t, [1, 4, 8, 12, 60], self_check=True)
    rows = out["eps"]
    for a, b in zip(rows, rows[1:]):  # a larger eps drops everything a smaller one drops
        assert a["dropped_mass_per_row"] >= b["dropped_mass_per_row"] - 1e-7, "the mass is not monotone in eps"
        assert a["kept_pairs"] <= b["kept_pairs"], "the kept share is not monotone in eps"
    for r in rows:
        assert r["residual_bound_per_row"] <= r["dropped_mass_per_row"] + 1e-7, "the bound exceeds the mass"
        assert r["residual_l2sq_per_row"] <= r["residual_l2sq_bound_per_row"] * (1 + 1e-4) + 1e-12, "the L2 bound fails"
    last = rows[-1]
    assert last["kept_pairs"] == 1.0 and last["drop_dE"] == 0.0 and last["drop_dC"] == 0.0, "eps 2^-60 dropped"
    assert rows[0]["drop_dE"] > 0.0 and rows[0]["kept_pairs"] < 1.0, "eps 1/2 dropped nothing"
    assert 0.0 < out["eager"]["dE"] < 0.05 and 0.0 < out["eager"]["dC"] < 0.05, "eager's errors out of range"
    assert last["bf16_dE"] < 0.02 and last["bf16_dC"] < 0.02, "the bf16 emulation keeping every pair is off"
    print("emulate_drop self-check passed:", json.dumps(rows[0]), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shapes", default="lm128k,lm128k_s300,lm128k_s100,lm128k_s30")
    parser.add_argument("--lm-data", default=peers.DEFAULT_LM_DATA)
    parser.add_argument("--inputs", default="/tmp/cce-inputs")
    parser.add_argument("--exponents", default=DEFAULT_EXPONENTS)
    parser.add_argument("--out", default="emulated_drop.json")
    parser.add_argument("--self-check", action="store_true")
    args = parser.parse_args()
    import torch
    import torch.nn.functional as F
    if not torch.cuda.is_available():
        print("emulate_drop: needs a CUDA device", file=sys.stderr)
        return 77
    if args.self_check:
        self_check(torch, F)
        return 0
    exponents = [int(x) for x in args.exponents.split(",")]
    out = {"context": {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                       "commit": peers.git_commit(), "what": __doc__.split("\n")[0]}, "shapes": {}}
    for shape in args.shapes.split(","):
        folder = peers.input_folder(args, shape)
        dims = peers.lm_shape_dims(folder) if shape in peers.LM_SHAPES else peers.SHAPES[shape]
        e, c, t = peers.load_inputs(torch, folder, dims)
        out["shapes"][shape] = emulate(torch, F, e, c, t, exponents)
        s = out["shapes"][shape]
        print(f"{shape}: eager dE {s['eager']['dE']:.3e} dC {s['eager']['dC']:.3e}; scale {s['scale']}", flush=True)
        for r in s["eps"]:
            print(f"  2^-{r['eps_exponent']}: kept {r['kept_pairs']:.4f} D {r['dropped_mass_per_row']:.4f} "
                  f"R {r['residual_bound_per_row']:.4f} L2sq {r['residual_l2sq_per_row']:.2e} "
                  f"(bound {r['residual_l2sq_bound_per_row']:.2e}) drop dE {r['drop_dE']:.2e} dC {r['drop_dC']:.2e} "
                  f"bf16 dE {r['bf16_dE']:.2e} dC {r['bf16_dC']:.2e}", flush=True)
        del e, c, t
        torch.cuda.empty_cache()
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
