//===- Init.h - parameter initialisation from (seed, name) ----------------===//
//
// A parameter's first value depends only on the seed and its name, never on
// the layout, so every pp/vpp/dp of one spec starts from the same weights
// (docs/model.md lists the distributions).
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_EXEC_INIT_H
#define HYPIPE_RUNTIME_EXEC_INIT_H

#include "core/Random.h"
#include "runtime/formats/Artifact.h"

#include <cstdint>

namespace hypipe::rt {

using hypipe::splitmix64;

/// Fills `dst` (param.numel floats) with the parameter's initial values:
/// large parameters on all of OpenMP's threads, the values the same bits as
/// one thread's (each is a pure function of seed, name and index).
/// Split over `tp` tensor-parallel ranks, `dst` gets rank `tpRank`'s shard
/// (param.numel floats): the same values as those elements of the whole.
void initParameter(const ParamEntry &param, int64_t seed, float *dst,
                   int64_t tp = 1, int64_t tpRank = 0);

} // namespace hypipe::rt

#endif
