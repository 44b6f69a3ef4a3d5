//===- Simulate.cpp - the all-ranks simulator -----------------------------===//
#include "core/schedule/Simulate.h"

#include "core/Text.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace hypipe::schedule {

double Costs::cost(Op op, int64_t stage) const {
  auto pick = [&](const std::vector<double> &perStage, double uniform) {
    return stage < static_cast<int64_t>(perStage.size()) ? perStage[stage]
                                                         : uniform;
  };
  auto tensor = [&](const std::vector<double> &perStage) {
    return pick(perStage, 0.0);
  };
  switch (op) {
  case Op::F:
    return pick(stageF, f) + tensor(stageTensorF);
  case Op::B:
    return pick(stageB, b) + tensor(stageTensorI);
  case Op::I:
    return pick(stageI, i) + tensor(stageTensorI);
  case Op::W:
    return pick(stageW, w);
  default:
    return 0;
  }
}

Error parseCosts(std::string_view text, Costs &costs) {
  for (std::string_view item : text::split(text, ',')) {
    if (item.empty())
      continue;
    item = text::trim(item);
    size_t eq = item.find('=');
    std::string_view key = item.substr(0, eq);
    std::string_view value =
        eq == std::string_view::npos ? std::string_view() : item.substr(eq + 1);
    double v;
    if (!text::parseDouble(text::trim(value), v) || !(v >= 0))
      return makeError(
          fmt::format("cost '{}' needs a non-negative number, e.g. F=1", item));
    key = text::trim(key);
    if (key == "F")
      costs.f = v;
    else if (key == "B")
      costs.b = v;
    else if (key == "I")
      costs.i = v;
    else if (key == "W")
      costs.w = v;
    else
      return makeError(fmt::format("unknown cost '{}': use F, B, I or W, e.g. "
                                   "--costs F=1,B=2,I=1,W=1",
                                   key));
  }
  return Error::success();
}

namespace {

constexpr double kNotYet = -1;

class Simulator {
public:
  Simulator(const Schedule &s, const Costs &c)
      : s(s), c(c), stages(s.numStages()), m(s.microbatches) {
    size_t n = static_cast<size_t>(stages * m);
    for (auto *v : {&fEnd, &bEnd, &wEnd, &fArrive, &bArrive, &recvFEnd,
                    &recvBEnd, &fData, &bData, &fSendIssued, &bSendIssued})
      v->assign(n, kNotYet);
    splitDone.assign(n, false);
    for (const auto &program : s.ranks)
      for (const Action &a : program)
        hasComm = hasComm || isTransfer(a.op);
    reduced.assign(static_cast<size_t>(stages), false);
    backwardsDone.assign(static_cast<size_t>(stages), 0);
    reducedInProgram.assign(static_cast<size_t>(stages), false);
    for (const auto &program : s.ranks)
      for (const Action &a : program)
        if (a.op == Op::ReduceGrad && a.stage >= 0 && a.stage < stages)
          reducedInProgram[static_cast<size_t>(a.stage)] = true;
    collectiveFree.assign(s.pp, 0);
    pc.assign(s.pp, 0);
    clock.assign(s.pp, 0);
    const size_t pairs = static_cast<size_t>(s.pp * s.pp * 2);
    streamFree.assign(pairs, 0);
    groupStart.assign(pairs, 0);
    groupDone.assign(pairs, 0);
    streams.resize(pairs);
    streamNext.assign(pairs, 0);
    result.busy.assign(s.pp, 0);
    result.peakActivations.assign(s.pp, 0);
    result.peakActivationBytes.assign(s.pp, 0);
    live.assign(s.pp, 0);
    liveBytes.assign(s.pp, 0);
    result.timings.resize(s.pp);
    for (int64_t r = 0; r < s.pp; ++r)
      result.timings[r].resize(s.ranks[r].size());
  }

  Expected<Simulation> run();

private:
  size_t at(int64_t stage, int64_t mb) const {
    return static_cast<size_t>(stage * m + mb);
  }
  /// Actions in messages: PyTorch's notation, the one the CSV uses.
  std::string text(const Action &a) const { return pytorchText(a); }
  Error fail(std::string message) const { return makeError(message); }
  /// What `a` on `rank` waits for, or the time it can start after.
  /// Returns false (and fills `waitingFor`) when a dependency is not done.
  Expected<bool> ready(int64_t rank, const Action &a, double &after,
                       std::string &waitingFor);
  Error execute(int64_t rank, const Action &a, double start, size_t step);
  std::string grid() const;

  const Schedule &s;
  const Costs &c;
  int64_t stages, m;
  bool hasComm = false;
  std::vector<double> fEnd, bEnd, wEnd, fArrive, bArrive, recvFEnd, recvBEnd;
  /// In-order streams: when a send's data is at its peer, keyed by the
  /// sending stage and microbatch.
  std::vector<double> fData, bData;
  std::vector<double> fSendIssued, bSendIssued; ///< each send once

  std::vector<double> streamFree;            ///< per (rank, peer) channel
  std::vector<double> groupStart, groupDone; ///< the channel's open group
  /// Starts one side of a transfer on `rank`'s stream; completes the
  /// transfer when the other side has started.
  /// One send or receive on a stream, in program order.
  struct StreamOp {
    bool send;
    double issued;
    size_t key;                  ///< the sending stage and microbatch
    std::vector<double> *dataAt; ///< when the send's data is at the peer
    std::vector<double> *arrive; ///< the receive's completion (consumers)
    size_t step;                 ///< in its rank's program
    /// Issued together with the previous op (a send and the receive after
    /// it batched into one NCCL group, Megatron's batch_isend_irecv).
    bool joinsPrevious = false;
    double transfer = 0; ///< a send's time on the link
  };
  std::vector<std::vector<StreamOp>> streams; ///< per channel
  std::vector<size_t> streamNext;
  /// The stream `rank` sends to (`send`) or receives from `peer` on:
  /// PyTorch's NCCL P2P keeps one communicator and stream per pair of
  /// ranks, hypipe's one per direction (Costs::perDirection).
  size_t channel(int64_t rank, int64_t peer, bool send) const {
    return static_cast<size_t>((rank * s.pp + peer) * 2 +
                               (c.perDirection && send));
  }
  /// The receive at `step` is batched with the send before it.
  bool joinsBatch(int64_t rank, size_t step) const {
    if (step == 0)
      return false;
    const Action &prev = s.ranks[rank][step - 1];
    return prev.batched && (prev.op == Op::SendF || prev.op == Op::SendB);
  }
  /// Starts every stream's head op that can start; true when any did.
  bool advanceStreams();
  std::vector<bool> splitDone; ///< the backward ran as I (so W must follow)
  std::vector<bool> reduced;   ///< per stage: its REDUCE_GRAD ran
  /// Checks the REDUCE_GRAD of `stage` at `step`: once, and after every
  /// backward of the stage, when its gradients are final.
  Error reduceGrad(int64_t rank, int64_t stage, size_t step);
  /// Counts a finished backward of `stage` (B, or W after I) running from
  /// `start` to `end`; the last one starts the stage's reduction, bucket by
  /// bucket over its weight-gradient part, unless its program starts it
  /// with REDUCE_GRAD.
  void backwardDone(int64_t rank, int64_t stage, double start, double end);
  /// Queues the stage's data-parallel reduction on `rank`'s collective
  /// stream: whole at `ready`, or in Costs::stageBuckets buckets ready
  /// evenly over the `spread` before `ready`.
  void startReduction(int64_t rank, int64_t stage, double ready,
                      double spread = 0);
  std::vector<int64_t> backwardsDone; ///< per stage
  std::vector<bool> reducedInProgram; ///< per stage: it has a REDUCE_GRAD
  std::vector<double> collectiveFree; ///< per rank
  std::vector<size_t> pc;
  std::vector<double> clock, liveBytes;
  std::vector<int64_t> live;
  Simulation result;
};

Expected<bool> Simulator::ready(int64_t r, const Action &a, double &after,
                                std::string &waitingFor) {
  int64_t st = a.stage, mb = a.microbatch;
  after = clock[r];
  if (isStageAction(a.op) && st >= 0 && st < stages && s.rankOf(st) == r)
    return true; // runs where it is written; REDUCE_GRAD is checked there
  if (st < 0 || st >= stages || mb < 0 || mb >= m)
    return fail(fmt::format(
        "rank {} step {}: {} names stage {} / microbatch {}, out of range "
        "({} stages, {} microbatches)",
        r, pc[r], pytorchText(a), st, mb, stages, m));
  if (s.rankOf(st) != r)
    return fail(fmt::format(
        "rank {} step {}: {} runs stage {}, which belongs to rank {}", r, pc[r],
        text(a), st, s.rankOf(st)));
  auto need = [&](double time, std::string what) {
    if (time == kNotYet) {
      waitingFor = std::move(what);
      return false;
    }
    after = std::max(after, time);
    return true;
  };
  auto peerCheck = [&](int64_t expected) -> Error {
    if (a.peer != expected)
      return fail(fmt::format(
          "rank {} step {}: {} names peer {} but stage {} is on rank {}", r,
          pc[r], pytorchText(a), a.peer,
          a.op == Op::SendF || a.op == Op::RecvB ? st + 1 : st - 1, expected));
    return Error::success();
  };
  const bool posted = c.postedReceives || c.inOrderStreams;
  switch (a.op) {
  case Op::F:
    if (st == 0)
      return true;
    if (s.rankOf(st - 1) == r || !hasComm)
      return need(
          fEnd[at(st - 1, mb)] == kNotYet
              ? kNotYet
              : fEnd[at(st - 1, mb)] +
                    (s.rankOf(st - 1) == r ? 0 : c.transfer(st - 1, st)),
          fmt::format("the forward of microbatch {} on stage {}", mb, st - 1));
    if (!need(recvFEnd[at(st, mb)],
              fmt::format("RECV_F of microbatch {} for stage {}", mb, st)))
      return false;
    // A posted receive's data: the send plus the transfer.
    return !posted ||
           need(fArrive[at(st - 1, mb)],
                fmt::format("SEND_F of microbatch {} from stage {} on rank {}",
                            mb, st - 1, s.rankOf(st - 1)));
  case Op::B:
  case Op::I: {
    if (!need(fEnd[at(st, mb)], fmt::format("its own forward ({}F{})", st, mb)))
      return false;
    if (st == stages - 1)
      return true;
    if (s.rankOf(st + 1) == r || !hasComm)
      return need(
          bEnd[at(st + 1, mb)] == kNotYet
              ? kNotYet
              : bEnd[at(st + 1, mb)] +
                    (s.rankOf(st + 1) == r ? 0 : c.transfer(st + 1, st)),
          fmt::format("the backward of microbatch {} on stage {}", mb, st + 1));
    if (!need(recvBEnd[at(st, mb)],
              fmt::format("RECV_B of microbatch {} for stage {}", mb, st)))
      return false;
    return !posted ||
           need(bArrive[at(st + 1, mb)],
                fmt::format("SEND_B of microbatch {} from stage {} on rank {}",
                            mb, st + 1, s.rankOf(st + 1)));
  }
  case Op::W:
    return need(bEnd[at(st, mb)],
                fmt::format("its input gradient ({}I{})", st, mb));
  case Op::SendF:
    if (st == stages - 1)
      return fail(fmt::format("rank {} step {}: {} sends past the last stage",
                              r, pc[r], pytorchText(a)));
    if (auto err = peerCheck(s.rankOf(st + 1)))
      return std::move(err);
    return need(fEnd[at(st, mb)],
                fmt::format("the forward it sends ({}F{})", st, mb));
  case Op::SendB:
    if (st == 0)
      return fail(
          fmt::format("rank {} step {}: {} sends before the first stage", r,
                      pc[r], pytorchText(a)));
    if (auto err = peerCheck(s.rankOf(st - 1)))
      return std::move(err);
    return need(bEnd[at(st, mb)],
                fmt::format("the backward it sends ({}B{})", st, mb));
  case Op::RecvF:
    if (st == 0)
      return fail(
          fmt::format("rank {} step {}: {} receives before the first stage", r,
                      pc[r], pytorchText(a)));
    if (auto err = peerCheck(s.rankOf(st - 1)))
      return std::move(err);
    if (posted)
      return true; // posted now; its consumer waits for the data
    return need(fArrive[at(st - 1, mb)],
                fmt::format("SEND_F of microbatch {} from stage {} on rank {}",
                            mb, st - 1, s.rankOf(st - 1)));
  case Op::RecvB:
    if (st == stages - 1)
      return fail(
          fmt::format("rank {} step {}: {} receives past the last stage", r,
                      pc[r], pytorchText(a)));
    if (auto err = peerCheck(s.rankOf(st + 1)))
      return std::move(err);
    if (posted)
      return true;
    return need(bArrive[at(st + 1, mb)],
                fmt::format("SEND_B of microbatch {} from stage {} on rank {}",
                            mb, st + 1, s.rankOf(st + 1)));
  }
  return true;
}

Error Simulator::execute(int64_t r, const Action &a, double start,
                         size_t step) {
  size_t k = at(a.stage, a.microbatch);
  double end = start + c.cost(a.op, a.stage);
  auto once = [&](std::vector<double> &slot, const char *what) -> Error {
    if (slot[k] != kNotYet)
      return fail(fmt::format(
          "rank {} step {}: {} of microbatch {} on stage {} runs twice", r,
          step, what, a.microbatch, a.stage));
    slot[k] = end;
    return Error::success();
  };
  double activation = a.stage < static_cast<int64_t>(c.activationBytes.size())
                          ? c.activationBytes[a.stage]
                          : 0;
  switch (a.op) {
  case Op::F:
    if (auto err = once(fEnd, "the forward"))
      return err;
    ++live[r];
    liveBytes[r] += activation;
    result.peakActivations[r] = std::max(result.peakActivations[r], live[r]);
    result.peakActivationBytes[r] =
        std::max(result.peakActivationBytes[r], liveBytes[r]);
    break;
  case Op::B:
  case Op::I:
    if (auto err =
            once(bEnd, a.op == Op::B ? "the backward" : "the input gradient"))
      return err;
    splitDone[k] = a.op == Op::I;
    if (a.op == Op::B) {
      --live[r];
      liveBytes[r] -= activation;
      backwardDone(r, a.stage, start, end);
    }
    break;
  case Op::W:
    if (!splitDone[k])
      return fail(fmt::format(
          "rank {} step {}: W of microbatch {} on stage {} follows a full "
          "backward B; split backwards run I then W",
          r, step, a.microbatch, a.stage));
    if (auto err = once(wEnd, "the weight gradient"))
      return err;
    --live[r];
    liveBytes[r] -= activation;
    backwardDone(r, a.stage, start, end);
    break;
  case Op::SendF:
  case Op::SendB:
  case Op::RecvF:
  case Op::RecvB: {
    const bool forward = a.op == Op::SendF || a.op == Op::RecvF;
    std::vector<double> &arrive = forward ? fArrive : bArrive;
    std::vector<double> &data = forward ? fData : bData;
    if (isSend(a.op)) {
      std::vector<double> &issued = forward ? fSendIssued : bSendIssued;
      if (auto err = once(c.inOrderStreams ? issued : arrive, opName(a.op)))
        return err;
      const double transfer =
          c.transfer(a.stage, forward ? a.stage + 1 : a.stage - 1);
      if (c.inOrderStreams)
        streams[channel(r, a.peer, true)].push_back(
            {true, start, k, &data, &arrive, step, false, transfer});
      else
        arrive[k] = start + transfer;
      end = start;
    } else {
      if (auto err = once(forward ? recvFEnd : recvBEnd, opName(a.op)))
        return err;
      // Keyed by the sending stage, as the send's side is.
      const int64_t from = forward ? a.stage - 1 : a.stage + 1;
      if (c.inOrderStreams)
        streams[channel(r, a.peer, false)].push_back(
            {false, start, at(from, a.microbatch), &data, &arrive, step,
             joinsBatch(r, step) && !c.perDirection});
    }
    break;
  }
  case Op::Unshard:
  case Op::Reshard:
    break; // FSDP's: nothing is sharded here
  case Op::ReduceGrad:
    if (auto err = reduceGrad(r, a.stage, step))
      return err;
    startReduction(r, a.stage, start);
    break;
  }
  result.timings[r][step] = {start, end};
  if (isCompute(a.op))
    result.busy[r] += end - start;
  clock[r] = end;
  return Error::success();
}

Error Simulator::reduceGrad(int64_t r, int64_t stage, size_t step) {
  if (reduced[stage])
    return fail(fmt::format("rank {} step {}: {}REDUCE_GRAD runs twice", r,
                            step, stage));
  reduced[stage] = true;
  for (int64_t mb = 0; mb < m; ++mb) {
    size_t k = at(stage, mb);
    if (bEnd[k] == kNotYet || (splitDone[k] && wEnd[k] == kNotYet))
      return fail(fmt::format(
          "rank {} step {}: {}REDUCE_GRAD comes before the {} of microbatch "
          "{} on stage {}: the stage's gradients are not final there; move it "
          "after the stage's last backward on rank {}",
          r, step, stage, bEnd[k] == kNotYet ? "backward" : "weight gradient",
          mb, stage, r));
  }
  return Error::success();
}

void Simulator::backwardDone(int64_t r, int64_t stage, double start,
                             double end) {
  if (++backwardsDone[static_cast<size_t>(stage)] == m &&
      !reducedInProgram[static_cast<size_t>(stage)])
    startReduction(r, stage, end, std::min(c.cost(Op::W, stage), end - start));
}

void Simulator::startReduction(int64_t r, int64_t stage, double ready,
                               double spread) {
  if (stage >= static_cast<int64_t>(c.stageReduce.size()))
    return;
  const double total = c.stageReduce[static_cast<size_t>(stage)];
  const int64_t k = stage < static_cast<int64_t>(c.stageBuckets.size())
                        ? c.stageBuckets[static_cast<size_t>(stage)]
                        : 1;
  double &free = collectiveFree[r];
  if (spread <= 0) {
    free = std::max(free, ready) + total;
    return;
  }
  for (int64_t j = 1; j <= k; ++j)
    free = std::max(free, ready - spread * double(k - j) / double(k)) +
           total / double(k);
}

bool Simulator::advanceStreams() {
  bool moved = false;
  for (size_t ch = 0; ch < streams.size(); ++ch) {
    std::vector<StreamOp> &ops = streams[ch];
    while (streamNext[ch] < ops.size()) {
      const StreamOp &op = ops[streamNext[ch]];
      // A group (an op and those issued together with it) starts when the
      // stream is free and holds it until its last op is done.
      if (!op.joinsPrevious)
        groupStart[ch] = groupDone[ch] = streamFree[ch];
      const double start = std::max(op.issued, groupStart[ch]);
      if (op.send) {
        // Eager: the data goes into the peer's buffers without waiting for
        // its receive (NCCL's P2P buffers).
        (*op.dataAt)[op.key] = start + op.transfer;
        groupDone[ch] = std::max(groupDone[ch], start + op.transfer);
      } else {
        if ((*op.dataAt)[op.key] == kNotYet)
          break; // its send has not run
        const double in = std::max(start, (*op.dataAt)[op.key]);
        (*op.arrive)[op.key] = in;
        groupDone[ch] = std::max(groupDone[ch], in);
      }
      ++streamNext[ch];
      if (streamNext[ch] == ops.size() || !ops[streamNext[ch]].joinsPrevious)
        streamFree[ch] = groupDone[ch];
      moved = true;
    }
  }
  return moved;
}

std::string Simulator::grid() const {
  // Every stuck rank's action is in the picture: one window over all of
  // them when they are close, else a window around each rank's own.
  size_t lo = SIZE_MAX, hi = 0;
  for (int64_t r = 0; r < s.pp; ++r)
    if (pc[r] < s.ranks[r].size()) {
      lo = std::min(lo, pc[r]);
      hi = std::max(hi, pc[r]);
    }
  auto cell = [&](int64_t r, size_t k) {
    if (k < s.ranks[r].size())
      return k == pc[r] ? "[" + text(s.ranks[r][k]) + "]" : text(s.ranks[r][k]);
    return k == s.ranks[r].size() && pc[r] == k ? std::string("(done)")
                                                : std::string();
  };
  std::string out;
  if (hi - lo <= 6) {
    size_t first = lo > 2 ? lo - 2 : 0, last = hi + 2;
    out = fmt::format("{:>8}", "step");
    for (size_t k = first; k <= last; ++k)
      out += fmt::format(" {:>12}", k);
    out += "\n";
    for (int64_t r = 0; r < s.pp; ++r) {
      out += fmt::format("{:>8}", fmt::format("rank {}", r));
      for (size_t k = first; k <= last; ++k)
        out += fmt::format(" {:>12}", cell(r, k));
      out += "\n";
    }
  } else {
    for (int64_t r = 0; r < s.pp; ++r) {
      size_t at = std::min(pc[r], s.ranks[r].size());
      size_t first = at > 2 ? at - 2 : 0;
      out += fmt::format("{:>8}  steps {}-{}:", fmt::format("rank {}", r),
                         first, at + 2);
      for (size_t k = first; k <= at + 2; ++k)
        out += fmt::format(" {:>12}", cell(r, k));
      out += "\n";
    }
  }
  return out + "[X] = the action each rank is stuck at";
}

Expected<Simulation> Simulator::run() {
  bool progress = true;
  while (progress) {
    progress = false;
    for (int64_t r = 0; r < s.pp; ++r) {
      const auto &program = s.ranks[r];
      while (pc[r] < program.size()) {
        const Action &a = program[pc[r]];
        double after = 0;
        std::string waitingFor;
        auto ok = ready(r, a, after, waitingFor);
        if (!ok)
          return ok.takeError();
        if (!*ok)
          break;
        if (auto err = execute(r, a, after, pc[r]))
          return std::move(err);
        ++pc[r];
        progress = true;
      }
    }
    if (c.inOrderStreams && advanceStreams())
      progress = true;
  }
  bool stuck = false;
  std::string why;
  for (int64_t r = 0; r < s.pp; ++r) {
    if (pc[r] >= s.ranks[r].size())
      continue;
    stuck = true;
    const Action &a = s.ranks[r][pc[r]];
    double after = 0;
    std::string waitingFor;
    auto ok = ready(r, a, after, waitingFor);
    if (!ok)
      return ok.takeError();
    why += fmt::format("  rank {} waits at step {} ({}) for {}\n", r, pc[r],
                       text(a), waitingFor);
  }
  if (c.inOrderStreams)
    for (int64_t r = 0; r < s.pp; ++r)
      for (int64_t p = 0; p < s.pp; ++p)
        for (bool send : {false, true}) {
          const size_t ch = channel(r, p, send);
          if (streamNext[ch] == streams[ch].size() || (send && !c.perDirection))
            continue;
          why += fmt::format(
              "  rank {}'s communication stream with rank {} waits at {} for "
              "data rank {} never sends; every later send or receive between "
              "them waits behind it (in-order streams)\n",
              r, p, text(s.ranks[r][streams[ch][streamNext[ch]].step]), p);
          stuck = true;
        }
  if (stuck)
    return fail(fmt::format("the schedule deadlocks: no rank can go on\n{}{}",
                            why, grid()));

  // Every microbatch ran forward and backward on every stage, once (a
  // forward-only schedule: forward, and no backward).
  for (int64_t st = 0; st < stages; ++st)
    for (int64_t mb = 0; mb < m; ++mb) {
      size_t k = at(st, mb);
      std::string missing;
      if (fEnd[k] == kNotYet)
        missing = "F";
      else if (s.forwardOnly && bEnd[k] != kNotYet)
        return fail(fmt::format("the forward-only programs run a backward of "
                                "microbatch {} on stage {}",
                                mb, st));
      else if (s.forwardOnly)
        missing.clear();
      else if (bEnd[k] == kNotYet)
        missing = "B (or I)";
      else if (splitDone[k] && wEnd[k] == kNotYet)
        missing = "W";
      if (!missing.empty())
        return fail(fmt::format(
            "microbatch {} never runs {} on stage {} (rank {}, chunk {})", mb,
            missing, st, s.rankOf(st), s.chunkOf(st)));
      if (hasComm && st + 1 < stages && s.rankOf(st + 1) != s.rankOf(st) &&
          recvFEnd[at(st + 1, mb)] == kNotYet)
        return fail(fmt::format(
            "the activations of microbatch {} from stage {} are never "
            "received by stage {}",
            mb, st, st + 1));
      if (hasComm && !s.forwardOnly && st > 0 &&
          s.rankOf(st - 1) != s.rankOf(st) &&
          recvBEnd[at(st - 1, mb)] == kNotYet)
        return fail(fmt::format(
            "the gradient of microbatch {} from stage {} is never received "
            "by stage {}",
            mb, st, st - 1));
    }

  // A rank's step ends when its reductions are in and what follows them
  // (the distributed optimizer's all-gather) is done.
  for (int64_t r = 0; r < s.pp; ++r) {
    double end = std::max(clock[r], collectiveFree[r]);
    for (int64_t st = 0; st < stages; ++st)
      if (s.rankOf(st) == r &&
          st < static_cast<int64_t>(c.stageAfterStep.size()))
        end += c.stageAfterStep[static_cast<size_t>(st)];
    result.exposedReduction.push_back(end - clock[r]);
    result.makespan = std::max(result.makespan, end);
  }
  for (int64_t r = 0; r < s.pp; ++r)
    result.bubbleFraction.push_back(
        result.makespan > 0 ? 1.0 - result.busy[r] / result.makespan : 0.0);
  return std::move(result);
}

} // namespace

Expected<Simulation> simulate(const Schedule &schedule, const Costs &costs) {
  if (static_cast<int64_t>(schedule.ranks.size()) != schedule.pp)
    return makeError(
        fmt::format("the schedule has {} rank programs but pp = {}",
                    schedule.ranks.size(), schedule.pp));
  Simulator simulator(schedule, costs);
  return simulator.run();
}

} // namespace hypipe::schedule
