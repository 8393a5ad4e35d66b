// The tile engine's unit schedules (common/tile/units.cuh), on the host: the
// pairs that clusters of two walk cover every unit exactly once, and the two
// units of a pair share their vocabulary tiles.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <tuple>

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

}  // namespace
