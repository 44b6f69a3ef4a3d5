//===- Clock.h - the steady clock the trainer's spans are timed by --------===//
#ifndef HYPIPE_RUNTIME_EXEC_CLOCK_H
#define HYPIPE_RUNTIME_EXEC_CLOCK_H

#include <chrono>

namespace hypipe::rt {

/// Seconds on the steady clock (spans subtract the run's start).
inline double steadySeconds() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

} // namespace hypipe::rt

#endif
