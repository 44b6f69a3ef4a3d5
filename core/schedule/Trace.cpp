//===- Trace.cpp ----------------------------------------------------------===//
#include "core/schedule/Trace.h"

namespace hypipe::schedule {

void ChromeTrace::nameProcess(int64_t pid, const std::string &name) {
  events_.push_back({{"name", "process_name"},
                     {"ph", "M"},
                     {"pid", pid},
                     {"args", {{"name", name}}}});
}

void ChromeTrace::nameThread(int64_t pid, int64_t tid,
                             const std::string &name) {
  events_.push_back({{"name", "thread_name"},
                     {"ph", "M"},
                     {"pid", pid},
                     {"tid", tid},
                     {"args", {{"name", name}}}});
}

void ChromeTrace::complete(const std::string &name, const std::string &category,
                           int64_t pid, int64_t tid, double startUs,
                           double durationUs, nlohmann::ordered_json args) {
  events_.push_back({{"name", name},
                     {"cat", category},
                     {"ph", "X"},
                     {"pid", pid},
                     {"tid", tid},
                     {"ts", startUs},
                     {"dur", durationUs},
                     {"args", std::move(args)}});
}

std::string ChromeTrace::dump(int indent) const {
  nlohmann::ordered_json trace;
  trace["traceEvents"] = events_;
  trace["displayTimeUnit"] = "ms";
  trace["otherData"] = other_;
  return trace.dump(indent) + "\n";
}

} // namespace hypipe::schedule
