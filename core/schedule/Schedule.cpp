//===- Schedule.cpp - schedule generators and communication ---------------===//
#include "core/schedule/Schedule.h"
#include "core/schedule/Simulate.h"

#include "core/Text.h"
#include "core/io/Files.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>

namespace hypipe::schedule {

namespace {

Error refuse(std::string message) { return makeError(message); }

} // namespace

int64_t Schedule::rankOf(int64_t stage) const {
  return rankOfStage(placement, pp, stage);
}

int64_t Schedule::chunkOf(int64_t stage) const {
  return chunkOfStage(placement, pp, stage);
}

int64_t Schedule::stageOf(int64_t rank, int64_t chunk) const {
  return stageOfChunk(placement, pp, rank, chunk);
}

Schedule forwardOnlySchedule(const Schedule &training) {
  Schedule forward = training;
  forward.forwardOnly = true;
  for (std::vector<Action> &program : forward.ranks)
    program.erase(std::remove_if(program.begin(), program.end(),
                                 [](const Action &a) { return a.op != Op::F; }),
                  program.end());
  insertCommunication(forward);
  return forward;
}

bool Schedule::splitBackward() const {
  for (const auto &program : ranks)
    for (const Action &a : program)
      if (a.op == Op::I || a.op == Op::W)
        return true;
  return false;
}

std::string Schedule::megatronText(const Action &a) const {
  return schedule::megatronText(a, placement, pp);
}

int64_t megatronWarmup(int64_t pp, int64_t vpp, int64_t m, int64_t groupSize,
                       int64_t rank, bool interleaved) {
  int64_t total = m * vpp;
  // Megatron runs pp = 1 without a pipeline; the interleaved formula still
  // holds for several chunks on one rank (its warm-up is the first group).
  int64_t warmup =
      interleaved ? (pp - rank - 1) * 2 + (vpp - 1) * groupSize : pp - rank - 1;
  return std::min(warmup, total);
}

std::vector<std::pair<int64_t, int64_t>>
interleavedTable(int64_t m, int64_t vpp, int64_t groupSize) {
  std::vector<std::pair<int64_t, int64_t>> table;
  for (int64_t first = 0; first < m; first += groupSize) {
    int64_t last = first + groupSize >= m ? m : first + groupSize;
    for (int64_t c = 0; c < vpp; ++c)
      for (int64_t mb = first; mb < last; ++mb)
        table.push_back({mb, c});
  }
  return table;
}

namespace {

using Program = std::vector<Action>;

Action compute(Op op, int64_t stage, int64_t microbatch) {
  return Action{op, static_cast<int32_t>(stage),
                static_cast<int32_t>(microbatch)};
}

void buildGpipe(Schedule &s) {
  for (int64_t r = 0; r < s.pp; ++r) {
    Program &p = s.ranks[r];
    for (int64_t c = 0; c < s.vpp; ++c)
      for (int64_t mb = 0; mb < s.microbatches; ++mb)
        p.push_back(compute(Op::F, s.stageOf(r, c), mb));
    for (int64_t c = s.vpp - 1; c >= 0; --c)
      for (int64_t mb = 0; mb < s.microbatches; ++mb)
        p.push_back(compute(Op::B, s.stageOf(r, c), mb));
  }
}

/// Megatron's forward_backward_pipelining_without_interleaving; with
/// `splitW`, each backward is I followed by W delayed by `rank` steps (ZB-H1).
void buildOneFOneB(Schedule &s, bool zeroBubble) {
  int64_t m = s.microbatches;
  for (int64_t r = 0; r < s.pp; ++r) {
    Program &p = s.ranks[r];
    int64_t warmup = megatronWarmup(s.pp, 1, m, s.pp, r, /*interleaved=*/false);
    int64_t remaining = m - warmup;
    int64_t nextW = 0;
    auto backward = [&](int64_t mb) {
      if (!zeroBubble) {
        p.push_back(compute(Op::B, r, mb));
        return;
      }
      p.push_back(compute(Op::I, r, mb));
      // Rank r keeps r weight gradients pending: they fill its end bubble
      // while the input gradients travel on to rank 0, and its activations
      // alive never exceed rank 0's (pp microbatches).
      if (mb - nextW >= r)
        p.push_back(compute(Op::W, r, nextW++));
    };
    for (int64_t i = 0; i < warmup; ++i)
      p.push_back(compute(Op::F, r, i));
    for (int64_t i = 0; i < remaining; ++i) {
      p.push_back(compute(Op::F, r, warmup + i));
      backward(i);
    }
    for (int64_t i = remaining; i < m; ++i)
      backward(i);
    while (zeroBubble && nextW < m)
      p.push_back(compute(Op::W, r, nextW++));
  }
}

/// Megatron's forward_backward_pipelining_with_interleaving.
void buildInterleaved(Schedule &s, int64_t groupSize) {
  int64_t m = s.microbatches, vpp = s.vpp;
  auto table = interleavedTable(m, vpp, groupSize);
  int64_t total = m * vpp;
  for (int64_t r = 0; r < s.pp; ++r) {
    Program &p = s.ranks[r];
    int64_t warmup =
        megatronWarmup(s.pp, vpp, m, groupSize, r, /*interleaved=*/true);
    int64_t remaining = total - warmup;
    auto forward = [&](int64_t k) {
      p.push_back(
          compute(Op::F, s.stageOf(r, table[k].second), table[k].first));
    };
    auto backward = [&](int64_t k) {
      p.push_back(compute(Op::B, s.stageOf(r, vpp - 1 - table[k].second),
                          table[k].first));
    };
    for (int64_t k = 0; k < warmup; ++k)
      forward(k);
    for (int64_t k = 0; k < remaining; ++k) {
      forward(k + warmup);
      backward(k);
    }
    for (int64_t k = remaining; k < total; ++k)
      backward(k);
  }
}

/// ZB-V: two stages per rank in a V, backward split into I and W, ordered by
/// a list scheduler over unit-time steps (docs/schedules.md): each rank runs
/// the ready input gradient of the lowest microbatch first, else a forward
/// while it holds fewer than 2*pp stage activations, else a pending weight
/// gradient.
void buildZbv(Schedule &s) {
  int64_t pp = s.pp, m = s.microbatches, stages = s.numStages();
  auto idx = [&](int64_t stage, int64_t mb) { return stage * m + mb; };
  std::vector<int64_t> fDone(stages * m, -1);
  std::vector<std::deque<std::pair<int64_t, int64_t>>> pendingW(pp);
  std::vector<int64_t> live(pp, 0), nextF0(pp, 0), nextF1(pp, 0);
  std::vector<std::set<std::pair<int64_t, int64_t>>> readyI(pp); // (mb, -stage)
  int64_t remaining = pp * 2 * m * 3;
  for (int64_t step = 0; remaining > 0; ++step) {
    std::vector<Action> chosen(pp, Action{Op::F, -1, -1});
    for (int64_t r = 0; r < pp; ++r) {
      // Input gradients whose inputs are in: on the last stage (stage
      // 2pp-1, chunk 1 of rank 0) as soon as its forward is done.
      int64_t sLow = s.stageOf(r, 0), sHigh = s.stageOf(r, 1);
      std::optional<Action> pick;
      for (auto [mb, negStage] : readyI[r]) {
        pick = compute(Op::I, -negStage, mb);
        break;
      }
      if (!pick && live[r] < 2 * pp) {
        // Forward on chunk 1 first (deeper stage), then chunk 0.
        int64_t mb1 = nextF1[r];
        if (mb1 < m && fDone[idx(sHigh - 1, mb1)] >= 0 &&
            fDone[idx(sHigh - 1, mb1)] < step)
          pick = compute(Op::F, sHigh, mb1);
        else if (nextF0[r] < m &&
                 (sLow == 0 || (fDone[idx(sLow - 1, nextF0[r])] >= 0 &&
                                fDone[idx(sLow - 1, nextF0[r])] < step)))
          pick = compute(Op::F, sLow, nextF0[r]);
      }
      if (!pick && !pendingW[r].empty()) {
        auto [stage, mb] = pendingW[r].front();
        pick = compute(Op::W, stage, mb);
      }
      if (pick)
        chosen[r] = *pick;
    }
    if (std::all_of(chosen.begin(), chosen.end(),
                    [](const Action &a) { return a.stage < 0; }))
      break; // cannot happen; the simulator would report the missing actions
    for (int64_t r = 0; r < pp; ++r) {
      Action a = chosen[r];
      if (a.stage < 0)
        continue;
      s.ranks[r].push_back(a);
      --remaining;
      if (a.op == Op::F) {
        fDone[idx(a.stage, a.microbatch)] = step;
        ++live[r];
        (a.stage == s.stageOf(r, 1) ? nextF1[r] : nextF0[r])++;
        if (a.stage == stages - 1)
          readyI[r].insert({a.microbatch, -a.stage});
      } else if (a.op == Op::I) {
        readyI[r].erase({a.microbatch, -a.stage});
        pendingW[r].push_back({a.stage, a.microbatch});
        if (a.stage > 0) {
          int64_t below = a.stage - 1, peer = s.rankOf(below);
          // Ready next step on the rank that holds the previous stage.
          readyI[peer].insert({a.microbatch, -below});
        }
      } else {
        pendingW[r].pop_front();
        --live[r];
      }
    }
  }
}

/// DualPipeV (PyTorch's ScheduleDualPipeV, DeepSeek's DualPipe cut in
/// half): rank r holds stages r (chunk 0) and 2pp-1-r (chunk 1) and runs
/// eight phases — forwards on chunk 0, paired forwards, zero-bubble
/// I/W/F on chunk 1, the main phase of overlapped forward-backward pairs
/// (F of one chunk with B of the other; written F then B), the drain, and
/// the weight gradients left over. Microbatch indices count per (stage,
/// kind) as PyTorch's counters do; a B counts for both I and W.
void buildDualPipeV(Schedule &s) {
  const int64_t pp = s.pp, m = s.microbatches;
  for (int64_t r = 0; r < pp; ++r) {
    std::vector<Action> &out = s.ranks[r];
    const int64_t s0 = s.stageOf(r, 0), s1 = s.stageOf(r, 1);
    std::map<std::pair<int64_t, Op>, int64_t> next; // (stage, op) -> mb
    std::deque<std::pair<int64_t, int64_t>> pendingW;
    auto add = [&](Op op, int64_t stage) {
      if (op == Op::B) {
        // A full backward advances the input and the weight counters.
        out.push_back(compute(Op::B, stage, next[{stage, Op::I}]++));
        ++next[{stage, Op::W}];
      } else if (op == Op::I) {
        int64_t mb = next[{stage, Op::I}]++;
        out.push_back(compute(Op::I, stage, mb));
        pendingW.push_back({stage, mb});
      } else {
        out.push_back(compute(op, stage, next[{stage, op}]++));
      }
    };
    auto weight = [&] {
      if (pendingW.empty())
        return;
      auto [stage, mb] = pendingW.front();
      pendingW.pop_front();
      out.push_back(compute(Op::W, stage, mb));
      ++next[{stage, Op::W}];
    };
    for (int64_t i = 0; i < (pp - r - 1) * 2; ++i) // 1: F0
      add(Op::F, s0);
    for (int64_t i = 0; i < r + 1; ++i) { // 2: F0 F1
      add(Op::F, s0);
      add(Op::F, s1);
    }
    for (int64_t i = 0; i < pp - r - 1; ++i) { // 3: I1 W F1
      add(Op::I, s1);
      weight();
      add(Op::F, s1);
    }
    for (int64_t i = 0; i < m - 2 * pp + r + 1; ++i) { // 4: F0B1 F1B0
      add(Op::F, s0); // overlapped with the B after it (on the last rank's
      add(Op::B, s1); // first pair, deliberately not)
      add(Op::F, s1);
      add(Op::B, s0);
    }
    for (int64_t i = 0; i < pp - r - 1; ++i) { // 5: B1 F1B0
      add(Op::B, s1);
      add(Op::F, s1);
      add(Op::B, s0);
    }
    bool split = false; // 6: B1 B0, the second half split into I and W
    for (int64_t i = 0, n = r + 1; i < n; ++i) {
      if (i == n / 2 && r % 2 == 1)
        split = true;
      add(split ? Op::I : Op::B, s1);
      if (i == n / 2 && r % 2 == 0)
        split = true;
      add(split ? Op::I : Op::B, s0);
    }
    for (int64_t i = 0; i < pp - r - 1; ++i) { // 7: W B0
      weight();
      add(split ? Op::I : Op::B, s0);
    }
    for (int64_t i = 0; i < r + 1; ++i) // 8: W
      weight();
  }
}

} // namespace

Error checkScheduleShape(ScheduleKind kind, int64_t vpp) {
  const char *name = scheduleName(kind);
  switch (kind) {
  case ScheduleKind::OneFOneB:
  case ScheduleKind::ZbH1:
    if (vpp == 1)
      return Error::success();
    return Error(Problem{
        fmt::format("schedule '{}' runs one stage per rank (vpp = 1), got "
                    "vpp = {}",
                    name, vpp),
        "use interleaved-1f1b (or zbv for vpp = 2)"});
  case ScheduleKind::ZbV:
  case ScheduleKind::DualPipeV:
    if (vpp == 2)
      return Error::success();
    return Error(Problem{
        fmt::format("{} runs exactly two stages per rank in a V (vpp = 2), "
                    "got vpp = {}",
                    name, vpp),
        "split the model into 2 * pp stages"});
  case ScheduleKind::Interleaved1F1B:
    if (vpp > 1)
      return Error::success();
    return Error(Problem{"interleaved-1f1b needs virtual stages (vpp > 1), "
                         "got vpp = 1",
                         "split the model into pp * vpp stages with vpp > 1 "
                         "(in a pattern: '|' between them), or use 1f1b"});
  case ScheduleKind::GPipe:
    return Error::success();
  }
  return Error::success();
}

Error checkScheduleSize(int64_t pp, int64_t vpp, int64_t microbatches) {
  if (pp < 1 || vpp < 1 || microbatches < 1)
    return refuse(fmt::format(
        "pp ({}), vpp ({}) and microbatches ({}) must be at least 1", pp, vpp,
        microbatches));
  // A bound on what one schedule may allocate (about 100 bytes per
  // stage-microbatch with its communication). Each factor is bounded before
  // any product is taken, so none can overflow.
  constexpr int64_t kMaxStageMicrobatches = int64_t(1) << 22;
  if (pp > kMaxStageMicrobatches || vpp > kMaxStageMicrobatches ||
      microbatches > kMaxStageMicrobatches ||
      pp * vpp > kMaxStageMicrobatches ||
      pp * vpp * microbatches > kMaxStageMicrobatches)
    return refuse(fmt::format(
        "pp * vpp * microbatches = {} * {} * {} is more than the {} "
        "stage-microbatches a schedule may hold; use fewer stages or "
        "microbatches",
        pp, vpp, microbatches, kMaxStageMicrobatches));
  return Error::success();
}

namespace {

Error checkRequest(const ScheduleRequest &q, ScheduleKind kind) {
  if (Error refused = checkScheduleSize(q.pp, q.vpp, q.microbatches))
    return refused;
  if (Error refused = checkScheduleShape(kind, q.vpp))
    return refused;
  if (kind == ScheduleKind::DualPipeV && q.microbatches < 2 * q.pp)
    return refuse(fmt::format(
        "dualpipev needs at least as many microbatches as stages (2 * pp = "
        "{}), got {}: use --microbatches {} or more (PyTorch refuses it too)",
        2 * q.pp, q.microbatches, 2 * q.pp));
  if (kind != ScheduleKind::Interleaved1F1B)
    return Error::success();
  return checkGroupSize(q.pp, q.microbatches, q.groupSize.value_or(q.pp));
}

} // namespace

Error checkGroupSize(int64_t pp, int64_t microbatches, int64_t g) {
  if (g < pp || g > microbatches)
    return refuse(fmt::format(
        "microbatch_group_size_per_vp_stage must be between pp = "
        "{} and microbatches = {}, "
        "got {}{}",
        pp, microbatches, g,
        microbatches < pp
            ? fmt::format(": use at least {} microbatches", pp)
            : fmt::format(": use a group size in [{}, {}]", pp, microbatches)));
  int64_t finalGroup = microbatches % g;
  if (finalGroup > 0 && finalGroup < pp) {
    std::vector<std::string> fixes;
    for (int64_t alt = pp; alt <= microbatches && fixes.size() < 3; ++alt)
      if (microbatches % alt == 0 || microbatches % alt >= pp)
        fixes.push_back(std::to_string(alt));
    return refuse(fmt::format(
        "the last microbatch group would hold {} microbatches ({} % {}), fewer "
        "than pp = {}: "
        "that stalls the pipeline (Megatron refuses it too); use a group size "
        "of {} or a "
        "microbatch count that leaves 0 or at least pp in the last group",
        finalGroup, microbatches, g, pp, text::join(fixes, " or ")));
  }
  return Error::success();
}

Error checkSchedule(const ScheduleRequest &q) {
  return checkRequest(q, q.kind);
}

Expected<Schedule> buildSchedule(const ScheduleRequest &q) {
  if (auto err = checkRequest(q, q.kind))
    return std::move(err);
  Schedule s;
  s.name = scheduleName(q.kind);
  s.pp = q.pp;
  s.vpp = q.vpp;
  s.microbatches = q.microbatches;
  s.ranks.resize(q.pp);
  s.placement = placementOf(q.kind);
  switch (q.kind) {
  case ScheduleKind::GPipe:
    buildGpipe(s);
    break;
  case ScheduleKind::OneFOneB:
  case ScheduleKind::ZbH1:
    buildOneFOneB(s, q.kind == ScheduleKind::ZbH1);
    break;
  case ScheduleKind::Interleaved1F1B:
    buildInterleaved(s, q.groupSize.value_or(q.pp));
    break;
  case ScheduleKind::DualPipeV:
    buildDualPipeV(s);
    break;
  case ScheduleKind::ZbV:
    buildZbv(s);
    break;
  }
  return s;
}

void insertCommunication(Schedule &s) {
  if (hasTransfers(s))
    return; // written out already: run as written
  int64_t last = s.numStages() - 1;
  for (int64_t r = 0; r < s.pp; ++r) {
    std::vector<Action> out;
    out.reserve(s.ranks[r].size() * 2);
    auto peer = [&](int64_t stage) {
      return static_cast<int32_t>(s.rankOf(stage));
    };
    for (const Action &a : s.ranks[r]) {
      int64_t st = a.stage;
      if (a.op == Op::F) {
        if (st > 0 && s.rankOf(st - 1) != r)
          out.push_back({Op::RecvF, a.stage, a.microbatch, peer(st - 1)});
        out.push_back(a);
        if (st < last && s.rankOf(st + 1) != r)
          out.push_back({Op::SendF, a.stage, a.microbatch, peer(st + 1)});
      } else if (a.op == Op::B || a.op == Op::I) {
        if (st < last && s.rankOf(st + 1) != r)
          out.push_back({Op::RecvB, a.stage, a.microbatch, peer(st + 1)});
        out.push_back(a);
        if (st > 0 && s.rankOf(st - 1) != r)
          out.push_back({Op::SendB, a.stage, a.microbatch, peer(st - 1)});
      } else {
        out.push_back(a);
      }
    }
    for (size_t i = 0; i + 1 < out.size(); ++i) {
      bool send = out[i].op == Op::SendF || out[i].op == Op::SendB;
      bool recv = out[i + 1].op == Op::RecvF || out[i + 1].op == Op::RecvB;
      if (send && recv && out[i].peer == out[i + 1].peer)
        out[i].batched = true;
    }
    s.ranks[r] = std::move(out);
  }
}

void receiveInSendOrder(std::vector<std::vector<Action>> &programs) {
  const int32_t n = int32_t(programs.size());
  // What each sender sends each receiver, in order, as the receives that
  // take it: (receiver, sender) -> receives.
  std::map<std::pair<int32_t, int32_t>, std::vector<Action>> sent;
  for (int32_t r = 0; r < n; ++r)
    for (const Action &a : programs[size_t(r)]) {
      if (a.op == Op::SendF)
        sent[{a.peer, r}].push_back({Op::RecvF, a.stage + 1, a.microbatch, r});
      else if (a.op == Op::SendB)
        sent[{a.peer, r}].push_back({Op::RecvB, a.stage - 1, a.microbatch, r});
    }
  for (int32_t r = 0; r < n; ++r) {
    std::vector<Action> out;
    std::map<int32_t, size_t> taken; // sender -> receives emitted in order
    std::set<std::tuple<Op, int32_t, int32_t, int32_t>> posted;
    for (const Action &a : programs[size_t(r)]) {
      if (!isRecv(a.op)) {
        out.push_back(a);
        continue;
      }
      if (posted.count({a.op, a.stage, a.microbatch, a.peer}))
        continue; // posted already, ahead of its place
      const std::vector<Action> &order = sent[{r, a.peer}];
      size_t &k = taken[a.peer];
      auto it = std::find(order.begin() + std::ptrdiff_t(k), order.end(), a);
      if (it == order.end()) {
        out.push_back(a); // unmatched: the verifier says so
        continue;
      }
      for (; order.begin() + std::ptrdiff_t(k) <= it; ++k) {
        const Action &x = order[k];
        out.push_back(x == a ? a : x); // the written receive keeps its flags
        posted.insert({x.op, x.stage, x.microbatch, x.peer});
      }
    }
    programs[size_t(r)] = std::move(out);
  }
}

bool hasTransfers(const Schedule &s) {
  for (const auto &program : s.ranks)
    for (const Action &a : program)
      if (isTransfer(a.op))
        return true;
  return false;
}

std::string toCsv(const Schedule &s) {
  std::string out;
  for (const auto &program : s.ranks) {
    for (size_t i = 0; i < program.size(); ++i) {
      if (i)
        out += ',';
      out += pytorchText(program[i]);
    }
    out += '\n';
  }
  return out;
}

Expected<Schedule> fromCsv(std::string_view text, int64_t pp, int64_t vpp,
                           int64_t microbatches, Placement placement) {
  auto imported = importCsv(text, pp, vpp, microbatches, placement);
  if (!imported)
    return imported.takeError();
  return std::move(imported->schedule);
}

namespace {

/// The text of a cell as messages show it: at most 40 characters.
std::string shownCell(std::string_view cell) {
  return cell.size() <= 40 ? std::string(cell)
                           : std::string(cell.substr(0, 37)) + "...";
}

} // namespace

Expected<CsvImport> importCsv(std::string_view text, int64_t pp, int64_t vpp,
                              int64_t microbatches,
                              std::optional<Placement> placement) {
  if (Error refused = checkScheduleSize(pp, vpp, microbatches))
    return refused;
  // Spreadsheets save CSV with a UTF-8 byte-order mark: it is not a cell.
  constexpr std::string_view kByteOrderMark = "\xEF\xBB\xBF";
  if (text.substr(0, kByteOrderMark.size()) == kByteOrderMark)
    text.remove_prefix(kByteOrderMark.size());
  std::vector<std::string_view> lines = text::split(text, '\n');
  while (!lines.empty() && text::trim(lines.back()).empty())
    lines.pop_back();
  if (static_cast<int64_t>(lines.size()) != pp)
    return refuse(
        fmt::format("the CSV has {} rows but pp = {}: write one row per rank",
                    lines.size(), pp));
  auto where = [](size_t rank, size_t column) {
    return fmt::format("row {} (rank {}), column {}", rank + 1, rank,
                       column + 1);
  };
  // One pass per candidate placement: the cells parse alike under both, but
  // a communication action's peer depends on it.
  auto parse = [&](Placement p, CsvImport &out) -> Error {
    out = CsvImport{};
    Schedule &s = out.schedule;
    s.name = "csv";
    s.pp = pp;
    s.vpp = vpp;
    s.microbatches = microbatches;
    s.placement = p;
    for (size_t rank = 0; rank < lines.size(); ++rank) {
      std::vector<Action> program;
      std::vector<std::string_view> cells = text::split(lines[rank], ',');
      for (size_t column = 0; column < cells.size(); ++column) {
        std::string_view cell = text::trim(cells[column]);
        if (cell.empty())
          continue; // an idle slot
        std::vector<std::string_view> parts = {cell};
        if (text::consumeFront(cell, "(")) {
          size_t close = cell.find(')');
          if (close == std::string_view::npos ||
              cell.substr(close + 1) != "OVERLAP_F_B")
            return refuse(fmt::format(
                "{}: '{}' is not an overlapped pair: expected "
                "(<forward>;<backward>)OVERLAP_F_B, e.g. (0F3;3B1)OVERLAP_F_B",
                where(rank, column), shownCell(cells[column])));
          parts = text::split(cell.substr(0, close), ';');
          ++out.overlapped;
        }
        for (std::string_view part : parts) {
          auto action = parsePytorchAction(part, s.actionContext());
          if (!action)
            return refuse(fmt::format("{}: {}", where(rank, column),
                                      action.problem().message));
          program.push_back(*action);
        }
        if (parts.size() != 1 &&
            (parts.size() != 2 || program[program.size() - 2].op != Op::F ||
             isCompute(program.back().op) == false ||
             program.back().op == Op::F))
          return refuse(fmt::format("{}: '{}' must pair one forward with one "
                                    "backward",
                                    where(rank, column),
                                    shownCell(cells[column])));
      }
      for (const Action &a : program) {
        out.fsdpActions += a.op == Op::Unshard || a.op == Op::Reshard;
        out.reduceGrads += a.op == Op::ReduceGrad;
      }
      s.ranks.push_back(std::move(program));
    }
    return Error::success();
  };
  auto fits = [&](const Schedule &s, Placement p) -> std::optional<Action> {
    for (size_t r = 0; r < s.ranks.size(); ++r)
      for (const Action &a : s.ranks[r])
        if (!isTransfer(a.op) &&
            rankOfStage(p, pp, a.stage) != static_cast<int64_t>(r))
          return a;
    return std::nullopt;
  };
  CsvImport loop;
  if (placement) {
    if (Error err = parse(*placement, loop))
      return err;
    return loop;
  }
  if (Error err = parse(Placement::Loop, loop))
    return err;
  std::optional<Action> offLoop = fits(loop.schedule, Placement::Loop);
  if (!offLoop)
    return loop;
  CsvImport v;
  if (vpp == 2 && !parse(Placement::V, v) && !fits(v.schedule, Placement::V)) {
    v.placementInferred = true;
    return v;
  }
  return refuse(fmt::format(
      "{} runs on a rank that holds neither its loop placement (stage s on "
      "rank s % pp){}",
      pytorchText(*offLoop),
      vpp == 2 ? " nor its V placement (rank r holds stages r and 2 pp - 1 - r)"
               : ""));
}

Expected<CsvImport> importCsvForModel(std::string_view text, ScheduleKind kind,
                                      int64_t pp, int64_t vpp,
                                      int64_t microbatches) {
  auto imported = importCsv(text, pp, vpp, microbatches, std::nullopt);
  if (!imported)
    return imported.takeError();
  Schedule &s = imported->schedule;
  const Placement stagesOn = placementOf(kind);
  if (s.placement != stagesOn) {
    Problem p;
    p.message = fmt::format(
        "the file places the stages {} but schedule '{}' places the model's "
        "stages {}",
        s.placement == Placement::V ? "in a V (rank r holds stages r and 2 pp "
                                      "- 1 - r)"
                                    : "in a loop (stage s on rank s % pp)",
        scheduleName(kind), stagesOn == Placement::V ? "in a V" : "in a loop");
    p.help = s.placement == Placement::V
                 ? "set parallel.schedule to zbv or dualpipev, the schedules "
                   "that place stages in a V"
                 : "set parallel.schedule to one that places stages in a "
                   "loop (gpipe, 1f1b, interleaved-1f1b, zb-h1)";
    return Error(std::move(p));
  }
  int64_t runs = 0; // microbatches the file's compute actions name
  for (const auto &program : s.ranks)
    for (const Action &a : program)
      if (isCompute(a.op))
        runs = std::max<int64_t>(runs, a.microbatch + 1);
  if (runs != microbatches) {
    Problem p;
    p.message = fmt::format("the file runs {} microbatches but the model "
                            "takes {} per step",
                            runs, microbatches);
    p.help = fmt::format("set parallel.microbatches: {}, or write the "
                         "schedule for {} microbatches",
                         runs, microbatches);
    return Error(std::move(p));
  }
  s.name = scheduleName(kind);
  Schedule withTransfers = s;
  insertCommunication(withTransfers);
  if (auto verified = simulate(withTransfers); !verified)
    return verified.takeError();
  return imported;
}

Expected<CsvImport> readCsvForModel(const std::string &path, ScheduleKind kind,
                                    int64_t pp, int64_t vpp,
                                    int64_t microbatches) {
  Expected<std::string> text = files::readBounded(path, files::kScheduleCsv);
  if (!text) {
    Problem p = text.takeError().takeProblem();
    p.help = "give the path of a CSV that torch.distributed.pipelining wrote "
             "(parallel.schedule_csv is read from the spec's directory, "
             "--schedule-csv from the working directory)";
    return Error(std::move(p));
  }
  auto imported = importCsvForModel(*text, kind, pp, vpp, microbatches);
  if (!imported) {
    Problem p = imported.takeError().takeProblem();
    p.message = path + ": " + p.message;
    return Error(std::move(p));
  }
  return imported;
}

std::vector<std::string> importNotes(const CsvImport &import) {
  std::vector<std::string> notes;
  if (import.placementInferred)
    notes.push_back("placement V inferred from the file (rank r holds stages "
                    "r and 2 pp - 1 - r)");
  if (import.overlapped)
    notes.push_back(fmt::format(
        "{} OVERLAP_F_B pair{} run as the forward then the backward",
        import.overlapped, import.overlapped == 1 ? "" : "s"));
  if (import.fsdpActions)
    notes.push_back(fmt::format("{} UNSHARD/RESHARD kept as no-ops (FSDP's: "
                                "no sharded parameters here)",
                                import.fsdpActions));
  if (import.reduceGrads)
    notes.push_back(fmt::format(
        "{} REDUCE_GRAD kept: each starts its stage's data-parallel gradient "
        "reduction where it stands",
        import.reduceGrads));
  return notes;
}

} // namespace hypipe::schedule
