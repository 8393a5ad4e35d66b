// How a fused kernel's work is cut into units and ordered.
//
// The logits E·Cᵀ are computed tile by tile: kBM rows of E (a token block)
// times kBN rows of C (a vocabulary tile). A unit is one token block and a
// range of consecutive vocabulary tiles: the work between an epilogue's
// begin() and end(), over which per-row state (a running max and sum) is
// carried. Units are numbered so that units running at the same time read few
// distinct tiles: token blocks are walked in groups of `token_group`, and
// inside a group the token block changes fastest. Blocks running together
// then share each tile of C (and keep the group's tiles of E) in L2.
//
//   ranges = vocab_tiles:  one tile per unit (stages 05-07's 2D grid, with
//                           groups of 8 token blocks);
//   ranges = a few:        long units (stage 03's split vocabulary);
//   the Hopper pipeline:   a balanced choice, see plan_tile_units (tile_path.h).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace cce {

struct Unit {
  int64_t token_block, range, tile_begin, tile_end;
};

struct TileUnits {
  int64_t token_blocks = 0, vocab_tiles = 0;
  int64_t tiles_per_range = 1, ranges = 1;  // ranges = ⌈vocab_tiles / tiles_per_range⌉
  int64_t token_group = 1;                  // token blocks walked together
  int64_t grid = 0;                         // blocks launched (≤ units: persistent when smaller)

  __host__ __device__ int64_t count() const { return token_blocks * ranges; }

  // Unit u: group g of token blocks (the last group may be smaller), then the
  // range, then the token block inside the group.
  __host__ __device__ Unit at(int64_t u) const {
    const GroupPlace g = place(u, token_group * ranges);
    return unit_of(g.first + g.in_group % g.size, g.in_group / g.size);
  }

  // Pairs of units for clusters of two blocks that share each tile of C:
  // token blocks 2j and 2j + 1 of a group, same range, in the order of at().
  // A group of odd size ends in a pair whose second unit is missing: its
  // block runs the first unit's loads as a ghost (*ghost = true), without an
  // epilogue, so that the pair's shared copies still have both halves.
  __host__ __device__ int64_t pair_count() const {
    const int64_t groups = (token_blocks + token_group - 1) / token_group;
    const int64_t last = token_blocks - (groups - 1) * token_group;
    return ((groups - 1) * ((token_group + 1) / 2) + (last + 1) / 2) * ranges;
  }
  __host__ __device__ Unit pair_at(int64_t p, int rank, bool* ghost) const {
    const GroupPlace g = place(p, ((token_group + 1) / 2) * ranges);
    const int64_t half = (g.size + 1) / 2;
    const int64_t block = 2 * (g.in_group % half) + rank;
    *ghost = block >= g.size;
    return unit_of(g.first + (*ghost ? block - 1 : block), g.in_group / half);
  }

  // The vocabulary tiles in the order a walk first reads them (row_gather.cuh
  // gathers them in this order). A walk of `stride` blocks (or clusters, with
  // pairs) starts index i in wave i / stride; the first group of token blocks
  // reaches range r at index r · first_reads_per_range(pairs), so range r first
  // runs in wave r · per_range / stride, tile by tile. Slot q: the ranges that
  // start in one wave, their first tiles, then their second tiles, ...; wave
  // after wave. A slot past the last range's end gives a tile ≥ vocab_tiles;
  // -1 past the last slot (ranges · tiles_per_range of them). 32-bit: the
  // pipeline's producer warps run it in 40 registers.
  __host__ __device__ unsigned first_reads_per_range(bool pairs) const {
    const int64_t group = token_group < token_blocks ? token_group : token_blocks;
    return static_cast<unsigned>(pairs ? (group + 1) / 2 : group);
  }
  __host__ __device__ int tile_in_first_read_order(unsigned q, unsigned per_range, unsigned stride) const {
    const unsigned all_ranges = static_cast<unsigned>(ranges), per = static_cast<unsigned>(tiles_per_range);
    unsigned r_lo = 0;
    for (unsigned wave = 0; r_lo < all_ranges; ++wave) {
      unsigned r_hi = ((wave + 1) * stride + per_range - 1) / per_range;
      if (r_hi > all_ranges) r_hi = all_ranges;
      if (r_hi > r_lo) {
        const unsigned width = r_hi - r_lo, count = width * per;
        if (q < count) return static_cast<int>((r_lo + q % width) * per + q / width);
        q -= count;
        r_lo = r_hi;
      }
    }
    return -1;
  }

  // Where index i of a walk that gives each group of token blocks per_group
  // indices falls: the group's first token block, its size (the last group
  // may be smaller) and i's place inside the group.
  struct GroupPlace {
    int64_t first, size, in_group;
  };
  __host__ __device__ GroupPlace place(int64_t i, int64_t per_group) const {
    const int64_t groups = (token_blocks + token_group - 1) / token_group;
    int64_t group = i / per_group;
    if (group >= groups) group = groups - 1;
    const int64_t first = group * token_group;
    return {first, token_blocks - first < token_group ? token_blocks - first : token_group, i - group * per_group};
  }
  // The unit of one token block over one range of vocabulary tiles.
  __host__ __device__ Unit unit_of(int64_t token_block, int64_t range) const {
    Unit unit;
    unit.token_block = token_block;
    unit.range = range;
    unit.tile_begin = range * tiles_per_range;
    unit.tile_end = unit.tile_begin + tiles_per_range < vocab_tiles ? unit.tile_begin + tiles_per_range : vocab_tiles;
    return unit;
  }
};

}  // namespace cce
