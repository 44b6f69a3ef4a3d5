//===- ScheduleTest.cpp - schedules, communication, verifier, simulator ---===//
#include "core/schedule/Render.h"
#include "core/schedule/Simulate.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace hypipe::schedule {
namespace {

using nlohmann::json;

json vectors() {
  std::ifstream in(HYPIPE_CONFORMANCE_DIR "/schedule_vectors.json");
  EXPECT_TRUE(in.good());
  return json::parse(in);
}

std::vector<std::string> opsOf(const Schedule &s, int64_t rank,
                               bool forwardOnly = false) {
  std::vector<std::string> ops;
  for (const Action &a : s.ranks[rank])
    if (isCompute(a.op) && (!forwardOnly || a.op == Op::F))
      ops.push_back(s.megatronText(a));
  return ops;
}

Schedule build(const std::string &name, int64_t pp, int64_t vpp, int64_t m,
               std::optional<int64_t> g = std::nullopt) {
  auto s = buildSchedule({*parseScheduleKind(name), pp, vpp, m, g});
  EXPECT_TRUE(static_cast<bool>(s)) << toString(s.takeError());
  return s ? std::move(*s) : Schedule{};
}

TEST(ScheduleConformance, MegatronOpOrders) {
  int checked = 0, refused = 0;
  json all = vectors();
  for (const json &v : all["schedules"]) {
    bool interleaved = v["schedule"] == "interleaved_1f1b";
    int64_t pp = v["pp"], m = v["num_microbatches"];
    int64_t vpp = v["vpp"].is_null() ? 1 : v["vpp"].get<int64_t>();
    std::optional<int64_t> g;
    if (v.contains("microbatch_group_size_per_vp_stage"))
      g = v["microbatch_group_size_per_vp_stage"].get<int64_t>();
    SCOPED_TRACE(v.dump().substr(0, 120));
    auto s = buildSchedule(
        {interleaved ? ScheduleKind::Interleaved1F1B : ScheduleKind::OneFOneB,
         pp, vpp, m, g});
    if (v.contains("error")) {
      EXPECT_FALSE(static_cast<bool>(s))
          << "Megatron refuses it: " << v["error"];
      if (!s)
        EXPECT_FALSE(toString(s.takeError()).empty());
      ++refused;
      continue;
    }
    ASSERT_TRUE(static_cast<bool>(s)) << toString(s.takeError());
    for (const json &rank : v["ranks"]) {
      int64_t r = rank["pp_rank"];
      auto expected = rank["ops"].get<std::vector<std::string>>();
      EXPECT_EQ(opsOf(*s, r, v["forward_only"].get<bool>()), expected)
          << "rank " << r;
      if (!v["forward_only"].get<bool>())
        EXPECT_EQ(megatronWarmup(pp, vpp, m, g.value_or(pp), r, interleaved),
                  rank["num_warmup"].get<int64_t>());
    }
    ++checked;
  }
  EXPECT_EQ(checked, 10);
  EXPECT_EQ(refused, 3);
}

TEST(ScheduleConformance, WarmupTable) {
  json d = vectors();
  for (const json &row : d["warmup_table"]) {
    int64_t pp = row[0], m = row[2], g = row[3], rank = row[4];
    bool interleaved = !row[1].is_null();
    int64_t vpp = interleaved ? row[1].get<int64_t>() : 1;
    int64_t warmup = megatronWarmup(pp, vpp, m, g, rank, interleaved);
    EXPECT_EQ(warmup, row[5].get<int64_t>()) << row.dump();
    EXPECT_EQ(m * vpp - warmup, row[6].get<int64_t>()) << row.dump();
    int64_t raw =
        interleaved ? (pp - rank - 1) * 2 + (vpp - 1) * g : pp - rank - 1;
    EXPECT_EQ(raw >= m * vpp, row[7].get<bool>()) << row.dump();
  }
}

TEST(ScheduleConformance, ScheduleTables) {
  json all = vectors();
  for (const json &t : all["schedule_tables"]) {
    int64_t m = t["num_microbatches"], vpp = t["num_model_chunks"],
            g = t["microbatch_group_size_per_vp_stage"];
    std::vector<std::vector<int64_t>> order;
    for (auto [mb, chunk] : interleavedTable(m, vpp, g))
      order.push_back({mb, chunk});
    EXPECT_EQ(order, t["expected"].get<std::vector<std::vector<int64_t>>>())
        << t.dump();
    // And it is the forward order of every rank of a schedule that uses it.
    auto s = buildSchedule({ScheduleKind::Interleaved1F1B, 1, vpp, m, g});
    if (!s)
      continue; // g > m: Megatron refuses the schedule too
    std::vector<std::vector<int64_t>> forwards;
    for (const Action &a : s->ranks[0])
      if (a.op == Op::F)
        forwards.push_back({a.microbatch, s->chunkOf(a.stage)});
    EXPECT_EQ(forwards, order);
  }
}

TEST(Schedule, RefusalsSayWhatWouldWork) {
  auto s = buildSchedule({ScheduleKind::Interleaved1F1B, 4, 2, 7, 4});
  ASSERT_FALSE(static_cast<bool>(s));
  std::string message = toString(s.takeError());
  EXPECT_NE(message.find(
                "the last microbatch group would hold 3 microbatches (7 % 4)"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("use a group size of 7"), std::string::npos)
      << message;
  s = buildSchedule({ScheduleKind::OneFOneB, 4, 2, 8});
  ASSERT_FALSE(static_cast<bool>(s));
  EXPECT_NE(toString(s.takeError()).find("use interleaved-1f1b"),
            std::string::npos);
  s = buildSchedule({ScheduleKind::ZbV, 4, 3, 8});
  ASSERT_FALSE(static_cast<bool>(s));
  EXPECT_FALSE(s.problem().message.empty());
  s = buildSchedule({ScheduleKind::OneFOneB, 6311, 1,
                     6311}); // a spec the fuzzer wrote: bounded, not built
  ASSERT_FALSE(static_cast<bool>(s));
  EXPECT_NE(
      toString(s.takeError()).find("stage-microbatches a schedule may hold"),
      std::string::npos);
  EXPECT_FALSE(
      static_cast<bool>(checkSchedule({ScheduleKind::OneFOneB, 4, 1, 8})));
}

Simulation run(Schedule s, const Costs &costs = {}) {
  insertCommunication(s);
  auto sim = simulate(s, costs);
  EXPECT_TRUE(static_cast<bool>(sim)) << toString(sim.takeError());
  return sim ? std::move(*sim) : Simulation{};
}

TEST(Simulate, BubbleOf1F1BIsExact) {
  for (int64_t p : {2, 3, 4, 8})
    for (int64_t m : {1, 4, 7, 16}) {
      Simulation sim = run(build("1f1b", p, 1, m));
      double expected =
          static_cast<double>(p - 1) / static_cast<double>(m + p - 1);
      for (double bubble : sim.bubbleFraction)
        EXPECT_NEAR(bubble, expected, 1e-12) << "p=" << p << " m=" << m;
      EXPECT_DOUBLE_EQ(sim.makespan, 3.0 * static_cast<double>(m + p - 1));
    }
}

TEST(Simulate, BubbleOfInterleavedIsExact) {
  // A chunk costs 1/v of a stage: F = 1/v, B = 2/v.
  for (int64_t p : {2, 4})
    for (int64_t v : {2, 3, 4})
      for (int64_t m : {p, 2 * p, 4 * p}) {
        Costs costs;
        costs.f = 1.0 / static_cast<double>(v);
        costs.b = 2.0 / static_cast<double>(v);
        Simulation sim = run(build("interleaved-1f1b", p, v, m), costs);
        double expected =
            static_cast<double>(p - 1) / static_cast<double>(v * m + p - 1);
        for (double bubble : sim.bubbleFraction)
          EXPECT_NEAR(bubble, expected, 1e-9)
              << "p=" << p << " v=" << v << " m=" << m;
      }
}

TEST(Simulate, ZeroBubbleH1BeatsOneFOneBAtTheSameMemory) {
  for (int64_t p : {2, 4, 8})
    for (int64_t m : {p, 2 * p, 3 * p}) {
      Simulation base = run(build("1f1b", p, 1, m));
      Simulation zb = run(build("zb-h1", p, 1, m)); // I = W = 1, B = 2
      double baseBubble = *std::max_element(base.bubbleFraction.begin(),
                                            base.bubbleFraction.end());
      double zbBubble =
          *std::max_element(zb.bubbleFraction.begin(), zb.bubbleFraction.end());
      EXPECT_LT(zbBubble, baseBubble) << "p=" << p << " m=" << m;
      EXPECT_EQ(*std::max_element(zb.peakActivations.begin(),
                                  zb.peakActivations.end()),
                *std::max_element(base.peakActivations.begin(),
                                  base.peakActivations.end()));
    }
}

TEST(Simulate, EverySchedulePassesTheVerifier) {
  for (const std::string &name : scheduleNames())
    for (int64_t p : {1, 2, 3, 4})
      for (int64_t m : {4, 8, 12}) {
        int64_t v = name == "interleaved-1f1b" || name == "zbv" ? 2 : 1;
        auto s = buildSchedule({*parseScheduleKind(name), p, v, m});
        if (!s) { // interleaved refuses some shapes; that is tested above
          EXPECT_FALSE(s.problem().message.empty());
          continue;
        }
        Schedule withComm = *s;
        insertCommunication(withComm);
        auto sim = simulate(withComm);
        EXPECT_TRUE(static_cast<bool>(sim))
            << name << " p=" << p << " m=" << m << ": "
            << toString(sim.takeError());
        auto computeOnly = simulate(*s);
        EXPECT_TRUE(static_cast<bool>(computeOnly))
            << toString(computeOnly.takeError());
      }
}

std::string simulationError(const Schedule &s) {
  auto sim = simulate(s);
  EXPECT_FALSE(static_cast<bool>(sim)) << "expected the program to be rejected";
  return sim ? "" : toString(sim.takeError());
}

TEST(Verifier, DeadlockShowsTheGrid) {
  Schedule s = build("1f1b", 2, 1, 2);
  insertCommunication(s);
  // Rank 1 waits for a gradient before doing the forward that produces it.
  std::swap(s.ranks[1][0], s.ranks[1][1]); // RECV_F after F: F has no input yet
  std::string e = simulationError(s);
  EXPECT_NE(e.find("the schedule deadlocks"), std::string::npos) << e;
  EXPECT_NE(e.find("rank 1 waits at step 0 (1F0) for RECV_F of microbatch 0 "
                   "for stage 1"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("[1F0]"), std::string::npos) << e;
}

TEST(Verifier, MissingDuplicateAndUnreceived) {
  Schedule s = build("1f1b", 2, 1, 2);
  s.ranks[1].pop_back(); // B1.0 on rank 1 never runs
  std::string e = simulationError(s);
  EXPECT_NE(e.find("deadlocks"), std::string::npos) << e; // rank 0 waits for it

  Schedule dup = build("1f1b", 1, 1, 2);
  dup.ranks[0].push_back(dup.ranks[0].front());
  e = simulationError(dup);
  EXPECT_NE(e.find("the forward of microbatch 0 on stage 0 runs twice"),
            std::string::npos)
      << e;

  Schedule unreceived = build("1f1b", 2, 1, 1);
  insertCommunication(unreceived);
  // Drop the receive of the gradient and the backward that needs it.
  auto &r0 = unreceived.ranks[0];
  r0.erase(std::remove_if(r0.begin(), r0.end(),
                          [](const Action &a) { return a.op == Op::RecvB; }),
           r0.end());
  e = simulationError(unreceived);
  EXPECT_NE(e.find("RECV_B of microbatch 0 for stage 0"), std::string::npos)
      << e;

  Schedule wrongRank = build("1f1b", 2, 1, 1);
  wrongRank.ranks[0][0].stage = 1;
  e = simulationError(wrongRank);
  EXPECT_NE(e.find("runs stage 1, which belongs to rank 1"), std::string::npos)
      << e;
}

TEST(Csv, RoundTripAndErrors) {
  Schedule s = build("interleaved-1f1b", 2, 2, 4);
  insertCommunication(s);
  std::string csv = toCsv(s);
  EXPECT_EQ(csv.substr(0, 12), "0F0,0SEND_F0");
  auto back = fromCsv(csv, 2, 2, 4, Placement::Loop);
  ASSERT_TRUE(static_cast<bool>(back)) << toString(back.takeError());
  EXPECT_EQ(back->ranks, s.ranks);
  EXPECT_TRUE(static_cast<bool>(simulate(*back)));

  auto bad = fromCsv("0F0,0X1\n1F0\n", 2, 1, 2, Placement::Loop);
  ASSERT_FALSE(static_cast<bool>(bad));
  EXPECT_NE(toString(bad.takeError())
                .find("row 1 (rank 0), column 2: '0X1' has no known op"),
            std::string::npos);
  bad = fromCsv("0F0\n", 2, 1, 2, Placement::Loop);
  ASSERT_FALSE(static_cast<bool>(bad));
  EXPECT_NE(toString(bad.takeError()).find("the CSV has 1 rows but pp = 2"),
            std::string::npos);
  bad = fromCsv("0F9\n1F0\n", 2, 1, 2, Placement::Loop);
  ASSERT_FALSE(static_cast<bool>(bad));
  EXPECT_NE(toString(bad.takeError()).find("microbatch 9 is out of range"),
            std::string::npos);
}

TEST(Render, TraceAndSvgHoldEveryComputeAction) {
  Schedule s = build("1f1b", 2, 1, 3);
  insertCommunication(s);
  Simulation sim = run(build("1f1b", 2, 1, 3));
  auto trace = json::parse(chromeTrace(s, sim));
  int complete = 0;
  for (const json &e : trace["traceEvents"])
    complete += e["ph"] == "X";
  EXPECT_EQ(complete, 2 * 2 * 3); // F and B of 3 microbatches on 2 ranks
  std::string svg = svgTimeline(s, sim);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  size_t boxes = 0;
  for (size_t at = svg.find("<title>"); at != std::string::npos;
       at = svg.find("<title>", at + 1))
    ++boxes;
  EXPECT_EQ(boxes, 12u);
}

// The vocabulary's text of an action and its parser are exact inverses over
// every action (communication included) of every schedule, and the names of
// schedules and ops round-trip too.
TEST(Vocabulary, TextRoundTripsEveryAction) {
  int actions = 0;
  for (const std::string &name : scheduleNames()) {
    ASSERT_TRUE(parseScheduleKind(name).has_value()) << name;
    EXPECT_EQ(scheduleName(*parseScheduleKind(name)), name);
    for (auto [pp, vpp] : {std::pair<int64_t, int64_t>{4, 1}, {3, 2}}) {
      auto s = buildSchedule({*parseScheduleKind(name), pp, vpp, 6});
      if (!s)
        continue;
      insertCommunication(*s);
      for (const auto &program : s->ranks)
        for (const Action &a : program) {
          auto back = parsePytorchAction(pytorchText(a), s->actionContext());
          ASSERT_TRUE(static_cast<bool>(back)) << pytorchText(a);
          EXPECT_EQ(*back, a) << pytorchText(a);
          EXPECT_EQ(parseOpName(opName(a.op)), a.op);
          ++actions;
        }
    }
  }
  EXPECT_GT(actions, 500);
  EXPECT_FALSE(parseScheduleKind("2f2b").has_value());
  EXPECT_FALSE(parseOpName("SEND").has_value());
}

// The loop and V placements are inverse mappings between a stage and its
// (rank, chunk).
TEST(Vocabulary, StageToRankMappingsAreInverse) {
  for (Placement p : {Placement::Loop, Placement::V})
    for (int64_t pp : {1, 2, 4}) {
      int64_t vpp = p == Placement::V ? 2 : 3;
      for (int64_t s = 0; s < pp * vpp; ++s)
        EXPECT_EQ(
            stageOfChunk(p, pp, rankOfStage(p, pp, s), chunkOfStage(p, pp, s)),
            s);
    }
  EXPECT_EQ(rankOfStage(Placement::V, 4, 7), 0);
  EXPECT_EQ(rankOfStage(Placement::Loop, 4, 7), 3);
  EXPECT_EQ(placementOf(ScheduleKind::ZbV), Placement::V);
}

} // namespace
} // namespace hypipe::schedule

namespace hypipe::schedule {
namespace {

// PyTorch pipelining's own CSVs (test/conformance/pytorch).

/// The shape a conformance CSV's name states: NAME_ppP[_vV]_mM_KIND.csv.
struct CsvShape {
  std::string name, kind;
  int64_t pp = 0, vpp = 1, microbatches = 0;
};

CsvShape shapeOf(const std::string &file) {
  CsvShape s;
  std::string base = file.substr(0, file.size() - 4);
  s.kind = base.substr(base.rfind('_') + 1);
  size_t pp = base.find("_pp");
  s.name = base.substr(0, pp);
  std::sscanf(base.c_str() + pp, "_pp%ld", &s.pp);
  if (size_t v = base.find("_v", pp + 1); v != std::string::npos)
    std::sscanf(base.c_str() + v, "_v%ld", &s.vpp);
  std::sscanf(base.c_str() + base.find("_m", pp + 1), "_m%ld", &s.microbatches);
  return s;
}

std::vector<std::string> csvFiles() {
  std::vector<std::string> files;
  for (const auto &e :
       std::filesystem::directory_iterator(HYPIPE_CONFORMANCE_DIR "/pytorch"))
    files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  return files;
}

std::string read(const std::string &file) {
  std::ifstream in(std::string(HYPIPE_CONFORMANCE_DIR "/pytorch/") + file);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

/// Each rank's compute actions in PyTorch's notation.
std::vector<std::vector<std::string>> computeOrder(const Schedule &s) {
  std::vector<std::vector<std::string>> out(s.ranks.size());
  for (size_t r = 0; r < s.ranks.size(); ++r)
    for (const Action &a : s.ranks[r])
      if (isCompute(a.op))
        out[r].push_back(pytorchText(a));
  return out;
}

// Every CSV PyTorch writes — compute orders, orders with communication and
// runtime dumps — imports with the placement inferred as PyTorch infers it,
// verifies and simulates.
TEST(PyTorchCsv, EveryFileImportsVerifiesAndSimulates) {
  int imported = 0;
  for (const std::string &file : csvFiles()) {
    CsvShape shape = shapeOf(file);
    auto csv = importCsv(read(file), shape.pp, shape.vpp, shape.microbatches,
                         std::nullopt);
    ASSERT_TRUE(static_cast<bool>(csv))
        << file << ": " << toString(csv.takeError());
    const bool v = shape.name == "ZBVZeroBubble" || shape.name == "DualPipeV";
    EXPECT_EQ(csv->schedule.placement == Placement::V, v) << file;
    EXPECT_EQ(csv->placementInferred, v) << file;
    EXPECT_EQ(csv->overlapped > 0, shape.name == "DualPipeV") << file;
    EXPECT_EQ(csv->fsdpActions > 0, shape.kind == "runtime") << file;
    Schedule s = std::move(csv->schedule);
    EXPECT_EQ(hasTransfers(s), shape.kind != "compute") << file;
    insertCommunication(s); // keeps the file's own communication
    auto sim = simulate(s);
    EXPECT_TRUE(static_cast<bool>(sim))
        << file << ": " << toString(sim.takeError());
    ++imported;
  }
  EXPECT_EQ(imported, 30);
}

// PyTorch's orders with their communication, timed as NCCL runs them (one
// in-order stream per pair of ranks): none deadlocks, none gets faster than
// with posted receives, and an order whose early receives hold sends behind
// them (LoopedBFS posts every receive of a chunk first) gets slower.
TEST(PyTorchCsv, CommsFilesRunOnInOrderStreams) {
  int checked = 0;
  for (const std::string &file : csvFiles()) {
    CsvShape shape = shapeOf(file);
    if (shape.kind != "comms")
      continue;
    auto csv = importCsv(read(file), shape.pp, shape.vpp, shape.microbatches,
                         std::nullopt);
    ASSERT_TRUE(static_cast<bool>(csv)) << file;
    Costs posted, streams;
    posted.latency = streams.latency = 0.5;
    streams.inOrderStreams = true;
    auto a = simulate(csv->schedule, posted);
    auto b = simulate(csv->schedule, streams);
    ASSERT_TRUE(a && b) << file << ": "
                        << (b ? std::string() : toString(b.takeError()));
    EXPECT_GE(b->makespan, a->makespan) << file;
    if (shape.name == "LoopedBFS")
      EXPECT_GT(b->makespan, a->makespan) << file;
    ++checked;
  }
  EXPECT_EQ(checked, 9);
}

// What PyTorch's runtime dumps is its compute order plus FSDP and
// gradient-reduction actions: once those are read as no-ops, the order is
// the schedule's own.
TEST(PyTorchCsv, RuntimeDumpHasTheComputeOrder) {
  int compared = 0;
  for (const std::string &file : csvFiles()) {
    CsvShape shape = shapeOf(file);
    if (shape.kind != "runtime")
      continue;
    std::string computeFile = file.substr(0, file.size() - 11) + "compute.csv";
    auto runtime = importCsv(read(file), shape.pp, shape.vpp,
                             shape.microbatches, std::nullopt);
    auto compute = importCsv(read(computeFile), shape.pp, shape.vpp,
                             shape.microbatches, std::nullopt);
    ASSERT_TRUE(runtime && compute) << file;
    EXPECT_EQ(computeOrder(runtime->schedule), computeOrder(compute->schedule))
        << file;
    EXPECT_GT(runtime->reduceGrads, 0) << file;
    // Kept in the program, where they stand in the file.
    int64_t kept = 0;
    for (const auto &program : runtime->schedule.ranks)
      for (const Action &a : program)
        kept += isStageAction(a.op);
    EXPECT_EQ(kept, runtime->reduceGrads + runtime->fsdpActions) << file;
    EXPECT_EQ(runtime->reduceGrads, shape.pp * shape.vpp) << file;
    // They take no time: the dump runs as long as without them.
    Schedule without = runtime->schedule;
    for (auto &program : without.ranks)
      program.erase(
          std::remove_if(program.begin(), program.end(),
                         [](const Action &a) { return isStageAction(a.op); }),
          program.end());
    auto dumped = simulate(runtime->schedule);
    auto reference = simulate(without);
    ASSERT_TRUE(dumped && reference) << file;
    EXPECT_GT(dumped->makespan, 0) << file;
    EXPECT_EQ(dumped->makespan, reference->makespan) << file;
    ++compared;
  }
  EXPECT_EQ(compared, 9);
}

// hypipe's generated orders equal PyTorch's where both have the schedule.
// (hypipe's zbv is a valid V schedule but not PyTorch's ZBVZeroBubble order:
// the two part after the warm-up; see docs/schedules.md.)
TEST(PyTorchCsv, GeneratedOrdersEqualPyTorchs) {
  const std::pair<const char *, const char *> same[] = {
      {"GPipe", "gpipe"},
      {"Interleaved1F1B", "interleaved-1f1b"},
      {"DualPipeV", "dualpipev"}};
  int compared = 0;
  for (const std::string &file : csvFiles()) {
    CsvShape shape = shapeOf(file);
    if (shape.kind != "compute")
      continue;
    for (auto [theirs, ours] : same) {
      if (shape.name != theirs)
        continue;
      auto csv = importCsv(read(file), shape.pp, shape.vpp, shape.microbatches,
                           std::nullopt);
      ASSERT_TRUE(static_cast<bool>(csv)) << file;
      Schedule built = build(ours, shape.pp, shape.vpp, shape.microbatches);
      EXPECT_EQ(computeOrder(built), computeOrder(csv->schedule)) << file;
      ++compared;
    }
  }
  EXPECT_EQ(compared, 6);
}

// What the import refuses, each with where and why.
TEST(PyTorchCsv, RefusesWhatPyTorchWouldNotWrite) {
  auto message = [](const std::string &text, int64_t pp, int64_t vpp) {
    auto csv = importCsv(text, pp, vpp, 2, std::nullopt);
    return csv ? std::string() : toString(csv.takeError());
  };
  EXPECT_NE(message("0F0,0F1,(0F1)OVERLAP,0B0,0B1\n", 1, 1)
                .find("is not an overlapped pair"),
            std::string::npos);
  EXPECT_NE(message("0F0,(0F1;0F0)OVERLAP_F_B,0B0,0B1\n", 1, 1)
                .find("must pair one forward with one backward"),
            std::string::npos);
  EXPECT_NE(message("0F0,0F1,0B0,0B1,7REDUCE_GRAD\n", 1, 1)
                .find("stage 7 is out of range for 1 stages"),
            std::string::npos);
  // Stage 1 on rank 0 of pp 2: neither loop nor (with vpp 1) V.
  EXPECT_NE(message("1F0\n0F0\n", 2, 1)
                .find("runs on a rank that holds neither its loop placement"),
            std::string::npos);
  // A 20 MB cell is cut in the message.
  std::string huge(20 << 20, 'x');
  std::string m = message("(" + huge + "\n", 1, 1);
  EXPECT_LT(m.size(), 400u);
  m = message("0F0," + huge + "\n", 1, 1);
  EXPECT_NE(m.find("'" + std::string(37, 'x') + "...' is not an action"),
            std::string::npos);
  EXPECT_LT(m.size(), 400u);
}

} // namespace
} // namespace hypipe::schedule

namespace hypipe::schedule {
namespace {

// PyTorch's whole-stage actions read, write and parse back as PyTorch spells
// them, and take no microbatch.
TEST(StageActions, TextRoundTrips) {
  ActionContext c{2, 2, 4, Placement::Loop};
  for (const char *text : {"0UNSHARD", "3RESHARD", "2REDUCE_GRAD"}) {
    auto a = parsePytorchAction(text, c);
    ASSERT_TRUE(static_cast<bool>(a)) << text;
    EXPECT_TRUE(isStageAction(a->op)) << text;
    EXPECT_FALSE(isCompute(a->op) || isTransfer(a->op)) << text;
    EXPECT_EQ(pytorchText(*a), text);
  }
  EXPECT_EQ(megatronText(Action{Op::ReduceGrad, 3, 0}, Placement::Loop, 2),
            "REDUCE_GRAD.1");
  auto extra = parsePytorchAction("0REDUCE_GRAD1", c);
  ASSERT_FALSE(static_cast<bool>(extra));
  EXPECT_NE(toString(extra.takeError()).find("takes no microbatch"),
            std::string::npos);
  auto far = parsePytorchAction("4UNSHARD", c);
  ASSERT_FALSE(static_cast<bool>(far));
  EXPECT_NE(toString(far.takeError()).find("stage 4 is out of range"),
            std::string::npos);
}

// The verifier holds REDUCE_GRAD to where a stage's gradients are final:
// after every backward (every W of a split one) of the stage, once.
TEST(StageActions, ReduceGradMustFollowTheStagesBackwards) {
  auto verify = [](const char *csv) {
    auto imported = importCsv(csv, 1, 1, 2, std::nullopt);
    EXPECT_TRUE(static_cast<bool>(imported)) << csv;
    auto sim = simulate(imported->schedule);
    return sim ? std::string() : toString(sim.takeError());
  };
  EXPECT_EQ(verify("0UNSHARD,0F0,0F1,0B0,0B1,0REDUCE_GRAD,0RESHARD\n"), "");
  EXPECT_NE(verify("0F0,0F1,0B0,0REDUCE_GRAD,0B1\n")
                .find("0REDUCE_GRAD comes before the backward of microbatch 1 "
                      "on stage 0"),
            std::string::npos);
  EXPECT_NE(verify("0F0,0F1,0I0,0I1,0W0,0REDUCE_GRAD,0W1\n")
                .find("before the weight gradient of microbatch 1"),
            std::string::npos);
  EXPECT_NE(verify("0F0,0F1,0B0,0B1,0REDUCE_GRAD,0REDUCE_GRAD\n")
                .find("0REDUCE_GRAD runs twice"),
            std::string::npos);
  // On a rank that does not hold the stage.
  auto wrongRank =
      importCsv("0F0,0B0\n1F0,1B0,0REDUCE_GRAD\n", 2, 1, 1, Placement::Loop);
  ASSERT_TRUE(static_cast<bool>(wrongRank));
  auto sim = simulate(wrongRank->schedule);
  ASSERT_FALSE(static_cast<bool>(sim));
  const std::string wrong = toString(sim.takeError());
  EXPECT_NE(wrong.find("0REDUCE_GRAD runs stage 0, which belongs to rank 0"),
            std::string::npos)
      << wrong;
}

// Communication is inserted around the compute order and leaves the stage
// actions where they stand.
TEST(StageActions, InsertCommunicationKeepsThem) {
  auto imported = importCsv(
      "0UNSHARD,0F0,0B0,0REDUCE_GRAD\n1F0,1B0,1REDUCE_GRAD,1RESHARD\n", 2, 1, 1,
      std::nullopt);
  ASSERT_TRUE(static_cast<bool>(imported));
  Schedule s = std::move(imported->schedule);
  EXPECT_FALSE(hasTransfers(s));
  insertCommunication(s);
  EXPECT_TRUE(hasTransfers(s));
  EXPECT_EQ(toCsv(s), "0UNSHARD,0F0,0SEND_F0,0RECV_B0,0B0,0REDUCE_GRAD\n"
                      "1RECV_F0,1F0,1B0,1SEND_B0,1REDUCE_GRAD,1RESHARD\n");
  // Programs that carry their communication already are left as written,
  // even where it differs from what would be inserted.
  std::swap(s.ranks[0][2], s.ranks[0][3]); // 0RECV_B0 before 0SEND_F0
  const std::string written = toCsv(s);
  insertCommunication(s);
  EXPECT_EQ(toCsv(s), written);
  EXPECT_TRUE(static_cast<bool>(simulate(s)));
}

// Receives are timed as the runtime runs them: posted where written, their
// data waited for by the consuming action. PyTorch's interleaved 1F1B with
// its communication then takes the time of its compute order (27 at pp 2,
// vpp 2, m 4, F=1 B=2); a receive that held its rank where written would
// stretch it (the 40 the issue measured).
TEST(PyTorchCsv, PostedReceivesCostNothingWhereWritten) {
  auto comms = importCsv(read("Interleaved1F1B_pp2_v2_m4_comms.csv"), 2, 2, 4,
                         std::nullopt);
  auto compute = importCsv(read("Interleaved1F1B_pp2_v2_m4_compute.csv"), 2, 2,
                           4, std::nullopt);
  ASSERT_TRUE(comms && compute);
  Schedule computeOnly = std::move(compute->schedule);
  insertCommunication(computeOnly);
  auto posted = simulate(comms->schedule);
  auto reference = simulate(computeOnly);
  ASSERT_TRUE(posted && reference);
  EXPECT_EQ(posted->makespan, 27);
  EXPECT_EQ(reference->makespan, 27);
  Costs blocking;
  blocking.postedReceives = false;
  auto held = simulate(comms->schedule, blocking);
  ASSERT_TRUE(static_cast<bool>(held));
  EXPECT_GT(held->makespan, posted->makespan);
}

} // namespace
} // namespace hypipe::schedule

namespace hypipe::schedule {
namespace {

Schedule withCommunication(const char *name, int64_t pp, int64_t vpp,
                           int64_t m) {
  auto built = buildSchedule({*parseScheduleKind(name), pp, vpp, m});
  EXPECT_TRUE(static_cast<bool>(built)) << name;
  Schedule s = std::move(*built);
  insertCommunication(s);
  return s;
}

// NCCL's in-order streams: every schedule hypipe generates, with the
// communication it inserts (a send and the receive after it batched into
// one group), runs without deadlock, and with free transfers as fast as
// under posted receives; a transfer time makes it no faster.
TEST(InOrderStreams, EveryGeneratedScheduleRuns) {
  struct Case {
    const char *name;
    int64_t vpp, m;
  };
  for (Case k :
       {Case{"gpipe", 1, 8}, Case{"1f1b", 1, 8}, Case{"interleaved-1f1b", 2, 8},
        Case{"zb-h1", 1, 8}, Case{"zbv", 2, 8}, Case{"dualpipev", 2, 8}}) {
    Schedule s = withCommunication(k.name, 4, k.vpp, k.m);
    Costs posted, streams;
    streams.inOrderStreams = true;
    auto a = simulate(s, posted);
    auto b = simulate(s, streams);
    ASSERT_TRUE(a && b) << k.name << ": " << (b ? "" : toString(b.takeError()));
    EXPECT_DOUBLE_EQ(a->makespan, b->makespan) << k.name;
    Costs slow = streams;
    slow.latency = 0.5;
    auto c = simulate(s, slow);
    ASSERT_TRUE(static_cast<bool>(c)) << k.name;
    EXPECT_GE(c->makespan, b->makespan) << k.name;
  }
}

// A receive written before the send its data depends on: MPI's posted
// receive lets the send go by; an in-order stream holds the send behind the
// receive, which waits for data that needs the send: a deadlock, named.
TEST(InOrderStreams, ReceiveBeforeTheSendItNeedsDeadlocks) {
  Schedule s = withCommunication("1f1b", 2, 1, 2);
  auto &r0 = s.ranks[0];
  auto find = [&](Op op, int64_t mb) {
    return std::find_if(r0.begin(), r0.end(), [=](const Action &a) {
      return a.op == op && a.microbatch == mb;
    });
  };
  ASSERT_TRUE(find(Op::RecvB, 0) != r0.end());
  Action recv = *find(Op::RecvB, 0);
  r0.erase(find(Op::RecvB, 0));
  r0.insert(find(Op::SendF, 0), recv); // 0F0, 0RECV_B0, 0SEND_F0, ...
  for (Action &a : r0)
    a.batched = false;
  ASSERT_TRUE(static_cast<bool>(simulate(s))) << toCsv(s);
  Costs streams;
  streams.inOrderStreams = true;
  auto stuck = simulate(s, streams);
  ASSERT_FALSE(static_cast<bool>(stuck)) << toCsv(s);
  std::string e = toString(stuck.takeError());
  EXPECT_NE(e.find("rank 0's communication stream with rank 1 waits at "
                   "0RECV_B0"),
            std::string::npos)
      << e;
  // hypipe's NCCL links (a stream per direction): the send to rank 1 is
  // not behind the receive from it, and the program runs.
  Costs links;
  links.setComm(CommKind::Nccl);
  auto ran = simulate(s, links);
  EXPECT_TRUE(static_cast<bool>(ran)) << toString(ran.takeError());
}

} // namespace
} // namespace hypipe::schedule

namespace hypipe::schedule {
namespace {

/// For each (sender, receiver): the tensors in the sender's send order and
/// in the receiver's receive order, as (op of the receive, receiving stage,
/// microbatch).
using Tensor = std::tuple<Op, int32_t, int32_t>;
std::map<std::pair<int32_t, int32_t>,
         std::pair<std::vector<Tensor>, std::vector<Tensor>>>
linkOrders(const std::vector<std::vector<Action>> &programs) {
  std::map<std::pair<int32_t, int32_t>,
           std::pair<std::vector<Tensor>, std::vector<Tensor>>>
      links;
  for (int32_t r = 0; r < int32_t(programs.size()); ++r)
    for (const Action &a : programs[size_t(r)]) {
      if (a.op == Op::SendF)
        links[{r, a.peer}].first.push_back(
            {Op::RecvF, a.stage + 1, a.microbatch});
      if (a.op == Op::SendB)
        links[{r, a.peer}].first.push_back(
            {Op::RecvB, a.stage - 1, a.microbatch});
      if (isRecv(a.op))
        links[{a.peer, r}].second.push_back({a.op, a.stage, a.microbatch});
    }
  return links;
}

/// How many compute actions run before each receive, by tensor.
std::map<Tensor, int64_t> computeBefore(const std::vector<Action> &program) {
  std::map<Tensor, int64_t> at;
  int64_t computed = 0;
  for (const Action &a : program) {
    computed += isCompute(a.op);
    if (isRecv(a.op))
      at[{a.op, a.stage, a.microbatch}] = computed;
  }
  return at;
}

// Every generated schedule, reordered for links that match by order: each
// link receives in send order, the same receives are posted, none later than
// written (counted in compute actions before it), and the programs still
// verify. Only the V schedules need it: a link between neighbours carries
// both the activations of the V's first arm and the gradients of its second
// arm, which the two ranks run in different orders; every link of the other
// schedules carries one kind, sent and received in microbatch (or Megatron
// table) order.
TEST(ReceiveInSendOrder, EveryScheduleReceivesInSendOrderAndNothingLater) {
  struct Case {
    const char *name;
    int64_t pp, vpp, m;
    bool reorders;
  };
  for (const Case &c : std::vector<Case>{{"gpipe", 4, 1, 8, false},
                                         {"1f1b", 4, 1, 8, false},
                                         {"zb-h1", 4, 1, 8, false},
                                         {"interleaved-1f1b", 4, 2, 8, false},
                                         {"interleaved-1f1b", 2, 4, 6, false},
                                         {"zbv", 4, 2, 8, true},
                                         {"dualpipev", 4, 2, 8, true}}) {
    SCOPED_TRACE(c.name);
    Schedule s = build(c.name, c.pp, c.vpp, c.m);
    insertCommunication(s);
    const Schedule before = s;
    receiveInSendOrder(s.ranks);
    bool changed = false;
    for (auto &[link, orders] : linkOrders(s.ranks))
      EXPECT_EQ(orders.first, orders.second)
          << "link " << link.first << " -> " << link.second;
    for (int64_t r = 0; r < s.pp; ++r) {
      EXPECT_EQ(s.ranks[r].size(), before.ranks[r].size());
      changed |= s.ranks[r] != before.ranks[r];
      const auto was = computeBefore(before.ranks[r]);
      const auto now = computeBefore(s.ranks[r]);
      ASSERT_EQ(was.size(), now.size());
      for (const auto &[tensor, at] : now)
        EXPECT_LE(at, was.at(tensor));
    }
    EXPECT_EQ(changed, c.reorders);
    auto sim = simulate(s);
    EXPECT_TRUE(static_cast<bool>(sim)) << toString(sim.takeError());
  }
}

// A hand-made pair: rank 0 sends microbatches 0, 1, 2; rank 1 receives
// 2, 0, 1. Reordered, rank 1 posts 0, 1, 2 at its first receive.
TEST(ReceiveInSendOrder, PostsWhatTheSenderSentFirst) {
  std::vector<std::vector<Action>> programs(2);
  for (int32_t mb = 0; mb < 3; ++mb) {
    programs[0].push_back({Op::F, 0, mb});
    programs[0].push_back({Op::SendF, 0, mb, 1});
  }
  for (int32_t mb : {2, 0, 1}) {
    programs[1].push_back({Op::RecvF, 1, mb, 0});
    programs[1].push_back({Op::F, 1, mb});
  }
  receiveInSendOrder(programs);
  const std::vector<Action> want = {{Op::RecvF, 1, 0, 0}, {Op::RecvF, 1, 1, 0},
                                    {Op::RecvF, 1, 2, 0}, {Op::F, 1, 2},
                                    {Op::F, 1, 0},        {Op::F, 1, 1}};
  EXPECT_EQ(programs[1], want);
}

} // namespace
} // namespace hypipe::schedule

namespace hypipe::schedule {

// Evaluation's forward-only programs (forwardOnlySchedule): Megatron's
// forward_only order where the vectors have one, verified by the simulator
// for every schedule, each rank running every forward of its stages once
// and nothing else.
TEST(ForwardOnly, MegatronOrderAndEverySchedule) {
  int megatron = 0;
  const json all = vectors();
  for (const json &v : all["schedules"]) {
    if (!v["forward_only"].get<bool>() || v.contains("error"))
      continue;
    const int64_t vpp = v["vpp"].is_null() ? 1 : v["vpp"].get<int64_t>();
    Schedule s =
        build(v["schedule"] == "interleaved_1f1b" ? "interleaved-1f1b" : "1f1b",
              v["pp"], vpp, v["num_microbatches"]);
    Schedule forward = forwardOnlySchedule(s);
    for (const json &rank : v["ranks"])
      EXPECT_EQ(opsOf(forward, rank["pp_rank"]),
                rank["ops"].get<std::vector<std::string>>());
    ++megatron;
  }
  EXPECT_EQ(megatron, 1);
  const std::tuple<const char *, int64_t, int64_t, int64_t> shapes[] = {
      {"gpipe", 2, 1, 4},
      {"1f1b", 4, 1, 6},
      {"interleaved-1f1b", 2, 2, 4},
      {"interleaved-1f1b", 4, 2, 8},
      {"zb-h1", 2, 1, 4},
      {"zbv", 2, 2, 4},
      {"dualpipev", 2, 2, 4}};
  for (auto [name, pp, vpp, m] : shapes) {
    SCOPED_TRACE(name);
    Schedule forward = forwardOnlySchedule(build(name, pp, vpp, m));
    EXPECT_TRUE(forward.forwardOnly);
    auto simulated = simulate(forward);
    ASSERT_TRUE(static_cast<bool>(simulated))
        << toString(simulated.takeError());
    for (int64_t r = 0; r < pp; ++r) {
      int64_t forwards = 0;
      for (const Action &a : forward.ranks[r]) {
        EXPECT_TRUE(a.op == Op::F || isTransfer(a.op))
            << "rank " << r << " runs " << pytorchText(a);
        EXPECT_NE(a.op, Op::SendB);
        EXPECT_NE(a.op, Op::RecvB);
        forwards += a.op == Op::F;
      }
      EXPECT_EQ(forwards, vpp * m) << "rank " << r;
    }
    // A backward in a forward-only program is refused.
    Schedule withBackward = forward;
    withBackward.ranks.back().push_back(
        {Op::B, int32_t(forward.ranks.back().back().stage), 0});
    EXPECT_FALSE(static_cast<bool>(simulate(withBackward)));
  }
}

} // namespace hypipe::schedule
