#ifndef HYPIPE_HYBRID_ENUMS
#define HYPIPE_HYBRID_ENUMS

include "mlir/IR/EnumAttr.td"

// The pipeline schedules, in the order and with the spelling of
// `core/schedule/Vocabulary.cpp`'s ScheduleKind: the generated enum converts
// to it one to one (HybridEnums.h), and a unit test holds the spellings equal.
def Hybrid_ScheduleGPipe : I32EnumAttrCase<"GPipe", 0, "gpipe">;
def Hybrid_ScheduleOneFOneB : I32EnumAttrCase<"OneFOneB", 1, "1f1b">;
def Hybrid_ScheduleInterleaved1F1B
    : I32EnumAttrCase<"Interleaved1F1B", 2, "interleaved-1f1b">;
def Hybrid_ScheduleZbH1 : I32EnumAttrCase<"ZbH1", 3, "zb-h1">;
def Hybrid_ScheduleZbV : I32EnumAttrCase<"ZbV", 4, "zbv">;
def Hybrid_ScheduleDualPipeV : I32EnumAttrCase<"DualPipeV", 5, "dualpipev">;

def Hybrid_Schedule : I32EnumAttr<"Schedule", "pipeline schedule", [
  Hybrid_ScheduleGPipe, Hybrid_ScheduleOneFOneB,
  Hybrid_ScheduleInterleaved1F1B, Hybrid_ScheduleZbH1, Hybrid_ScheduleZbV,
  Hybrid_ScheduleDualPipeV
]> {
  let cppNamespace = "::hypipe::hybrid";
  let genSpecializedAttr = 0;
  // `1f1b`, `interleaved-1f1b` and `zb-h1` are no MLIR keywords: as a
  // parameter it reads a keyword or a string and prints quoted where it must
  // (the generated FieldParser and operator<<), not keywords only.
  let parameterParser =
      "::mlir::FieldParser<::hypipe::hybrid::Schedule>::parse($_parser)";
  let parameterPrinter = "$_printer.getStream() << $_self";
}

#endif // HYPIPE_HYBRID_ENUMS
