//===- GradientBuckets.h - when each gradient bucket is final -------------===//
//
// The data-parallel all-reduce goes in buckets of a fixed size from the
// start of a stage's gradient buffer (--grad-bucket-mib, Megatron's
// --ddp-bucket-size). In the stage's last backward a bucket is final once
// the last weight-gradient call that writes into it has run, so its
// reduction can start there, under the rest of the backward, as Megatron's
// overlapped gradient reduction starts a bucket when its last parameter's
// gradient is in. The boundaries do not move with the timing, so the sums
// are the same bits.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_EXEC_GRADIENTBUCKETS_H
#define HYPIPE_RUNTIME_EXEC_GRADIENTBUCKETS_H

#include "runtime/formats/StageProgram.h"

#include <cstdint>
#include <vector>

namespace hypipe::rt {

/// For each layer of `program`, the buckets of `bucketFloats` (over
/// `gradientFloats` floats from the buffer's start) whose last writer in
/// the weight-gradient pass is that layer's call, highest bucket first; at
/// index layers.size(), the buckets no call writes (started after the
/// pass). A call writes its layer's parameter range, and an MTP depth also
/// the output layer or embedding table it shares.
inline std::vector<std::vector<int64_t>>
bucketsFinalAfter(const StageProgram &program, int64_t gradientFloats,
                  int64_t bucketFloats) {
  const int64_t buckets = (gradientFloats + bucketFloats - 1) / bucketFloats;
  std::vector<int64_t> lastCall(size_t(buckets), -1);
  for (size_t k = 0; k < program.backwardWeight.size(); ++k) {
    const KernelCall &c = program.backwardWeight[k];
    if (c.layer < 0)
      continue;
    const ProgramLayer &l = program.layers.at(size_t(c.layer));
    auto writes = [&](const TensorRange &r) {
      if (r.empty())
        return;
      const int64_t begin = r.elementOffset(),
                    end = begin + r.bytes / dtypeBytes(r.dtype);
      for (int64_t b = begin / bucketFloats;
           b < buckets && b * bucketFloats < end; ++b)
        lastCall[size_t(b)] = int64_t(k);
    };
    writes(l.params);
    if (l.kind == LayerKind::MtpInput)
      writes(program.sharedTable);
    if (l.kind == LayerKind::MtpOutput)
      writes(program.sharedOutput);
  }
  std::vector<std::vector<int64_t>> out(program.layers.size() + 1);
  for (int64_t b = buckets - 1; b >= 0; --b) {
    const int64_t k = lastCall[size_t(b)];
    out[k < 0 ? program.layers.size()
              : size_t(program.backwardWeight[size_t(k)].layer)]
        .push_back(b);
  }
  return out;
}

} // namespace hypipe::rt

#endif
