//===- bench_schedule.cpp - schedules at scale ----------------------------===//
//
// interleaved-1f1b at pp=64, vpp=8, 1,024 microbatches (1,048,576 compute
// actions, about 2.9 million with communication): generate, insert the
// communication, verify and simulate. Prints each step's time and the peak
// resident memory. Run through bench/run_schedule.sh.
//
//===----------------------------------------------------------------------===//
#include "core/schedule/Simulate.h"

#include <iostream>

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <sys/resource.h>

namespace {
double ms(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}
long peakRssMiB() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024;
}
} // namespace

int main(int argc, char **argv) {
  using namespace hypipe::schedule;
  int64_t pp = 64, vpp = 8, m = argc > 1 ? std::atoll(argv[1]) : 1024;
  auto t0 = std::chrono::steady_clock::now();
  auto schedule = buildSchedule({ScheduleKind::Interleaved1F1B, pp, vpp, m});
  if (!schedule) {
    std::cerr << toString(schedule.takeError()) << "\n";
    return 1;
  }
  auto t1 = std::chrono::steady_clock::now();
  size_t compute = 0;
  for (const auto &program : schedule->ranks)
    compute += program.size();
  insertCommunication(*schedule);
  auto t2 = std::chrono::steady_clock::now();
  size_t all = 0;
  for (const auto &program : schedule->ranks)
    all += program.size();
  Costs costs;
  costs.f = 1.0 / static_cast<double>(vpp);
  costs.b = 2.0 / static_cast<double>(vpp);
  auto simulation = simulate(*schedule, costs);
  if (!simulation) {
    std::cerr << toString(simulation.takeError()) << "\n";
    return 1;
  }
  auto t3 = std::chrono::steady_clock::now();
  double expected =
      static_cast<double>(pp - 1) / static_cast<double>(vpp * m + pp - 1);
  fmt::print("interleaved-1f1b pp={} vpp={} microbatches={}: {} compute "
             "actions, {} with "
             "communication\n",
             pp, vpp, m, compute, all);
  fmt::print("{:<44} {:>10}\n", "step", "ms");
  fmt::print("{:<44} {:>10.1f}\n", "generate", ms(t1 - t0));
  fmt::print("{:<44} {:>10.1f}\n", "insert communication", ms(t2 - t1));
  fmt::print("{:<44} {:>10.1f}\n", "verify + simulate", ms(t3 - t2));
  fmt::print("{:<44} {:>10.1f}\n", "total", ms(t3 - t0));
  fmt::print("peak resident memory: {} MiB ({:.0f} bytes per action)\n",
             peakRssMiB(), peakRssMiB() * 1048576.0 / static_cast<double>(all));
  fmt::print("bubble: simulated {:.6f}, closed form (p-1)/(v*m+p-1) = {:.6f}\n",
             simulation->bubbleFraction[0], expected);
  return 0;
}
