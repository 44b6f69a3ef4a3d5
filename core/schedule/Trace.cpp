//===- Trace.cpp ----------------------------------------------------------===//
#include "core/schedule/Trace.h"

namespace hypipe::schedule {

ChromeTrace::ChromeTrace(std::ostream &out) : out_(&out) {
  *out_ << "{\"traceEvents\":[\n";
}

void ChromeTrace::add(nlohmann::ordered_json event) {
  if (!out_) {
    events_.push_back(std::move(event));
    return;
  }
  *out_ << (firstEvent_ ? "" : ",\n") << event.dump();
  firstEvent_ = false;
}

void ChromeTrace::finish() {
  if (out_)
    *out_ << "\n],\"displayTimeUnit\":\"ms\",\"otherData\":" << other_.dump()
          << "}\n";
}

void ChromeTrace::nameProcess(int64_t pid, const std::string &name) {
  add({{"name", "process_name"},
       {"ph", "M"},
       {"pid", pid},
       {"args", {{"name", name}}}});
}

void ChromeTrace::nameThread(int64_t pid, int64_t tid,
                             const std::string &name) {
  add({{"name", "thread_name"},
       {"ph", "M"},
       {"pid", pid},
       {"tid", tid},
       {"args", {{"name", name}}}});
}

void ChromeTrace::complete(const std::string &name, const std::string &category,
                           int64_t pid, int64_t tid, double startUs,
                           double durationUs, nlohmann::ordered_json args) {
  add({{"name", name},
       {"cat", category},
       {"ph", "X"},
       {"pid", pid},
       {"tid", tid},
       {"ts", startUs},
       {"dur", durationUs},
       {"args", std::move(args)}});
}

void ChromeTrace::asyncSpan(const std::string &name,
                            const std::string &category, int64_t pid,
                            int64_t tid, int64_t id, double startUs,
                            double durationUs, nlohmann::ordered_json args) {
  add({{"name", name},
       {"cat", category},
       {"ph", "b"},
       {"id", id},
       {"pid", pid},
       {"tid", tid},
       {"ts", startUs},
       {"args", std::move(args)}});
  add({{"name", name},
       {"cat", category},
       {"ph", "e"},
       {"id", id},
       {"pid", pid},
       {"tid", tid},
       {"ts", startUs + durationUs}});
}

void ChromeTrace::counter(const std::string &name, int64_t pid, double tsUs,
                          nlohmann::ordered_json values) {
  add({{"name", name},
       {"ph", "C"},
       {"pid", pid},
       {"ts", tsUs},
       {"args", std::move(values)}});
}

std::string ChromeTrace::dump(int indent) const {
  nlohmann::ordered_json trace;
  trace["traceEvents"] = events_;
  trace["displayTimeUnit"] = "ms";
  trace["otherData"] = other_;
  return trace.dump(indent) + "\n";
}

} // namespace hypipe::schedule
