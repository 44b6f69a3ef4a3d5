//===- bench_frontend.cpp - the front end on a 10,000-layer model ---------===//
//
// Times each step from spec text to printed MLIR for a pattern of 10,000
// layers in 1,024 segments (pp=128, vpp=8): load + parse + place, build the
// hybrid.model, verify it, print it. Reports the median of --reps runs.
// Run through bench/run_frontend.sh, which also times the Python peer.
//
//===----------------------------------------------------------------------===//
#include "conversion/SpecToHybrid.h"
#include "frontend/Spec.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/raw_ostream.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <vector>

namespace {

std::string makePattern(int layers, int segments) {
  const std::string cycle = "M-M*M-M-ME";
  std::string out;
  int layer = 0;
  for (int s = 0; s < segments; ++s) {
    if (s)
      out += '|';
    int count = layers / segments + (s < layers % segments ? 1 : 0);
    for (int i = 0; i < count; ++i)
      out += cycle[layer++ % cycle.size()];
  }
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

} // namespace

int main(int argc, char **argv) {
  int reps = argc > 1 ? std::atoi(argv[1]) : 5;
  const int layers = 10000, segments = 1024, pp = 128;
  std::string pattern = makePattern(layers, segments);
  if (argc > 2) { // write the pattern for the Python peer
    std::ofstream(argv[2]) << pattern;
  }
  std::string spec = fmt::format(
      "model:\n  pattern: \"{}\"\n  hidden_size: 1024\n  num_attention_heads: "
      "8\n"
      "  num_query_groups: 8\n  num_experts: 8\n  moe_router_topk: 2\n"
      "parallel:\n  pp: {}\n  schedule: interleaved-1f1b\n",
      pattern, pp);

  using clock = std::chrono::steady_clock;
  auto ms = [](clock::duration d) {
    return std::chrono::duration<double, std::milli>(d).count();
  };
  std::vector<double> load, build, verify, print, total;
  size_t printedBytes = 0;
  for (int r = 0; r < reps; ++r) {
    auto t0 = clock::now();
    auto loaded = hypipe::parseSpec(spec, "bench.yaml");
    if (!loaded) {
      llvm::errs() << toString(loaded.takeError());
      return 1;
    }
    auto t1 = clock::now();
    mlir::MLIRContext context;
    auto module = hypipe::buildModel(context, *loaded);
    auto t2 = clock::now();
    if (failed(mlir::verify(*module)))
      return 1;
    auto t3 = clock::now();
    std::string text;
    llvm::raw_string_ostream os(text);
    module->print(os);
    os.flush();
    auto t4 = clock::now();
    printedBytes = text.size();
    load.push_back(ms(t1 - t0));
    build.push_back(ms(t2 - t1));
    verify.push_back(ms(t3 - t2));
    print.push_back(ms(t4 - t3));
    total.push_back(ms(t4 - t0));
  }
  fmt::print("pattern: {} layers, {} segments (pp={}, vpp={}), {} chars; MLIR "
             "{} bytes; "
             "median of {} runs\n",
             layers, segments, pp, segments / pp, pattern.size(), printedBytes,
             reps);
  fmt::print("{:<40} {:>10}\n", "step", "ms");
  fmt::print("{:<40} {:>10.2f}\n", "load spec (YAML, parse, validate, place)",
             median(load));
  fmt::print("{:<40} {:>10.2f}\n", "build hybrid.model", median(build));
  fmt::print("{:<40} {:>10.2f}\n", "verify", median(verify));
  fmt::print("{:<40} {:>10.2f}\n", "print MLIR", median(print));
  fmt::print("{:<40} {:>10.2f}\n", "total", median(total));
  return 0;
}
