//===- Programs.cpp - pipe.program ops <-> the schedule library -----------===//
#include "passes/schedule/Programs.h"

#include "core/schedule/Simulate.h"
#include "dialects/pipe/PipeOps.h"

#include "mlir/IR/Builders.h"

namespace hypipe {

using namespace mlir;

namespace schedule {

Expected<Schedule> readPrograms(hybrid::ModelOp model) {
  hybrid::ParallelAttr parallel = model.getParallel();
  Schedule s;
  s.pp = parallel.getPp();
  s.vpp = parallel.getVpp();
  s.microbatches = parallel.getMicrobatches();
  s.name = scheduleName(parallel.getScheduleKind());
  s.placement = placementOf(parallel.getScheduleKind());
  for (auto program : model.getBody().front().getOps<pipe::ProgramOp>()) {
    std::vector<Action> actions;
    for (StringRef text : program.getActions().getAsValueRange<StringAttr>()) {
      auto action = parsePytorchAction(text, s.actionContext());
      if (!action)
        return action.takeError();
      actions.push_back(*action);
    }
    s.ranks.push_back(std::move(actions));
  }
  if (static_cast<int64_t>(s.ranks.size()) != s.pp)
    return makeError("the model has " + std::to_string(s.ranks.size()) +
                     " pipe.program ops but pp = " + std::to_string(s.pp) +
                     ": run pipe-build-schedule");
  return s;
}

void writePrograms(hybrid::ModelOp model, const Schedule &s) {
  Block &body = model.getBody().front();
  for (auto program :
       llvm::make_early_inc_range(body.getOps<pipe::ProgramOp>()))
    program.erase();
  OpBuilder b(body.getTerminator());
  for (int64_t r = 0; r < s.pp; ++r) {
    SmallVector<StringRef> texts;
    std::vector<std::string> storage;
    SmallVector<int64_t> batched;
    for (auto [i, a] : llvm::enumerate(s.ranks[r])) {
      storage.push_back(pytorchText(a));
      if (a.batched)
        batched.push_back(static_cast<int64_t>(i));
    }
    for (const std::string &t : storage)
      texts.push_back(t);
    auto program = b.create<pipe::ProgramOp>(model.getLoc(), r, s.name,
                                             b.getStrArrayAttr(texts));
    if (!batched.empty())
      program->setAttr("batched", b.getDenseI64ArrayAttr(batched));
  }
}

Expected<std::optional<Schedule>>
buildVerifiedPrograms(const ScheduleRequest &request) {
  if (checkSchedule(request))
    return std::optional<Schedule>();
  Expected<Schedule> built = buildSchedule(request);
  if (!built)
    return built.takeError();
  insertCommunication(*built);
  if (auto simulated = simulate(*built); !simulated)
    return makeError(
        "the " + std::string(scheduleName(request.kind)) + " schedule for " +
        std::to_string(request.microbatches) +
        " microbatches does not verify: " + toString(simulated.takeError()));
  return std::optional<Schedule>(std::move(*built));
}

Expected<Schedule> buildVerifiedForwardPrograms(const Schedule &training) {
  Schedule forward = forwardOnlySchedule(training);
  if (auto simulated = simulate(forward); !simulated)
    return makeError(
        "the forward-only programs of the " + training.name +
        " schedule do not verify: " + toString(simulated.takeError()));
  return forward;
}

} // namespace schedule

} // namespace hypipe
