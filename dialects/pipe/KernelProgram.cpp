//===- KernelProgram.cpp - the kernel program ops and their shapes --------===//

#include "dialects/hybrid/HybridOps.h"
#include "dialects/pipe/PipeOps.h"

#include "core/model/TensorParallel.h"

#include "mlir/IR/Builders.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <algorithm>
#include <type_traits>

using namespace mlir;

namespace hypipe::pipe {

static_assert(int(KernelKind::embedding) == int(rt::LayerKind::Embedding) &&
                  int(KernelKind::mtp_output) ==
                      int(rt::LayerKind::MtpOutput) &&
                  int(KernelKind::gdn) == int(rt::LayerKind::Gdn) &&
                  int(KernelKind::mla) == int(rt::LayerKind::Mla) &&
                  int(KernelKind::dsa) == int(rt::LayerKind::Dsa),
              "pipe.kernel_layer kinds are rt::LayerKind's, in its order");

DictionaryAttr shapeAttr(MLIRContext *context, const rt::LayerShape &shape) {
  Builder b(context);
  SmallVector<NamedAttribute> fields;
  rt::forEachField(shape, [&](const char *name, const auto &value) {
    using T = std::decay_t<decltype(value)>;
    Attribute attr;
    if constexpr (std::is_same_v<T, bool>)
      attr = b.getBoolAttr(value);
    else if constexpr (std::is_same_v<T, int64_t>)
      attr = b.getI64IntegerAttr(value);
    else if constexpr (std::is_same_v<T, double>)
      attr = b.getF64FloatAttr(value);
    else
      attr = b.getStringAttr(rt::activationName(value));
    fields.push_back(b.getNamedAttr(name, attr));
  });
  return b.getDictionaryAttr(fields);
}

namespace {
/// Reads one field of a shape dictionary into `value`; false (with
/// `error`) when it is missing or of another type.
template <typename T>
bool readField(DictionaryAttr dict, const char *name, T &value,
               std::string &error) {
  Attribute attr = dict.get(name);
  if constexpr (std::is_same_v<T, bool>) {
    if (auto flag = dyn_cast_or_null<BoolAttr>(attr))
      return value = flag.getValue(), true;
  } else if constexpr (std::is_same_v<T, int64_t>) {
    auto integer = dyn_cast_or_null<IntegerAttr>(attr);
    if (integer && integer.getType().isInteger(64))
      return value = integer.getInt(), true;
  } else if constexpr (std::is_same_v<T, double>) {
    auto number = dyn_cast_or_null<FloatAttr>(attr);
    if (number && number.getType().isF64())
      return value = number.getValueAsDouble(), true;
  } else {
    if (auto name = dyn_cast_or_null<StringAttr>(attr))
      if (std::optional<rt::Activation> a =
              rt::parseActivation(name.getValue()))
        return value = *a, true;
  }
  error = std::string("field '") + name + "' is missing or not " +
          (std::is_same_v<T, bool>      ? "a bool"
           : std::is_same_v<T, int64_t> ? "an i64"
           : std::is_same_v<T, double>  ? "an f64"
                                        : "an activation name");
  return false;
}
} // namespace

FailureOr<rt::LayerShape> readShape(KernelKind kind, DictionaryAttr dict,
                                    std::string &error) {
  rt::LayerShape shape = rt::blankShape(layerKind(kind));
  size_t count = 0;
  bool ok = true;
  rt::forEachField(shape, [&](const char *name, auto &value) {
    ++count;
    ok = ok && readField(dict, name, value, error);
  });
  if (ok && dict.size() != count) {
    error = "it has " + std::to_string(dict.size()) + " fields, a " +
            stringifyKernelKind(kind).str() + " shape " + std::to_string(count);
    ok = false;
  }
  if (!ok)
    return failure();
  return shape;
}

static_assert(int(Target::cuda) == int(rt::Target::Cuda),
              "pipe.target's values are rt::Target's");

rt::Target targetOf(Operation *op) {
  auto model = isa<hybrid::ModelOp>(op)
                   ? cast<hybrid::ModelOp>(op)
                   : op->getParentOfType<hybrid::ModelOp>();
  auto target = model ? model->getAttrOfType<TargetAttr>(kTargetAttr) : nullptr;
  return target ? rt::Target(int(target.getValue())) : rt::Target::Cpu;
}

FailureOr<RecomputeModuleSet> moduleSetOf(ArrayAttr modules,
                                          std::string &error) {
  RecomputeModuleSet set = 0;
  for (Attribute a : modules ? modules.getValue() : ArrayRef<Attribute>()) {
    auto name = dyn_cast<StringAttr>(a);
    std::optional<RecomputeModule> m =
        name ? parseRecomputeModule(name.getValue().str()) : std::nullopt;
    if (!m) {
      error = "names no recompute module it knows";
      return failure();
    }
    if (set & moduleBit(*m)) {
      error = "names " + name.getValue().str() + " twice";
      return failure();
    }
    set |= moduleBit(*m);
  }
  return set;
}

ArrayAttr modulesAttr(MLIRContext *context, RecomputeModuleSet modules) {
  Builder b(context);
  SmallVector<StringRef> names;
  for (RecomputeModule m : kRecomputeModules)
    if (modules & moduleBit(m))
      names.push_back(recomputeModuleName(m));
  return b.getStrArrayAttr(names);
}

namespace {

int64_t floatBytes(MLIRContext *context) {
  return Float32Type::get(context).getWidth() / 8;
}

/// A range's place for the overlap checks.
struct Placed {
  RangeAttr range;
  Operation *op;
};

LogicalResult checkInside(Operation *op, RangeAttr range, int64_t bytes,
                          StringRef what, StringRef invariant) {
  if (range.end() > bytes)
    return op->emitOpError()
           << "its " << what << " range " << range << " lies outside the "
           << bytes << "-byte buffer (" << invariant << ")";
  return success();
}

LogicalResult checkDisjoint(std::vector<Placed> ranges, StringRef what) {
  llvm::sort(ranges, [](const Placed &a, const Placed &b) {
    return a.range.getOffset() < b.range.getOffset();
  });
  for (size_t n = 1; n < ranges.size(); ++n)
    if (ranges[n].range.getOffset() < ranges[n - 1].range.end())
      return ranges[n].op->emitOpError()
             << "its " << what << " range " << ranges[n].range << " overlaps "
             << ranges[n - 1].range << " (kernel_program_c3)";
  return success();
}

} // namespace

LogicalResult KernelProgramOp::verify() {
  // kernel_program_c8
  if ((getTensorParallel() && *getTensorParallel() < 2) ||
      (getSequenceParallel() && !getTensorParallel()))
    return emitOpError() << "splits its layers over at least 2 "
                            "tensor-parallel ranks, and sequence_parallel "
                            "needs them (kernel_program_c8)";
  // kernel_program_c2
  const int64_t f32 = floatBytes(getContext());
  for (int64_t size : {getParamBytes(), getSavedBytes(), getWorkspaceBytes()})
    if (size < 0 || size % f32 != 0)
      return emitOpError() << "buffer sizes must be non-negative multiples of "
                           << f32 << " bytes, got " << size
                           << " (kernel_program_c2)";
  if (!getActivations().isF32() && !getActivations().isBF16())
    return emitOpError() << "activations must be f32 or bf16, not "
                         << getActivations() << " (kernel_program_c2)";
  // kernel_program_c3: the workspace's parts
  const int64_t activation = getBatch() * getSeq() * getHidden() * f32;
  std::vector<Placed> parts;
  for (auto [range, name] : {std::pair{getAct0(), "act0"},
                             {getAct1(), "act1"},
                             {getScratch(), "scratch"}}) {
    if (failed(checkInside(*this, range, getWorkspaceBytes(), name,
                           "kernel_program_c3")))
      return failure();
    if (StringRef(name) != "scratch" && range.getBytes() != activation)
      return emitOpError() << name << " " << range << " must hold one "
                           << activation << "-byte activation "
                           << "(kernel_program_c3)";
    parts.push_back({range, *this});
  }
  // kernel_program_c5: the recompute slots come together, with the buffer
  const bool recomputes = bool(getRecomputeBytesAttr());
  const bool slots = bool(getRc0Attr());
  if (slots != bool(getRc1Attr()) || (slots && !recomputes))
    return emitOpError() << "gives `rc0` and `rc1` together, and only with "
                            "a recompute buffer (kernel_program_c5)";
  if (recomputes) {
    const int64_t bytes = int64_t(*getRecomputeBytes());
    if (bytes < 0 || bytes % f32 != 0)
      return emitOpError() << "its recompute buffer must be a non-negative "
                           << "multiple of " << f32 << " bytes, got " << bytes
                           << " (kernel_program_c5)";
  }
  if (slots) {
    for (auto [range, name] :
         {std::pair{getRc0Attr(), "rc0"}, {getRc1Attr(), "rc1"}}) {
      if (failed(checkInside(*this, range, getWorkspaceBytes(), name,
                             "kernel_program_c5")))
        return failure();
      if (range.getBytes() != activation)
        return emitOpError() << name << " " << range << " must hold one "
                             << activation << "-byte activation "
                             << "(kernel_program_c5)";
      parts.push_back({range, *this});
    }
  }
  if (failed(checkDisjoint(parts, "workspace")))
    return failure();
  // kernel_program_c4
  for (auto range : {getSharedOutputAttr(), getSharedTableAttr()})
    if (range && failed(checkInside(*this, range, getParamBytes(), "shared",
                                    "kernel_program_c4")))
      return failure();
  return success();
}

namespace {

LogicalResult checkCheckpoints(KernelProgramOp program,
                               std::vector<Placed> saved) {
  // kernel_program_c6
  const int64_t activation = keptActivationBytes(program);
  llvm::SmallDenseSet<Attribute> kept;
  for (auto pass : program.getBody().front().getOps<KernelPassOp>()) {
    for (Operation &op : pass.getBody().front()) {
      if (auto save = dyn_cast<KernelSaveOp>(op)) {
        if (failed(checkInside(save, save.getRange(), program.getSavedBytes(),
                               "saved", "kernel_program_c6")))
          return failure();
        if (save.getRange().getBytes() != activation)
          return save.emitOpError()
                 << "must keep one " << activation << "-byte activation, not "
                 << save.getRange() << " (kernel_program_c6)";
        saved.push_back({save.getRange(), save});
        kept.insert(save.getRange());
      } else if (auto load = dyn_cast<KernelLoadOp>(op)) {
        if (!kept.contains(load.getRange()))
          return load.emitOpError() << "reads " << load.getRange()
                                    << ", which no pipe.kernel_save of the "
                                       "forward wrote (kernel_program_c6)";
      }
    }
  }
  return checkDisjoint(saved, "saved");
}

LogicalResult checkRecomputeOrder(KernelProgramOp program) {
  // kernel_program_c7
  for (auto pass : program.getBody().front().getOps<KernelPassOp>()) {
    if (pass.getPass() != KernelPass::backward_input)
      continue;
    llvm::SmallDenseMap<Value, int> recomputes;
    for (Operation &op : pass.getBody().front()) {
      if (auto rc = dyn_cast<KernelRecomputeOp>(op)) {
        if (++recomputes[rc.getLayer()] > 1)
          return rc.emitOpError()
                 << "recomputes a layer twice (kernel_program_c7)";
        continue;
      }
      auto call = dyn_cast<KernelCallOp>(op);
      auto layer = call ? call.getLayer().getDefiningOp<KernelLayerOp>()
                        : KernelLayerOp();
      if (layer && (layer.getRecomputed() || layer.getModules()) &&
          !recomputes.count(layer))
        return call.emitOpError()
               << "runs the input gradient of a recomputed layer before "
                  "its forward ran again (kernel_program_c7)";
    }
  }
  return success();
}

} // namespace

LogicalResult KernelProgramOp::verifyRegions() {
  // kernel_program_c1
  Block &body = getBody().front();
  auto op = body.begin();
  std::vector<Placed> params, saved, recomputed;
  for (; op != body.end() && isa<KernelLayerOp>(*op); ++op) {
    auto layer = cast<KernelLayerOp>(*op);
    // kernel_program_c3 and c5: the layers' ranges
    if (layer.getRecomputed() && !getRecomputeBytes())
      return layer.emitOpError() << "is recomputed in a program without a "
                                    "recompute buffer (kernel_program_c5)";
    const bool kept = !layer.getRecomputed();
    if (failed(checkInside(layer, layer.getParams(), getParamBytes(),
                           "parameter", "kernel_program_c3")) ||
        failed(
            checkInside(layer, layer.getSaved(),
                        kept ? getSavedBytes() : int64_t(*getRecomputeBytes()),
                        kept ? "saved" : "recomputed",
                        kept ? "kernel_program_c3" : "kernel_program_c5")))
      return failure();
    if (layer.getParams().getBytes() > 0)
      params.push_back({layer.getParams(), layer});
    if (layer.getSaved().getBytes() > 0)
      (kept ? saved : recomputed).push_back({layer.getSaved(), layer});
    if (auto again = layer.getAgainAttr()) {
      if (!getRecomputeBytes())
        return layer.emitOpError() << "is recomputed in a program without a "
                                      "recompute buffer (kernel_program_c5)";
      if (failed(checkInside(layer, again, int64_t(*getRecomputeBytes()),
                             "recomputed", "kernel_program_c5")))
        return failure();
      if (again.getBytes() > 0)
        recomputed.push_back({again, layer});
    }
  }
  if (getRecomputeBytes() && recomputed.empty())
    return emitOpError() << "has a recompute buffer but no recomputed layer "
                            "(kernel_program_c5)";
  for (KernelPass pass : {KernelPass::forward, KernelPass::backward_input,
                          KernelPass::backward_weight}) {
    auto passOp =
        op == body.end() ? KernelPassOp() : dyn_cast<KernelPassOp>(*op);
    if (!passOp || passOp.getPass() != pass)
      return emitOpError() << "must hold its layers, then a "
                           << stringifyKernelPass(pass)
                           << " pass where it holds "
                           << (op == body.end() ? StringRef("nothing")
                                                : op->getName().getStringRef())
                           << " (kernel_program_c1)";
    ++op;
  }
  if (op != body.end())
    return op->emitOpError()
           << "follows the weight-gradient pass (kernel_program_c1)";
  if (failed(checkDisjoint(params, "parameter")) ||
      failed(checkDisjoint(recomputed, "recomputed")))
    return failure();
  if (failed(checkCheckpoints(*this, std::move(saved))))
    return failure();
  return checkRecomputeOrder(*this);
}

LogicalResult KernelLayerOp::verify() {
  // kernel_layer_c1
  std::string error;
  FailureOr<rt::LayerShape> shape = readShape(getKind(), getShape(), error);
  if (failed(shape))
    return emitOpError() << "its shape is not a "
                         << stringifyKernelKind(getKind())
                         << " shape: " << error << " (kernel_layer_c1)";
  // kernel_layer_c4
  auto program = cast<KernelProgramOp>((*this)->getParentOp());
  const int64_t tp = tensorParallelOf(program);
  if (std::string why = rt::tensorParallelProblem(*shape, tp); !why.empty())
    return emitOpError() << "does not split over " << tp
                         << " tensor-parallel ranks: " << why
                         << " (kernel_layer_c4)";
  const int64_t paramFloats =
      rt::rankNumel(rt::paramsOf(*shape, int64_t(program.getNumLayers())), tp);
  shape =
      rt::tensorParallelShard(*shape, tp, bool(program.getSequenceParallel()));
  // kernel_layer_c2
  const int64_t f32 = floatBytes(getContext());
  const rt::TokenShape tokens{int64_t(program.getBatch()),
                              int64_t(program.getSeq())};
  const rt::Target target = targetOf(*this);
  // kernel_layer_c3
  FailureOr<RecomputeModuleSet> modules = moduleSetOf(getModulesAttr(), error);
  if (failed(modules))
    return emitOpError() << "its recompute list " << error
                         << " (kernel_layer_c3)";
  const RecomputeModuleSet droppable =
      rt::selectiveModulesOf(rt::kindOf(*shape));
  if ((*modules & ~droppable) || (getModules() && getRecomputed()) ||
      bool(getModulesAttr()) != bool(getAgainAttr()))
    return emitOpError() << "recomputes modules selective recompute does not "
                            "drop of a "
                         << stringifyKernelKind(getKind())
                         << " layer, or is both recomputed and selective "
                            "(kernel_layer_c3)";
  const int64_t againFloats = rt::recomputedFloatsOf(*shape, tokens, *modules);
  const int64_t savedFloats =
      rt::savedFloatsOf(*shape, tokens, target) - againFloats;
  if (auto again = getAgainAttr();
      again &&
      (!again.getDtype().isF32() || again.getBytes() != againFloats * f32))
    return emitOpError() << "its recomputed range " << again
                         << " is not its modules' " << againFloats * f32
                         << " bytes of f32 (kernel_layer_c3)";
  for (auto [range, floats, what] :
       {std::tuple{getParams(), paramFloats, "parameter"},
        {getSaved(), savedFloats, "saved"}})
    if (!range.getDtype().isF32() || range.getBytes() != floats * f32)
      return emitOpError() << "its " << what << " range " << range
                           << " is not the shape's " << floats * f32
                           << " bytes of f32 (kernel_layer_c2)";
  return success();
}

/// `%mamba3`, `%head`: the kernel and the layer number, so that a printed
/// program reads by layer.
void KernelLayerOp::getAsmResultNames(
    function_ref<void(Value, StringRef)> setName) {
  std::string name = stringifyKernelKind(getKind()).str();
  if (getLayer() > 0)
    name += std::to_string(getLayer());
  setName(getResult(), name);
}

LogicalResult KernelPassOp::verifyRegions() {
  // kernel_pass_c1, kernel_pass_c2
  Slot written =
      getPass() == KernelPass::forward ? Slot::input : Slot::grad_output;
  Slot recomputed = Slot::none; // the recompute chain's last write
  for (Operation &op : getBody().front()) {
    Slot in, out;
    if (auto call = dyn_cast<KernelCallOp>(op)) {
      in = call.getIn();
      out = call.getOut();
    } else if (auto copy = dyn_cast<KernelCopyOp>(op)) {
      in = copy.getIn();
      out = copy.getOut();
    } else if (auto save = dyn_cast<KernelSaveOp>(op);
               save && getPass() == KernelPass::forward) {
      if (save.getIn() != written)
        return op.emitOpError()
               << "keeps " << stringifySlot(save.getIn())
               << " where the call before it wrote " << stringifySlot(written)
               << " (kernel_pass_c2)";
      continue;
    } else if (isa<KernelLoadOp, KernelRecomputeOp>(op) &&
               getPass() == KernelPass::backward_input) {
      auto rc = dyn_cast<KernelRecomputeOp>(op);
      if (rc && rc.getIn() != Slot::none && rc.getIn() != recomputed)
        return op.emitOpError()
               << "reads " << stringifySlot(rc.getIn())
               << " where the recompute before it wrote "
               << stringifySlot(recomputed) << " (kernel_pass_c2)";
      Slot to = rc ? rc.getOut() : cast<KernelLoadOp>(op).getOut();
      if (to != Slot::none)
        recomputed = to;
      continue;
    } else {
      return op.emitOpError() << "is not a kernel call or copy, nor a save "
                                 "(forward) or a load or recompute "
                                 "(backward_input) (kernel_pass_c1)";
    }
    if (in == Slot::rc0 || in == Slot::rc1 || out == Slot::rc0 ||
        out == Slot::rc1)
      return op.emitOpError() << "uses a recompute slot outside the "
                                 "recomputed forward (kernel_pass_c2)";
    if (getPass() == KernelPass::backward_weight) {
      if (in != Slot::none || out != Slot::none)
        return op.emitOpError() << "a weight-gradient call reads and writes "
                                   "no slot (kernel_pass_c2)";
      continue;
    }
    if (in != Slot::none && in != written)
      return op.emitOpError()
             << "reads " << stringifySlot(in) << " where the call before it "
             << "wrote " << stringifySlot(written) << " (kernel_pass_c2)";
    if (out != Slot::none)
      written = out;
  }
  return success();
}

int64_t tensorParallelOf(KernelProgramOp program) {
  std::optional<uint64_t> tp = program.getTensorParallel();
  return tp ? int64_t(*tp) : 1;
}

int64_t keptActivationBytes(KernelProgramOp program) {
  return rt::rankActivationFloats(
             int64_t(program.getBatch() * program.getSeq()),
             int64_t(program.getHidden()), tensorParallelOf(program),
             program.getSequenceParallel()) *
         int64_t(sizeof(float));
}

ArrayAttr collectivesAttr(MLIRContext *context,
                          const std::vector<rt::Collective> &collectives) {
  if (collectives.empty())
    return nullptr;
  SmallVector<Attribute> names;
  for (const rt::Collective &c : collectives)
    names.push_back(
        StringAttr::get(context, std::string(rt::collectiveKindName(c.kind)) +
                                     ":" + std::to_string(c.perToken)));
  return ArrayAttr::get(context, names);
}

std::vector<rt::Collective> collectivesOfCall(KernelLayerOp layer,
                                              KernelPass pass, bool recompute) {
  auto program = cast<KernelProgramOp>(layer->getParentOp());
  std::string error;
  FailureOr<rt::LayerShape> shape =
      readShape(layer.getKind(), layer.getShape(), error);
  if (failed(shape))
    return {};
  FailureOr<RecomputeModuleSet> modules =
      moduleSetOf(layer.getModulesAttr(), error);
  return rt::collectivesOfCall(
      *shape, tensorParallelOf(program), program.getSequenceParallel(),
      rt::StagePass(int(pass)), recompute, layer.getRecomputed(),
      failed(modules) ? 0 : *modules);
}

namespace {
/// kernel_call_c2 and kernel_recompute_c2: `op`'s collectives are the
/// layer's.
LogicalResult checkCollectives(Operation *op, KernelLayerOp layer,
                               ArrayAttr listed, bool recompute,
                               const char *constraint) {
  auto pass = cast<KernelPassOp>(op->getParentOp());
  ArrayAttr expected = collectivesAttr(
      op->getContext(), collectivesOfCall(layer, pass.getPass(), recompute));
  if (listed == expected)
    return success();
  auto text = [](ArrayAttr a) {
    std::string out;
    llvm::raw_string_ostream os(out);
    if (a)
      os << a;
    else
      os << "none";
    return out;
  };
  return op->emitOpError() << "lists the collectives " << text(listed)
                           << " where its layer runs " << text(expected) << " ("
                           << constraint << ")";
}
} // namespace

LogicalResult KernelCallOp::verify() {
  // kernel_call_c1
  auto layer = getLayer().getDefiningOp<KernelLayerOp>();
  if (!layer || layer->getParentOp() != (*this)->getParentOp()->getParentOp())
    return emitOpError() << "must call a pipe.kernel_layer of its own program "
                            "(kernel_call_c1)";
  // kernel_call_c2
  return checkCollectives(*this, layer, getCollectivesAttr(), false,
                          "kernel_call_c2");
}

LogicalResult KernelCopyOp::verify() {
  // kernel_copy_c1
  if (getIn() == Slot::none || getOut() == Slot::none || getIn() == getOut())
    return emitOpError() << "copies between two different slots, not "
                         << stringifySlot(getIn()) << " -> "
                         << stringifySlot(getOut()) << " (kernel_copy_c1)";
  return success();
}

LogicalResult KernelSaveOp::verify() {
  // kernel_save_c1
  if (getIn() == Slot::none)
    return emitOpError() << "keeps a slot, not none (kernel_save_c1)";
  return success();
}

namespace {
bool isRecomputeSlot(Slot s) { return s == Slot::rc0 || s == Slot::rc1; }
} // namespace

LogicalResult KernelLoadOp::verify() {
  // kernel_load_c1
  if (!isRecomputeSlot(getOut()))
    return emitOpError() << "writes rc0 or rc1, not " << stringifySlot(getOut())
                         << " (kernel_load_c1)";
  return success();
}

LogicalResult KernelRecomputeOp::verify() {
  // kernel_recompute_c1
  auto layer = getLayer().getDefiningOp<KernelLayerOp>();
  if (!layer || layer->getParentOp() != (*this)->getParentOp()->getParentOp() ||
      !(layer.getRecomputed() || layer.getModules()))
    return emitOpError() << "must recompute a recomputed pipe.kernel_layer "
                            "of its own program (kernel_recompute_c1)";
  // A selective layer reads and writes no slot, but a MoE layer whose moe
  // module is recomputed runs its forward again into rc0 (through rc1).
  const bool selective = bool(layer.getModules());
  const bool wholeMoe =
      selective &&
      llvm::is_contained(layer.getModulesAttr().getAsValueRange<StringAttr>(),
                         "moe");
  for (Slot s : {getIn(), getOut()}) {
    const bool ok = s == Slot::none ||
                    (selective ? wholeMoe && s == getOut() && s == Slot::rc0
                               : isRecomputeSlot(s));
    if (!ok)
      return emitOpError() << "reads and writes "
                           << (!selective ? "rc0, rc1 or none"
                               : wholeMoe ? "none, and writes rc0"
                                          : "none")
                           << ", not " << stringifySlot(s)
                           << " (kernel_recompute_c1)";
  }
  if (wholeMoe && getOut() != Slot::rc0)
    return emitOpError() << "runs a MoE layer's forward again: it writes rc0 "
                            "(kernel_recompute_c1)";
  // kernel_recompute_c2
  return checkCollectives(*this, layer, getCollectivesAttr(), true,
                          "kernel_recompute_c2");
}

} // namespace hypipe::pipe
