//===- Vocabulary.cpp - schedule, action and placement words --------------===//
#include "core/schedule/Vocabulary.h"

#include "core/Text.h"

#include <fmt/format.h>

#include <array>
#include <utility>

namespace hypipe::schedule {

namespace {

constexpr std::array<std::pair<ScheduleKind, const char *>, 6> kSchedules = {{
    {ScheduleKind::GPipe, "gpipe"},
    {ScheduleKind::OneFOneB, "1f1b"},
    {ScheduleKind::Interleaved1F1B, "interleaved-1f1b"},
    {ScheduleKind::ZbH1, "zb-h1"},
    {ScheduleKind::ZbV, "zbv"},
    {ScheduleKind::DualPipeV, "dualpipev"},
}};

/// Longest names first, so that parsing `SEND_F` does not stop at a prefix.
constexpr std::array<std::pair<Op, const char *>, 11> kOps = {{
    {Op::ReduceGrad, "REDUCE_GRAD"},
    {Op::Unshard, "UNSHARD"},
    {Op::Reshard, "RESHARD"},
    {Op::SendF, "SEND_F"},
    {Op::RecvF, "RECV_F"},
    {Op::SendB, "SEND_B"},
    {Op::RecvB, "RECV_B"},
    {Op::F, "F"},
    {Op::B, "B"},
    {Op::I, "I"},
    {Op::W, "W"},
}};

} // namespace

const char *scheduleName(ScheduleKind kind) {
  for (auto [k, name] : kSchedules)
    if (k == kind)
      return name;
  return "?";
}

const std::vector<std::string> &scheduleNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (auto [kind, name] : kSchedules)
      out.push_back(name);
    return out;
  }();
  return names;
}

const std::vector<ScheduleKind> &scheduleKinds() {
  static const std::vector<ScheduleKind> kinds = [] {
    std::vector<ScheduleKind> out;
    for (auto [kind, name] : kSchedules)
      out.push_back(kind);
    return out;
  }();
  return kinds;
}

std::optional<ScheduleKind> parseScheduleKind(std::string_view name) {
  for (auto [kind, n] : kSchedules)
    if (name == n)
      return kind;
  return std::nullopt;
}

std::string scheduleNameList() { return text::join(scheduleNames(), ", "); }

const char *opName(Op op) {
  for (auto [o, name] : kOps)
    if (o == op)
      return name;
  return "?";
}

std::optional<Op> parseOpName(std::string_view name) {
  for (auto [op, n] : kOps)
    if (name == n)
      return op;
  return std::nullopt;
}

bool isCompute(Op op) {
  return op == Op::F || op == Op::B || op == Op::I || op == Op::W;
}
bool isSend(Op op) { return op == Op::SendF || op == Op::SendB; }
bool isRecv(Op op) { return op == Op::RecvF || op == Op::RecvB; }
bool isTransfer(Op op) { return isSend(op) || isRecv(op); }
bool isStageAction(Op op) {
  return op == Op::Unshard || op == Op::Reshard || op == Op::ReduceGrad;
}
bool isBackwardTransfer(Op op) { return op == Op::SendB || op == Op::RecvB; }

Placement placementOf(ScheduleKind kind) {
  return kind == ScheduleKind::ZbV || kind == ScheduleKind::DualPipeV
             ? Placement::V
             : Placement::Loop;
}

const char *placementName(Placement placement) {
  return placement == Placement::V ? "v" : "loop";
}

int64_t rankOfStage(Placement placement, int64_t pp, int64_t stage) {
  if (placement == Placement::V)
    return stage < pp ? stage : 2 * pp - 1 - stage;
  return stage % pp;
}

int64_t chunkOfStage(Placement placement, int64_t pp, int64_t stage) {
  if (placement == Placement::V)
    return stage < pp ? 0 : 1;
  return stage / pp;
}

int64_t stageOfChunk(Placement placement, int64_t pp, int64_t rank,
                     int64_t chunk) {
  if (placement == Placement::V)
    return chunk == 0 ? rank : 2 * pp - 1 - rank;
  return chunk * pp + rank;
}

std::string pytorchText(const Action &a) {
  if (isStageAction(a.op))
    return fmt::format("{}{}", a.stage, opName(a.op));
  return fmt::format("{}{}{}", a.stage, opName(a.op), a.microbatch);
}

std::string megatronText(const Action &a, Placement placement, int64_t pp) {
  const int64_t chunk = chunkOfStage(placement, pp, a.stage);
  if (isStageAction(a.op))
    return fmt::format("{}.{}", opName(a.op), chunk);
  return fmt::format("{}{}.{}", opName(a.op), a.microbatch, chunk);
}

Expected<Action> parsePytorchAction(std::string_view fullText,
                                    const ActionContext &c) {
  std::string_view rest = text::trim(fullText);
  // Messages quote the action, cut to 40 characters (a file may hold a
  // token of megabytes).
  const std::string text = rest.size() <= 40
                               ? std::string(rest)
                               : std::string(rest.substr(0, 37)) + "...";
  size_t digits = 0;
  while (digits < rest.size() && text::isDigit(rest[digits]))
    ++digits;
  int64_t stage = 0, microbatch = 0;
  if (digits == 0 || digits == rest.size() ||
      !text::parseInt(rest.substr(0, digits), stage))
    return makeError(fmt::format(
        "'{}' is not an action: expected <stage><op><microbatch>, e.g. "
        "2F0 or 1SEND_F3",
        text));
  rest.remove_prefix(digits);
  for (auto [op, name] : kOps) {
    if (!text::consumeFront(rest, name))
      continue;
    const bool wholeStage = isStageAction(op);
    if (wholeStage && !rest.empty())
      return makeError(fmt::format(
          "'{}': {} names a whole stage and takes no microbatch, e.g. 0{}",
          text, name, name));
    if (!wholeStage && !text::parseInt(rest, microbatch))
      return makeError(fmt::format(
          "'{}': the microbatch number after {} is missing or not a number",
          text, name));
    if (stage < 0 || stage >= c.numStages())
      return makeError(
          fmt::format("'{}': stage {} is out of range for {} stages", text,
                      stage, c.numStages()));
    if (microbatch < 0 || microbatch >= c.microbatches)
      return makeError(
          fmt::format("'{}': microbatch {} is out of range for {} microbatches",
                      text, microbatch, c.microbatches));
    Action a{op, static_cast<int32_t>(stage), static_cast<int32_t>(microbatch)};
    auto rankOf = [&](int64_t s) {
      return static_cast<int32_t>(rankOfStage(c.placement, c.pp, s));
    };
    if (op == Op::SendF || op == Op::RecvB)
      a.peer = stage + 1 < c.numStages() ? rankOf(stage + 1) : -1;
    if (op == Op::RecvF || op == Op::SendB)
      a.peer = stage > 0 ? rankOf(stage - 1) : -1;
    return a;
  }
  return makeError(fmt::format(
      "'{}' has no known op: use F, B, I, W, SEND_F, RECV_F, SEND_B, "
      "RECV_B, UNSHARD, RESHARD or REDUCE_GRAD",
      text));
}

} // namespace hypipe::schedule
