#!/usr/bin/env python3
"""Stage 09's backward without atomics, drawn on a small made-up kept set.

    /usr/bin/python3 bench/owner_products_figure.py [--out docs/figures/owner_products.png]

A hand-chosen set of kept (token block b, vocabulary tile T) pairs, 6 token
blocks by 10 sorted tiles, with the cases the stage meets: a tile with many
kept blocks (the sorted vocabulary's head), tiles with none, a block with
several tiles. No GPU, no data: the figure shows the bookkeeping only.

The slots are numbered as kept_tiles_from_flags and fill_slots_kernel
(stages/09_deterministic_products/kept_tiles.cu) number them: slot offsets
are the running sum of each tile's kept count, and inside a tile the kept
token blocks take consecutive slots, ascending. The chunks are those of
backward_to_accumulator (deterministic_products.cu): from the first tile not
yet done, take one tile, then the next ones while the chunk's kept S tiles
still fit the slots (here a made-up capacity of 6).

The figure shows (a) the pair grid, each kept pair numbered by its slot;
(b) the owners: dC's owner of one tile (dc_products_bf16) adds S_bTᵀ·E_b
down its column in slot order, dE's owner of one block (de_products_bf16)
adds S_bT·C_T along its row, tiles ascending, one chunk after the other;
the tiles without a kept pair get their dC rows from dc_unkept_rows;
(c) the chunks, as bands of consecutive tiles over the grid.

The script asserts what the figure claims: slots are numbered tile by tile,
token blocks ascending, from 0 without gaps; each kept pair has exactly one
slot; each tile's dC rows and each (chunk, token block)'s dE adds have
exactly one owner; every block's adds, chunk after chunk, are its kept tiles
ascending; chunks are consecutive tiles that cover every tile once, never
split a tile, and hold at most the capacity's slots. Exit 1 when one fails
(DOES NOT HOLD); 2 on a bad flag. Needs numpy and matplotlib.
"""

import sys
from pathlib import Path

import figure_cli

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "docs" / "figures" / "owner_products.png"
SLOTS_PER_CHUNK = 6   # made up: a chunk's slot capacity (the stage's plan.chunk_slots())
DC_TILE = 1           # the tile whose dC owner is drawn
DE_BLOCK = 2          # the token block whose dE owner is drawn

# The made-up kept set: for each sorted vocabulary tile T, its kept token blocks.
KEPT_BLOCKS = {
    0: [0, 1, 2, 4, 5],
    1: [0, 2, 3],
    2: [1, 4],
    4: [2],
    6: [2, 5],
    8: [0],
}
TOKEN_BLOCKS, TILES = 6, 10


PROG = "owner_products_figure.py"
Parser = figure_cli.parser_class(PROG)


def fail(message, status=2):
    figure_cli.fail(PROG, message, status)


def keep_flags():
    """flags[T][b], laid out as the stage's keep flags [tiles][token blocks]."""
    flags = [[False] * TOKEN_BLOCKS for _ in range(TILES)]
    for tile, blocks in KEPT_BLOCKS.items():
        for b in blocks:
            flags[tile][b] = True
    return flags


def number_slots(flags):
    """kept_tiles_from_flags + fill_slots_kernel: offsets[T] = kept pairs before tile T;
    inside a tile, kept blocks ascending. Returns offsets, slot_block, slot_tile, slot_of[b][T] (-1: dropped)."""
    tiles, blocks = len(flags), len(flags[0])
    offsets = [0]
    for t in range(tiles):
        offsets.append(offsets[-1] + sum(flags[t]))
    slot_block, slot_tile = [None] * offsets[-1], [None] * offsets[-1]
    slot_of = [[-1] * tiles for _ in range(blocks)]
    for t in range(tiles):
        slot = offsets[t]
        for b in range(blocks):
            if flags[t][b]:
                slot_block[slot], slot_tile[slot], slot_of[b][t] = b, t, slot
                slot += 1
    return offsets, slot_block, slot_tile, slot_of


def make_chunks(offsets, capacity):
    """backward_to_accumulator's loop: [first, last) tile ranges."""
    tiles = len(offsets) - 1
    chunks, first = [], 0
    while first < tiles:
        last = first + 1
        while last < tiles and offsets[last + 1] - offsets[first] <= capacity:
            last += 1
        chunks.append((first, last))
        first = last
    return chunks


def owners(flags, chunks):
    """Per chunk: dC items (tile, its kept blocks in slot order), dc_unkept_rows' tiles,
    dE items (block, its kept tiles in the chunk, ascending)."""
    per_chunk = []
    for first, last in chunks:
        dc = [(t, [b for b in range(len(flags[t])) if flags[t][b]]) for t in range(first, last) if any(flags[t])]
        unkept = [t for t in range(first, last) if not any(flags[t])]
        de = [(b, [t for t in range(first, last) if flags[t][b]]) for b in range(len(flags[0]))]
        per_chunk.append({"dc": dc, "unkept": unkept, "de": [(b, ts) for b, ts in de if ts]})
    return per_chunk


def claims(flags, offsets, slot_block, slot_tile, slot_of, chunks, per_chunk, capacity):
    """(holds, what) for each thing the figure shows."""
    tiles, blocks = len(flags), len(flags[0])
    kept = [(t, b) for t in range(tiles) for b in range(blocks) if flags[t][b]]
    pairs = list(zip(slot_tile, slot_block))
    slots_of_kept = sorted(slot_of[b][t] for t, b in kept)
    covered = [t for first, last in chunks for t in range(first, last)]
    dc_tiles = sorted([t for c in per_chunk for t, _ in c["dc"]] + [t for c in per_chunk for t in c["unkept"]])
    de_keys = [(i, b) for i, c in enumerate(per_chunk) for b, _ in c["de"]]
    de_order = {b: [t for c in per_chunk for bb, ts in c["de"] if bb == b for t in ts] for b in range(blocks)}
    dc_order = all([slot_of[b][t] for b in bs] == list(range(offsets[t], offsets[t + 1]))
                   for c in per_chunk for t, bs in c["dc"])
    return [
        (pairs == kept, "slots are numbered tile by tile, token blocks ascending, from 0 without gaps"),
        (slots_of_kept == list(range(len(kept))) and all(slot_of[b][t] == -1 for t in range(tiles)
                                                        for b in range(blocks) if not flags[t][b]),
         "each kept pair has exactly one slot, each dropped pair none"),
        (dc_tiles == list(range(tiles)), "each tile's dC rows have exactly one owner (products or dc_unkept_rows)"),
        (dc_order, "dC's owner of a tile adds its kept blocks in slot order"),
        (len(de_keys) == len(set(de_keys)), "each (chunk, token block) has at most one dE owner"),
        (all(de_order[b] == [t for t in range(tiles) if flags[t][b]] for b in range(blocks)),
         "each block's dE adds, chunk after chunk, are its kept tiles ascending"),
        (covered == list(range(tiles)), "chunks are consecutive tiles covering every tile once (no tile split)"),
        (all(last - first == 1 or offsets[last] - offsets[first] <= capacity for first, last in chunks),
         f"every chunk of several tiles holds at most {capacity} slots"),
        (all(last == tiles or offsets[last + 1] - offsets[first] > capacity for first, last in chunks),
         "every chunk takes as many tiles as fit"),
    ]


def draw(out, flags, offsets, slot_of, chunks, per_chunk, capacity):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyArrowPatch, Patch, Rectangle

    tiles, blocks = len(flags), len(flags[0])
    kept_color, dc_color, de_color, note_color = "#fdd49e", "#d95f02", "#1f78b4", "#444444"
    chunk_tints = ["#e8eef8", "#f1eaf8", "#e6f5ea"]
    x0, y0 = 2.3, 3.45  # the grid's top-left corner, in cell units (y grows downwards)
    width, height = 14.8, 15.25

    fig, ax = figure_cli.drawing_area(plt, width, height)
    ax.text(width / 2, 0.45, "Stage 09's backward: kept pairs in slots, one owner per output tile",
            ha="center", va="center", fontsize=13, weight="bold")
    ax.text(width / 2, 1.0, f"a made-up kept set: {blocks} token blocks × {tiles} sorted vocabulary tiles, "
            f"{capacity} slots per chunk", ha="center", va="center", fontsize=10.5, color=note_color)

    # (c) chunks: tinted bands behind the grid, brackets over it, a line between two chunks
    for i, (first, last) in enumerate(chunks):
        left, right = x0 + first, x0 + last
        ax.add_patch(Rectangle((left, y0 - 1.05), last - first, blocks + 1.05, color=chunk_tints[i % 3], zorder=0))
        ax.plot([left + 0.08, left + 0.08, right - 0.08, right - 0.08], [y0 - 0.95, y0 - 1.1, y0 - 1.1, y0 - 0.95],
                color="#555555", lw=1.2)
        slots = f"slots {offsets[first]}–{offsets[last] - 1}" if offsets[last] - offsets[first] > 1 \
            else f"slot {offsets[first]}"
        used = offsets[last] - offsets[first]
        ax.text((left + right) / 2, y0 - 1.25, f"chunk {i + 1}\n{slots}\n({used} of {capacity})", ha="center",
                va="bottom", fontsize=10,
                color="#222222", linespacing=1.3)
        if first > 0:
            ax.plot([left, left], [y0 - 1.0, y0 + blocks + 0.35], color="#555555", lw=1.6, ls=(0, (4, 2)), zorder=4)

    # tile and block labels
    for t in range(tiles):
        ax.text(x0 + t + 0.5, y0 - 0.45, f"$C_{{{t}}}$", ha="center", va="center", fontsize=12)
    ax.text(x0 - 0.15, y0 - 0.45, "tile T", ha="right", va="center", fontsize=10.5)
    for b in range(blocks):
        ax.text(x0 - 0.15, y0 + b + 0.5, f"block {b}  $E_{{{b}}}$", ha="right", va="center", fontsize=11)

    # (a) the pair grid
    for t in range(tiles):
        empty = not any(flags[t])
        for b in range(blocks):
            x, y = x0 + t, y0 + b
            if flags[t][b]:
                ax.add_patch(Rectangle((x, y), 1, 1, facecolor=kept_color, edgecolor="#7f7f7f", lw=0.8, zorder=2))
                ax.text(x + 0.5, y + 0.5, str(slot_of[b][t]), ha="center", va="center", fontsize=13,
                        weight="bold", zorder=5)
            else:
                ax.add_patch(Rectangle((x, y), 1, 1, facecolor="#f0f0f0" if empty else "white",
                                       hatch="///" if empty else None, edgecolor="#bdbdbd", lw=0.6, zorder=1))

    # (b) dC's owner of one tile: down its column in slot order
    column = [b for b in range(blocks) if flags[DC_TILE][b]]
    xc = x0 + DC_TILE
    ax.add_patch(Rectangle((xc, y0), 1, blocks, fill=False, edgecolor=dc_color, lw=3, zorder=6))
    for b0, b1 in zip(column, column[1:]):
        ax.add_patch(FancyArrowPatch((xc + 0.84, y0 + b0 + 0.72), (xc + 0.84, y0 + b1 + 0.28),
                                     arrowstyle="-|>", mutation_scale=11, color=dc_color, lw=1.6, zorder=7))
    ax.add_patch(FancyArrowPatch((xc + 0.5, y0 + blocks + 0.05), (xc + 0.5, y0 + blocks + 0.8),
                                 arrowstyle="-|>", mutation_scale=14, color=dc_color, lw=2.2, zorder=7))
    ax.text(xc + 0.5, y0 + blocks + 1.15, f"$dC_{{T={DC_TILE}}}$", ha="center", va="center",
            fontsize=14, color=dc_color)
    # dE's owner of one block: along its row, tiles ascending
    row = [t for t in range(tiles) if flags[t][DE_BLOCK]]
    yr = y0 + DE_BLOCK
    ax.add_patch(Rectangle((x0, yr), tiles, 1, fill=False, edgecolor=de_color, lw=3, zorder=6))
    for t0, t1 in zip(row, row[1:]):
        ax.add_patch(FancyArrowPatch((x0 + t0 + 0.72, yr + 0.84), (x0 + t1 + 0.28, yr + 0.84),
                                     arrowstyle="-|>", mutation_scale=11, color=de_color, lw=1.6, zorder=7))
    ax.add_patch(FancyArrowPatch((x0 + tiles + 0.05, yr + 0.5), (x0 + tiles + 0.85, yr + 0.5),
                                 arrowstyle="-|>", mutation_scale=14, color=de_color, lw=2.2, zorder=7))
    ax.text(x0 + tiles + 0.95, yr + 0.5, f"$dE_{{{DE_BLOCK}}}$", ha="left", va="center", fontsize=14,
            color=de_color)

    # the legend, beside dC's label
    unkept = [t for c in per_chunk for t in c["unkept"]]
    legend = [
        Patch(facecolor=kept_color, edgecolor="#7f7f7f", label="kept pair: its $S_{b,T}$ is\nrecomputed once, into slot #"),
        Patch(facecolor="white", edgecolor="#bdbdbd", label="dropped pair: no S\n(the tail correction covers it)"),
        Patch(facecolor="#f0f0f0", edgecolor="#bdbdbd", hatch="///", label="tile with no kept pair"),
        Patch(facecolor="none", edgecolor=dc_color, lw=2.5, label=f"dC's owner of tile {DC_TILE}"),
        Patch(facecolor="none", edgecolor=de_color, lw=2.5, label=f"dE's owner of block {DE_BLOCK}"),
        Patch(facecolor=chunk_tints[1], edgecolor="none", label=f"a chunk: consecutive tiles\nwhose slots fit ({capacity} here)"),
    ]
    ax.legend(handles=legend, loc="upper left", ncol=2, fontsize=10, frameon=False, handlelength=1.6,
              handleheight=1.3, labelspacing=0.6, columnspacing=2.0,
              bbox_to_anchor=((xc + 1.6) / width, 1 - (y0 + blocks + 0.2) / height))

    # the sums, spelled out
    def s_terms(pairs, transpose):
        if transpose:
            return " + ".join(f"S_{{{b},{t}}}^T E_{{{b}}}" for b, t in pairs)
        return " + ".join(f"S_{{{b},{t}}} C_{{{t}}}" for b, t in pairs)

    dc_slots = ", ".join(str(slot_of[b][DC_TILE]) for b in column)
    chunk_sums = [ts for c in per_chunk for b, ts in c["de"] if b == DE_BLOCK]
    de_math = r"\ \|\ ".join(s_terms([(DE_BLOCK, t) for t in ts], False) for ts in chunk_sums)
    de_slots = " | ".join(", ".join(str(slot_of[DE_BLOCK][t]) for t in ts) for ts in chunk_sums)
    lines = [
        (dc_color, f"dC's owner of tile {DC_TILE} (dc_products_bf16):   "
                   f"$dC_{{T={DC_TILE}}} = {s_terms([(b, DC_TILE) for b in column], True)}$ + tail share + target terms",
         f"slots {dc_slots}, in slot order; T's dC rows written once, in bf16"),
        (de_color, f"dE's owner of block {DE_BLOCK} (de_products_bf16):   $dE_{{{DE_BLOCK}}}$ += ${de_math}$",
         f"slots {de_slots}: tiles ascending; | separates chunks: one owner per chunk, chunks in order"),
        ("#555555", f"tiles {', '.join(map(str, unkept))}, no kept pair (dc_unkept_rows):   "
                    r"dC rows = tail share $G_T/|T|$ + target terms $a_i E_i$",
         "no S tile, no slot, no product"),
    ]
    y = y0 + blocks + 2.45
    for color, first_line, second_line in lines:
        ax.text(0.3, y, first_line, ha="left", va="center", fontsize=11, color=color)
        ax.text(0.75, y + 0.48, second_line, ha="left", va="center", fontsize=10, color=note_color)
        y += 1.2
    figure_cli.save_png(plt, fig, out)


def main(argv):
    parser = Parser(description="Stage 09's slots, owners and chunks on a made-up kept set, drawn (no GPU).")
    figure_cli.add_out_flag(parser, DEFAULT_OUT, REPO)
    args = parser.parse_args(argv)
    out = figure_cli.checked_png(PROG, args.out)
    figure_cli.require_plotting(PROG)

    flags = keep_flags()
    offsets, slot_block, slot_tile, slot_of = number_slots(flags)
    chunks = make_chunks(offsets, SLOTS_PER_CHUNK)
    per_chunk = owners(flags, chunks)
    draw(out, flags, offsets, slot_of, chunks, per_chunk, SLOTS_PER_CHUNK)
    print(f"{out}: {len(slot_block)} kept pairs of {TOKEN_BLOCKS * TILES}, {len(chunks)} chunks "
          f"{[(first, last) for first, last in chunks]}")

    return figure_cli.verdict(PROG, claims(flags, offsets, slot_block, slot_tile, slot_of, chunks, per_chunk,
                                           SLOTS_PER_CHUNK))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
