//===- ClusterTest.cpp - devices, link classes, communication in the step -===//
#include "core/model/Cluster.h"
#include "core/schedule/Simulate.h"

#include <gtest/gtest.h>

#include <cmath>

namespace hypipe {
namespace {

// Each expected value below is worked out by hand from the ring algorithm
// (n - 1 steps of 1/n of the bytes each way) and the link's two numbers.
TEST(Cluster, RingCollectivesMoveTheirShareOfTheBytes) {
  const Link link{100e9, 10e-6}; // 100 GB/s, 10 us
  // 4 ranks, 1 GB: a reduce-scatter is 3 steps of 250 MB = 7.5 ms + 30 us.
  EXPECT_NEAR(reduceScatterSeconds(4, 1e9, link), 7.5e-3 + 30e-6, 1e-12);
  EXPECT_NEAR(allGatherSeconds(4, 1e9, link), 7.5e-3 + 30e-6, 1e-12);
  EXPECT_NEAR(allReduceSeconds(4, 1e9, link), 15e-3 + 60e-6, 1e-12);
  // 2 ranks: half the bytes each way, one step each way.
  EXPECT_NEAR(allReduceSeconds(2, 1e9, link), 10e-3 + 20e-6, 1e-12);
  // One rank reduces nothing.
  EXPECT_EQ(allReduceSeconds(1, 1e9, link), 0.0);
  EXPECT_NEAR(link.seconds(1e6), 10e-6 + 1e-5, 1e-15);
}

TEST(Cluster, RanksFillNodesDataParallelInner) {
  Expected<Cluster> h100 = makeCluster("h100");
  ASSERT_TRUE(static_cast<bool>(h100));
  const Cluster &c = *h100;
  ASSERT_EQ(c.device.perNode, 8);
  // dp 8: a data-parallel group is one node; every pipeline hand-off
  // leaves it.
  EXPECT_EQ(&c.dataParallelLink(3, 8), &c.device.intraNode);
  EXPECT_EQ(&c.pipelineLink(0, 1, 8), &c.device.interNode);
  // dp 2: four pipeline ranks a node; the hand-off from pp 3 to 4 (global
  // ranks 6, 7 to 8, 9) crosses, 2 to 3 does not.
  EXPECT_EQ(&c.pipelineLink(2, 3, 2), &c.device.intraNode);
  EXPECT_EQ(&c.pipelineLink(3, 4, 2), &c.device.interNode);
  // dp 16: the group spans two nodes.
  EXPECT_EQ(&c.dataParallelLink(0, 16), &c.device.interNode);
  // An odd fit: dp 3 on 8 a node; pp 2's replicas are ranks 6, 7, 8.
  EXPECT_EQ(&c.dataParallelLink(2, 3), &c.device.interNode);
  EXPECT_EQ(&c.pipelineLink(1, 2, 3), &c.device.interNode);
  EXPECT_EQ(c.flopsPerSecond(true), 989e12 * c.device.achieved);
}

// Tensor parallel innermost (Megatron's tp-cp-ep-dp-pp): global rank
// (pp_rank * dp + dp_rank) * tp + tp_rank.
TEST(Cluster, TensorParallelRanksAreInnermost) {
  Expected<Cluster> h100 = makeCluster("h100");
  ASSERT_TRUE(static_cast<bool>(h100));
  const Cluster &c = *h100;
  EXPECT_EQ(globalRank(1, 2, 4, 2, 1), (1 * 4 + 2) * 2 + 1);
  // tp 2 x dp 4: a pipeline rank is one node (ranks 0-7), so its
  // data-parallel groups (0, 2, 4, 6 and 1, 3, 5, 7) stay in it and its
  // hand-offs leave it.
  EXPECT_EQ(&c.dataParallelLink(0, 4, 2), &c.device.intraNode);
  EXPECT_EQ(&c.pipelineLink(0, 1, 4, 2), &c.device.interNode);
  // tp 8 x dp 2: each replica is a node; the data-parallel group of tp
  // rank r is ranks r and 8 + r, in two nodes.
  EXPECT_EQ(&c.dataParallelLink(0, 2, 8), &c.device.interNode);
  // A tp group of 8 is a node; one of 16, or of 3 (ranks 6, 7, 8), is not.
  EXPECT_EQ(&c.tensorParallelLink(8), &c.device.intraNode);
  EXPECT_EQ(&c.tensorParallelLink(16), &c.device.interNode);
  EXPECT_EQ(&c.tensorParallelLink(3), &c.device.interNode);
}

TEST(Cluster, OverridesAreCheckedAndApplied) {
  ClusterOverrides o;
  o.perNode = 4;
  o.interNode = "25,5";
  o.achieved = 0.5;
  Expected<Cluster> c = makeCluster("a100", o);
  ASSERT_TRUE(static_cast<bool>(c));
  EXPECT_EQ(c->device.perNode, 4);
  EXPECT_DOUBLE_EQ(c->device.interNode.bytesPerSecond, 25e9);
  EXPECT_DOUBLE_EQ(c->device.interNode.latencySeconds, 5e-6);
  EXPECT_DOUBLE_EQ(c->flopsPerSecond(true), 312e12 * 0.5);

  for (const char *bad : {"", "fast", "-3", "45,", "45,-1", "1,2,3", "nan"}) {
    Expected<Link> link = parseLink(bad, "--inter-node");
    ASSERT_FALSE(static_cast<bool>(link)) << bad;
    Problem p = link.takeError().takeProblem();
    EXPECT_NE(p.message.find("is not a link class"), std::string::npos);
    EXPECT_NE(p.help.find("--inter-node 45,15"), std::string::npos);
  }
  Expected<Cluster> unknown = makeCluster("tpu");
  ASSERT_FALSE(static_cast<bool>(unknown));
  EXPECT_NE(
      unknown.takeError().takeProblem().help.find("h100, h200, a100, cpu"),
      std::string::npos);
  ClusterOverrides zero;
  zero.achieved = 0;
  EXPECT_FALSE(static_cast<bool>(makeCluster("h100", zero)));
  ClusterOverrides none;
  none.perNode = 0;
  EXPECT_FALSE(static_cast<bool>(makeCluster("h100", none)));
}

// Past these a step's time is inf or nan (issue 47): one bound for the
// options and for the link a costs file carries.
TEST(Cluster, RowsAndLinksStayWithinWhatADeviceCanBe) {
  for (const char *bad : {"1e-300", "1e300", "45,1e300", "0.0009"}) {
    Expected<Link> link = parseLink(bad, "--intra-node");
    ASSERT_FALSE(static_cast<bool>(link)) << bad;
    EXPECT_NE(link.takeError().message().find("outside"), std::string::npos)
        << bad;
  }
  EXPECT_TRUE(static_cast<bool>(parseLink("0.001,1000000", "--intra-node")));
  EXPECT_TRUE(static_cast<bool>(parseLink("100000", "--intra-node")));
  for (double mfu : {5e-324, 0.0009, std::nan("")}) {
    ClusterOverrides o;
    o.achieved = mfu;
    EXPECT_FALSE(static_cast<bool>(makeCluster("h100", o))) << mfu;
  }
  ClusterOverrides least;
  least.achieved = ClusterBounds::kLeastMfu;
  EXPECT_TRUE(static_cast<bool>(makeCluster("h100", least)));
  EXPECT_EQ(linkProblem(Link{1e9, 1e-6}), "");
  EXPECT_NE(linkProblem(Link{1e9, 2}), "");
}

schedule::Simulation simulateGpipe(const schedule::Costs &costs,
                                   int64_t microbatches = 1) {
  auto s = schedule::buildSchedule(
      {schedule::ScheduleKind::GPipe, 2, 1, microbatches, {}});
  EXPECT_TRUE(static_cast<bool>(s));
  schedule::insertCommunication(*s);
  auto sim = schedule::simulate(*s, costs);
  EXPECT_TRUE(static_cast<bool>(sim)) << toString(sim.takeError());
  return sim ? std::move(*sim) : schedule::Simulation{};
}

// Two stages, one microbatch: F0, hand-off, F1, B1, hand-off, B0.
TEST(Cluster, HandOffsAndReductionsTakeTheirTimeInTheStep) {
  schedule::Costs costs; // F = 1, B = 2
  costs.boundaryTransfer = {0.5};
  schedule::Simulation sim = simulateGpipe(costs);
  EXPECT_DOUBLE_EQ(sim.makespan, 1 + 0.5 + 1 + 2 + 0.5 + 2);

  // Stage 1's reduction (1) starts when its backward ends (4.5) and hides
  // behind the hand-off and stage 0's backward; stage 0's (3) starts at 7
  // and ends the step at 10.
  costs.stageReduce = {3, 1};
  sim = simulateGpipe(costs);
  EXPECT_DOUBLE_EQ(sim.makespan, 10);
  EXPECT_DOUBLE_EQ(sim.exposedReduction[0], 3);
  EXPECT_DOUBLE_EQ(sim.exposedReduction[1], 1);
  // What follows the reductions (the distributed optimizer's all-gather).
  costs.stageAfterStep = {0.25, 0.25};
  sim = simulateGpipe(costs);
  EXPECT_DOUBLE_EQ(sim.makespan, 10.25);

  // Two microbatches: stage 1's reduction waits for its second backward
  // (F0 F0 | F1 F1 B1 B1 under GPipe: rank 1 ends its backwards at
  // 1.5 + 1 + 1 + 2 + 2 = 7.5 with the hand-off of the second forward at
  // 2.5), and a rank's reductions queue on its one collective stream.
  schedule::Costs two;
  two.boundaryTransfer = {0.5};
  two.stageReduce = {0, 4};
  sim = simulateGpipe(two, 2);
  EXPECT_DOUBLE_EQ(sim.exposedReduction[1], 4);
}

// In buckets, a reduction starts inside the last backward: bucket j of k is
// ready j/k of the way through the backward's weight-gradient part (W = 1,
// the end of the B of cost 2), and the buckets run one after another.
TEST(Cluster, BucketsStartInsideTheLastBackward) {
  schedule::Costs costs; // F = 1, B = 2 (of which W = 1)
  costs.boundaryTransfer = {0.5};
  // Stage 1's backward runs from 2.5 to 4.5: four buckets of 0.25 ready at
  // 3.75, 4, 4.25 and 4.5, each taking 0.25 from when the one before is
  // done: in at 4.75, 0.25 after the backward instead of 1.
  costs.stageReduce = {0, 1};
  costs.stageBuckets = {1, 4};
  schedule::Simulation sim = simulateGpipe(costs);
  EXPECT_DOUBLE_EQ(sim.exposedReduction[1], 0.25);
  // Slower than the pass: the first bucket starts at 3.75 and the others
  // queue behind it (3.75 + 4 x 1 = 7.75, 3.25 after the backward).
  costs.stageReduce = {0, 4};
  sim = simulateGpipe(costs);
  EXPECT_DOUBLE_EQ(sim.exposedReduction[1], 3.25);
  // One bucket: the whole reduction when the backward ends.
  costs.stageBuckets = {1, 1};
  sim = simulateGpipe(costs);
  EXPECT_DOUBLE_EQ(sim.exposedReduction[1], 4);
}

} // namespace
} // namespace hypipe
