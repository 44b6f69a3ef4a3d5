//===- ScheduleCsvFuzzer.cpp - libFuzzer target: PyTorch schedule CSVs ----===//
//
// The first two bytes choose pp (1-8), vpp (1-4), microbatches (1-16) and
// the placement (given or inferred); the rest is the CSV, as PyTorch writes
// it (UNSHARD, RESHARD, REDUCE_GRAD, OVERLAP_F_B included). What imports is
// then verified and simulated as `hypipe schedule --import-csv` does.
//
//===----------------------------------------------------------------------===//
#include "core/schedule/Schedule.h"
#include "core/schedule/Simulate.h"

#include <optional>
#include <string_view>

using namespace hypipe::schedule;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2)
    return 0;
  int64_t pp = 1 + (data[0] & 7), vpp = 1 + ((data[0] >> 3) & 3);
  int64_t microbatches = 1 + (data[1] & 15);
  // Bit 5 asks for the placement to be inferred, as --import-csv does
  // without --schedule; else bit 4 chooses it.
  std::optional<Placement> placement;
  if (!(data[1] & 32))
    placement = data[1] & 16 ? Placement::V : Placement::Loop;
  std::string_view text(reinterpret_cast<const char *>(data + 2), size - 2);
  auto loaded = importCsv(text, pp, vpp, microbatches, placement);
  if (!loaded) {
    std::string message = toString(loaded.takeError());
    if (message.empty() || message.size() > 2000)
      __builtin_trap(); // said, and cut to a readable length
    return 0;
  }
  Schedule schedule = std::move(loaded->schedule);
  insertCommunication(schedule); // a file's own communication is kept
  auto simulated = simulate(schedule, Costs{});
  if (!simulated && toString(simulated.takeError()).empty())
    __builtin_trap();
  return 0;
}
