//===- RankGridTest.cpp - Megatron-LM's rank grid, hand-worked ------------===//
//
// Cases worked by hand from Megatron's RankGenerator (parallel_state.py):
// the world is a grid in the order string, leftmost fastest, and a token's
// groups hold the ranks that differ only in its dimensions.
// test/cli/grid.test compares many more shapes with megatron-core itself.
//
//===----------------------------------------------------------------------===//
#include "core/model/RankGrid.h"

#include <gtest/gtest.h>

using namespace hypipe;

namespace {

using Groups = std::vector<std::vector<int64_t>>;

RankGrid gridOf(int64_t tp, int64_t cp, int64_t ep, int64_t dp, int64_t pp,
                std::string_view order) {
  std::string why;
  std::optional<RankGrid> grid =
      RankGrid::make(tp, cp, ep, dp, pp, order, &why);
  EXPECT_TRUE(grid) << why;
  return grid.value_or(RankGrid::megatron(1, 1, 1));
}

/// Why `order` over the sizes is refused ("" when it is not).
std::string refusal(std::string_view order, int64_t tp = 1, int64_t cp = 1,
                    int64_t ep = 1, int64_t dp = 1, int64_t pp = 1) {
  std::string why;
  return RankGrid::make(tp, cp, ep, dp, pp, order, &why) ? "" : why;
}

// tp 2 x dp 2 x pp 2 in Megatron's default order tp-cp-ep-dp-pp: rank =
// tp + 2 dp + 4 pp.
TEST(RankGrid, Tp2Dp2Pp2InTheDefaultOrder) {
  const RankGrid g = RankGrid::megatron(2, 2, 2);
  EXPECT_EQ(g.world(), 8);
  EXPECT_EQ(g.order(), "tp-cp-ep-dp-pp");
  EXPECT_EQ(g.groups("tp"), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(g.groups("dp"), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(g.groups("pp"), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(g.groups("tp-pp"), (Groups{{0, 1, 4, 5}, {2, 3, 6, 7}}));
  EXPECT_EQ(g.groups("tp-dp"), (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(g.groups("dp-pp"), (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  // Sizes of 1: each rank its own group.
  EXPECT_EQ(g.groups("cp"), (Groups{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}));
  // A token's dimensions in any order mean the same groups.
  EXPECT_EQ(g.groups("pp-tp"), g.groups("tp-pp"));
}

// --use-tp-pp-dp-mapping's order tp-cp-ep-pp-dp: rank = tp + 2 pp + 4 dp,
// so the pipeline groups are the data-parallel ones of the default order.
TEST(RankGrid, Tp2Pp2Dp2InTheTpPpDpOrder) {
  const RankGrid g = gridOf(2, 1, 1, 2, 2, kTpPpDpRankOrder);
  EXPECT_EQ(g.groups("tp"), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(g.groups("pp"), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(g.groups("dp"), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(g.groups("tp-pp"), (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}}));
}

// Uneven sizes: tp 2 x cp 3 x dp 2; the groups of tp-cp are numbered by dp.
TEST(RankGrid, UnevenSizesWithContextParallelism) {
  const RankGrid g = gridOf(2, 3, 1, 2, 1, kRankOrder);
  EXPECT_EQ(g.world(), 12);
  EXPECT_EQ(g.groups("cp"),
            (Groups{{0, 2, 4}, {1, 3, 5}, {6, 8, 10}, {7, 9, 11}}));
  EXPECT_EQ(g.groups("tp-cp"),
            (Groups{{0, 1, 2, 3, 4, 5}, {6, 7, 8, 9, 10, 11}}));
  EXPECT_EQ(g.groups("dp-cp"),
            (Groups{{0, 2, 4, 6, 8, 10}, {1, 3, 5, 7, 9, 11}}));
}

// Coordinates: rank 6 of tp 2 x dp 2 x pp 2 is tp 0, dp 1, pp 1.
TEST(RankGrid, CoordinatesAndGroupOf) {
  const RankGrid g = RankGrid::megatron(2, 2, 2);
  EXPECT_EQ(g.coordinate(6, "tp"), 0);
  EXPECT_EQ(g.coordinate(6, "dp"), 1);
  EXPECT_EQ(g.coordinate(6, "pp"), 1);
  EXPECT_EQ(g.withCoordinate(6, "pp", 0), 2);
  EXPECT_EQ(g.withCoordinate(6, "tp", 1), 7);
  EXPECT_EQ(g.groupOf(6, "tp"), (std::vector<int64_t>{6, 7}));
  EXPECT_EQ(g.groupOf(6, "tp-pp"), (std::vector<int64_t>{2, 3, 6, 7}));
  // Every rank is in exactly the group of its coordinates.
  for (int64_t rank = 0; rank < g.world(); ++rank)
    for (int64_t member : g.groupOf(rank, "dp")) {
      EXPECT_EQ(g.coordinate(member, "tp"), g.coordinate(rank, "tp"));
      EXPECT_EQ(g.coordinate(member, "pp"), g.coordinate(rank, "pp"));
    }
}

// As Megatron's RankGenerator: dimensions of size 1 may be left out of the
// order, and are appended in its name_to_size order (tp, pp, dp, ep, cp).
TEST(RankGrid, AnOrderMayLeaveOutSizeOne) {
  const RankGrid g = gridOf(2, 1, 1, 1, 2, "pp-tp");
  EXPECT_EQ(g.order(), "pp-tp-dp-ep-cp");
  EXPECT_EQ(g.groups("tp"), (Groups{{0, 2}, {1, 3}}));
  EXPECT_EQ(g.groups("pp"), (Groups{{0, 1}, {2, 3}}));
}

TEST(RankGrid, BadOrdersAreRefused) {
  EXPECT_EQ(refusal("tp-dp-pp", 1, 2),
            "the order 'tp-dp-pp' leaves out cp, whose size is 2: name each "
            "of tp, cp, ep, dp and pp of a size above 1");
  const std::string twice = "must name each of tp, cp, ep, dp and pp at most "
                            "once, joined by '-'";
  EXPECT_NE(refusal("tp-tp-cp-ep-dp-pp").find(twice), std::string::npos);
  EXPECT_NE(refusal("tp-cp-ep-dp-xp").find(twice), std::string::npos);
  EXPECT_NE(refusal("").find(twice), std::string::npos);
  EXPECT_NE(refusal("tp--pp").find(twice), std::string::npos);
  EXPECT_NE(refusal("TP-CP-EP-DP-PP").find(twice), std::string::npos);
  EXPECT_EQ(refusal(kRankOrder, 0), "tp must be at least 1");
  EXPECT_EQ(refusal(kRankOrder), "");
}

// Megatron's expert grid beside tp 2 x dp 4 x pp 2 (rank = tp + 2 dp + 8 pp)
// for ep 4, etp 1: tp 1 x ep 4 x edp 2 x pp 2, rank = ep + 4 edp + 8 pp.
// The expert-parallel groups are four consecutive ranks of a stage, the
// expert-data-parallel ones their strided copies, the pipelines the dense
// ones.
TEST(RankGrid, TheExpertGridBesideTheDenseOne) {
  const RankGrid dense = gridOf(2, 1, 1, 4, 2, kRankOrder);
  std::string why;
  std::optional<RankGrid> g = RankGrid::expert(dense, 4, 1, kRankOrder, &why);
  ASSERT_TRUE(g) << why;
  EXPECT_EQ(g->size("tp"), 1);
  EXPECT_EQ(g->size("dp"), 2);
  EXPECT_EQ(
      g->groups("ep"),
      (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}, {12, 13, 14, 15}}));
  EXPECT_EQ(g->groups("dp"), (Groups{{0, 4},
                                     {1, 5},
                                     {2, 6},
                                     {3, 7},
                                     {8, 12},
                                     {9, 13},
                                     {10, 14},
                                     {11, 15}}));
  EXPECT_EQ(g->groups("pp"), dense.groups("pp"));
  // etp 2 x ep 2 inside tp 4 (MoE parallel folding): the tp-ep group is
  // the dense tp group, edp the dense dp.
  const RankGrid tp4 = gridOf(4, 1, 1, 2, 1, kRankOrder);
  std::optional<RankGrid> folded =
      RankGrid::expert(tp4, 2, 2, kRankOrder, &why);
  ASSERT_TRUE(folded) << why;
  EXPECT_EQ(folded->groups("tp-ep"), tp4.groups("tp"));
  EXPECT_EQ(folded->groups("dp"), tp4.groups("dp"));
  EXPECT_EQ(folded->groups("ep"), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
}

// Megatron's refusals: a world that is not a multiple of etp x ep x pp, and
// in the tp-pp-dp order a MoE data-parallel size other than the dense one
// (the pipeline groups would differ).
TEST(RankGrid, ExpertGridsMegatronRefuses) {
  std::string why;
  EXPECT_FALSE(RankGrid::expert(gridOf(2, 1, 1, 3, 1, kRankOrder), 4, 1,
                                kRankOrder, &why));
  EXPECT_EQ(why, "the world of 6 ranks is not a multiple of etp x ep x pp = "
                 "4");
  EXPECT_FALSE(RankGrid::expert(gridOf(2, 1, 1, 2, 2, kTpPpDpRankOrder), 4, 1,
                                kTpPpDpRankOrder, &why));
  EXPECT_EQ(why, "the order 'tp-cp-ep-pp-dp' does not end in pp, so the MoE "
                 "layers' data-parallel size (1) must equal the dense "
                 "layers' (2)");
  // Allowed there when the sizes keep dp: etp x ep = tp.
  EXPECT_TRUE(RankGrid::expert(gridOf(2, 1, 1, 2, 2, kTpPpDpRankOrder), 2, 1,
                               kTpPpDpRankOrder, &why));
}

TEST(RankGrid, UnknownTokensThrow) {
  const RankGrid g = RankGrid::megatron(2, 2, 2);
  EXPECT_THROW(g.groups("xp"), std::invalid_argument);
  EXPECT_THROW(g.groups(""), std::invalid_argument);
  EXPECT_THROW(g.groupOf(8, "tp"), std::invalid_argument);
}

} // namespace
