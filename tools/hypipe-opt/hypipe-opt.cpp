//===- hypipe-opt.cpp - mlir-opt with the hypipe dialects and passes ------===//
#include "dialects/hybrid/HybridDialect.h"
#include "dialects/pipe/PipeDialect.h"
#include "passes/Passes.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<hypipe::hybrid::HybridDialect, hypipe::pipe::PipeDialect>();
  hypipe::registerHypipePasses();
  hypipe::registerHypipePassPipelines();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "hypipe optimizer driver\n", registry));
}
