#ifndef HYPIPE_HYBRID_DIALECT
#define HYPIPE_HYBRID_DIALECT

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def Hybrid_Dialect : Dialect {
  let name = "hybrid";
  let cppNamespace = "::hypipe::hybrid";
  let summary = "Model-level IR of a hybrid (Mamba / attention / MLP / MoE) language model";
  let description = [{
    A `hybrid.model` holds the whole layer stack of one model in string order
    of its hybrid layer pattern: the embedding, one op per pattern symbol, the
    final norm and the output layer with its loss, and optional multi-token
    prediction blocks. Model dimensions and the parallel layout are attributes
    of the model; each layer may carry its pipeline placement.

    Each invariant of an op or attribute has a label of its own, its mnemonic
    and a number: `model_c4`, `parallel_c2`, `mamba_c1` (StableHLO's
    `dot_general_c1`). The label appears in the description that states the
    invariant, in the comment over the check in the verifier, at the end of
    the verifier's message in parentheses (`... must be positive
    (parallel_c1)`), and in the one `test/hybrid/invalid.mlir` case that
    breaks it; searching for the label finds all four.
  }];
  let useDefaultAttributePrinterParser = 1;
}

class Hybrid_Op<string mnemonic, list<Trait> traits = []>
    : Op<Hybrid_Dialect, mnemonic, traits>;

#endif // HYPIPE_HYBRID_DIALECT
