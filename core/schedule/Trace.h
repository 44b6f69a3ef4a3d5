//===- Trace.h - Chrome traces, written in one place ----------------------===//
//
// The Chrome trace format (chrome://tracing, Perfetto) for both the
// simulator's predictions (`hypipe schedule --trace`, `hypipe train`'s
// trace.sim.json) and the runtime's measurements (`hypipe-run --trace`), so
// the two open side by side with the same conventions: one process per
// pipeline rank, one thread per data-parallel rank, complete ("X") events
// whose `cat` is the action kind, times in microseconds.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_CORE_SCHEDULE_TRACE_H
#define HYPIPE_CORE_SCHEDULE_TRACE_H

#include <nlohmann/json.hpp>

#include <cstdint>
#include <ostream>
#include <string>

namespace hypipe::schedule {

class ChromeTrace {
public:
  /// Holds the events until dump().
  ChromeTrace() = default;
  /// Streams: writes each event to `out` as it is added, so a trace of any
  /// length takes no memory; finish() writes the rest.
  explicit ChromeTrace(std::ostream &out);

  /// Names the track of pipeline rank `pid` (a trace process).
  void nameProcess(int64_t pid, const std::string &name);
  /// Names the track of data-parallel rank `tid` within `pid`.
  void nameThread(int64_t pid, int64_t tid, const std::string &name);
  /// One action that ran (or is predicted to run) from `startUs` for
  /// `durationUs` microseconds; `category` is its kind (F, B, I, W, ...).
  void complete(const std::string &name, const std::string &category,
                int64_t pid, int64_t tid, double startUs, double durationUs,
                nlohmann::ordered_json args = nlohmann::ordered_json::object());
  /// A span that overlaps the actions of its thread (the runtime's
  /// data-parallel reduction): an async pair ("b"/"e"), which viewers draw
  /// on a row of its own under the process. `id` tells concurrent spans
  /// apart.
  void
  asyncSpan(const std::string &name, const std::string &category, int64_t pid,
            int64_t tid, int64_t id, double startUs, double durationUs,
            nlohmann::ordered_json args = nlohmann::ordered_json::object());
  /// A counter track ("C"): `name`'s series (the keys of `values`) take
  /// these values at `tsUs`, until its next sample.
  void counter(const std::string &name, int64_t pid, double tsUs,
               nlohmann::ordered_json values);
  /// Free-form metadata (schedule, shape, measured memory, ...).
  nlohmann::ordered_json &otherData() { return other_; }

  /// The trace as JSON text; `indent` < 0 writes one line.
  std::string dump(int indent = -1) const;
  /// Streaming: ends the event list and writes the metadata.
  void finish();

private:
  void add(nlohmann::ordered_json event);

  std::ostream *out_ = nullptr;
  bool firstEvent_ = true;
  nlohmann::ordered_json events_ = nlohmann::ordered_json::array();
  nlohmann::ordered_json other_ = nlohmann::ordered_json::object();
};

} // namespace hypipe::schedule

#endif
