//===- ManifestFuzzer.cpp - libFuzzer target: artifact manifests ----------===//
//
// The input is manifest.json: it loads into an artifact whose programs name
// only its stages and microbatches and whose stages' kernel programs call
// only their own layers, with every tensor inside its buffer, or is refused
// with a message. No other
// exception may escape (the runtime turns only RuntimeError into an error
// line).
//
//===----------------------------------------------------------------------===//
#include "runtime/formats/Artifact.h"

#include <nlohmann/json.hpp>

#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  nlohmann::json m = nlohmann::json::parse(data, data + size, nullptr, false);
  if (m.is_discarded())
    return 0;
  try {
    hypipe::rt::Artifact a =
        hypipe::rt::artifactFromJson(m, "fuzz/manifest.json");
    hypipe::rt::checkArtifactConsistency(a, "fuzz/manifest.json");
    for (const auto &program : a.programs)
      for (const auto &action : program)
        if (action.stage < 0 || action.stage >= a.numStages)
          __builtin_trap();
    for (const hypipe::rt::StageEntry &s : a.stages) {
      const hypipe::rt::StageProgram &p = s.program;
      for (const hypipe::rt::ProgramLayer &l : p.layers)
        if (l.params.offset < 0 || l.params.end() > p.paramBytes ||
            l.saved.offset < 0 || l.saved.end() > p.savedBytes)
          __builtin_trap();
      for (const auto *pass : {&p.forward, &p.backwardInput, &p.backwardWeight})
        for (const hypipe::rt::KernelCall &c : *pass)
          if (c.layer < -1 || c.layer >= int64_t(p.layers.size()))
            __builtin_trap();
    }
  } catch (const hypipe::rt::RuntimeError &e) {
    if (std::string_view(e.what()).empty())
      __builtin_trap();
  }
  return 0;
}
