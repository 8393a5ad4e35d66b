// The tile engine's unit schedules (common/tile/units.cuh), on the host: the
// pairs that clusters of two walk cover every unit exactly once, and the two
// units of a pair share their vocabulary tiles; the order in which the
// pipeline gathers C's tiles is the order in which a walk first reads them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "common/tile/units.cuh"

namespace {

using cce::TileUnits;
using cce::Unit;

TileUnits units_of(int64_t token_blocks, int64_t vocab_tiles, int64_t tiles_per_range, int64_t token_group) {
  TileUnits u;
  u.token_blocks = token_blocks;
  u.vocab_tiles = vocab_tiles;
  u.tiles_per_range = tiles_per_range;
  u.ranges = (vocab_tiles + tiles_per_range - 1) / tiles_per_range;
  u.token_group = token_group;
  return u;
}

TEST(TileUnits, PairsCoverEveryUnitOnceAndShareTheirTiles) {
  for (int64_t token_blocks : {1, 2, 3, 7, 8, 64, 65})
    for (int64_t token_group : {1, 2, 3, 5, 8, 64})
      for (int64_t tiles_per_range : {1, 3, 7}) {
        if (token_group > token_blocks) continue;
        const TileUnits u = units_of(token_blocks, 7, tiles_per_range, token_group);
        std::set<std::tuple<int64_t, int64_t, int64_t>> expected, seen;
        for (int64_t i = 0; i < u.count(); ++i) {
          const Unit unit = u.at(i);
          expected.insert({unit.token_block, unit.tile_begin, unit.tile_end});
        }
        int64_t ghosts = 0;
        for (int64_t p = 0; p < u.pair_count(); ++p) {
          bool ghost0 = true, ghost1 = true;
          const Unit a = u.pair_at(p, 0, &ghost0), b = u.pair_at(p, 1, &ghost1);
          SCOPED_TRACE(testing::Message() << "token blocks " << token_blocks << ", group " << token_group
                                          << ", tiles per range " << tiles_per_range << ", pair " << p);
          EXPECT_FALSE(ghost0) << "the first unit of a pair always exists";
          EXPECT_EQ(a.tile_begin, b.tile_begin);
          EXPECT_EQ(a.tile_end, b.tile_end);
          EXPECT_EQ(b.token_block, ghost1 ? a.token_block : a.token_block + 1);
          EXPECT_TRUE(seen.insert({a.token_block, a.tile_begin, a.tile_end}).second) << "a unit walked twice";
          if (ghost1) ++ghosts;
          else EXPECT_TRUE(seen.insert({b.token_block, b.tile_begin, b.tile_end}).second) << "a unit walked twice";
        }
        EXPECT_EQ(seen, expected);
        EXPECT_EQ(2 * u.pair_count() - ghosts, u.count());
      }
}

// Simulates the walk: index i runs in wave i / stride, a unit reads its tiles
// one after another; each tile's first read is (wave, place in its unit). The
// gather's order must list every tile once, in nondecreasing first reads.
TEST(TileUnits, GatherOrderIsTheWalksFirstReads) {
  for (bool pairs : {false, true})
    for (int64_t token_blocks : {1, 3, 8, 64, 65})
      for (int64_t token_group : {1, 3, 8, 32, 64})
        for (int64_t vocab_tiles : {1, 7, 50})
          for (int64_t tiles_per_range : {1, 3, 7})
            for (unsigned stride : {1u, 2u, 5u, 66u}) {
              if (token_group > token_blocks) continue;
              const TileUnits u = units_of(token_blocks, vocab_tiles, tiles_per_range, token_group);
              SCOPED_TRACE(testing::Message() << (pairs ? "pairs" : "blocks") << ", token blocks " << token_blocks
                                              << ", group " << token_group << ", tiles " << vocab_tiles
                                              << " per range " << tiles_per_range << ", stride " << stride);
              const std::pair<int64_t, int64_t> never{INT64_MAX, INT64_MAX};
              std::vector<std::pair<int64_t, int64_t>> first(static_cast<size_t>(vocab_tiles), never);
              const int64_t walked = pairs ? u.pair_count() : u.count();
              for (int64_t i = 0; i < walked; ++i) {
                bool ghost = false;
                const Unit unit = pairs ? u.pair_at(i, 0, &ghost) : u.at(i);
                for (int64_t t = unit.tile_begin; t < unit.tile_end; ++t)
                  first[t] = std::min(first[t], std::make_pair(static_cast<int64_t>(i / stride), t - unit.tile_begin));
              }
              const unsigned per_range = u.first_reads_per_range(pairs);
              const unsigned slots = static_cast<unsigned>(u.ranges * u.tiles_per_range);
              std::vector<int64_t> order;
              for (unsigned q = 0; q < slots; ++q) {
                const int tile = u.tile_in_first_read_order(q, per_range, stride);
                ASSERT_GE(tile, 0) << "slot " << q << " of " << slots;
                if (tile < vocab_tiles) order.push_back(tile);
              }
              EXPECT_EQ(u.tile_in_first_read_order(slots, per_range, stride), -1);
              std::vector<int64_t> sorted = order, all(static_cast<size_t>(vocab_tiles));
              std::sort(sorted.begin(), sorted.end());
              for (int64_t t = 0; t < vocab_tiles; ++t) all[t] = t;
              ASSERT_EQ(sorted, all) << "every tile exactly once";
              for (size_t k = 1; k < order.size(); ++k)
                EXPECT_LE(first[order[k - 1]], first[order[k]])
                    << "tile " << order[k] << " is gathered after tile " << order[k - 1] << " but read first";
            }
}

}  // namespace
