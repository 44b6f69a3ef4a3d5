//===- hypipe-opt.cpp - mlir-opt with the hypipe dialects and passes ------===//
#include "dialects/hybrid/HybridDialect.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<hypipe::hybrid::HybridDialect>();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "hypipe optimizer driver\n", registry));
}
