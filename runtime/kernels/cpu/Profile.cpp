//===- Profile.cpp - step time by kernel class ----------------------------===//

#include "runtime/kernels/cpu/Profile.h"

#include <omp.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace hypipe::rt::cpu {
namespace {

using Clock = std::chrono::steady_clock;

struct State {
  std::atomic<bool> on{false};
  std::thread::id owner;
  KernelClass current = KernelClass::Other;
  Clock::time_point since;
  std::array<double, kNumKernelClasses> seconds{};
};

State &state() {
  static State s;
  return s;
}

bool recording() {
  State &s = state();
  return s.on.load(std::memory_order_relaxed) &&
         std::this_thread::get_id() == s.owner && omp_get_level() == 0;
}

/// Charges the time since the last switch to the open class.
void charge(State &s, Clock::time_point now) {
  s.seconds[int(s.current)] +=
      std::chrono::duration<double>(now - s.since).count();
  s.since = now;
}

} // namespace

const char *kernelClassName(KernelClass c) {
  switch (c) {
  case KernelClass::Other:
    return "other (runtime)";
  case KernelClass::Gemm:
    return "GEMM";
  case KernelClass::Scan:
    return "scan";
  case KernelClass::Conv:
    return "conv";
  case KernelClass::Attention:
    return "attention";
  case KernelClass::Norm:
    return "norm";
  case KernelClass::Elementwise:
    return "elementwise";
  case KernelClass::MoeRouting:
    return "MoE routing";
  case KernelClass::Optimizer:
    return "optimizer";
  case KernelClass::Communication:
    return "communication";
  }
  return "?";
}

void setProfiling(bool on) {
  State &s = state();
  s.on = false;
  if (!on)
    return;
  s.owner = std::this_thread::get_id();
  s.current = KernelClass::Other;
  s.seconds = {};
  s.since = Clock::now();
  s.on = true;
}

std::array<double, kNumKernelClasses> profileSeconds() {
  State &s = state();
  if (recording())
    charge(s, Clock::now());
  return s.seconds;
}

ProfileScope::ProfileScope(KernelClass c) : active(recording()), outer(c) {
  if (!active)
    return;
  State &s = state();
  charge(s, Clock::now());
  outer = s.current;
  s.current = c;
}

ProfileScope::~ProfileScope() {
  if (!active)
    return;
  State &s = state();
  charge(s, Clock::now());
  s.current = outer;
}

} // namespace hypipe::rt::cpu
