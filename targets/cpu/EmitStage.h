//===- EmitStage.h - translate a planned stage to C++ ---------------------===//
//
// Writes the source of one stage library: the layer shapes as constants, the
// buffer plan as offsets, and the four functions of runtime/StageABI.h as
// straight-line calls into runtime/kernels/cpu.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_TARGETS_CPU_EMITSTAGE_H
#define HYPIPE_TARGETS_CPU_EMITSTAGE_H

#include "passes/lowering/KernelPlan.h"

#include <string>
#include <string_view>

namespace hypipe::cpu {

/// What differs between the targets' stage sources; the statements, the
/// constants and the buffer offsets come from the plan alone.
struct StageFlavour {
  const char *kernelsHeader;  ///< the Layers.h the calls go to
  const char *kernelsNs;      ///< its namespace
  const char *targetMacro;    ///< HYPIPE_TARGET_* in hypipe_stage_info
  const char *tokensDecl;     ///< the per-call token shape `t`
  const char *copyActivation; ///< fmt: {dst}, {src} of t.tokens() rows
};

/// The source of one stage for `flavour`'s kernels.
std::string emitStage(const StagePlan &plan, const std::string &modelName,
                      const StageFlavour &flavour);

/// `text` as a C++ string literal holding exactly its bytes: printable
/// ASCII as is (but '?'), everything else an octal escape.
std::string cppStringLiteral(std::string_view text);

/// The C++ of a cpu stage (runtime/kernels/cpu).
std::string emitStageCpp(const StagePlan &plan, const std::string &modelName);

} // namespace hypipe::cpu

#endif
