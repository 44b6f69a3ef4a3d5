//===- Artifact.cpp - write the compiled artifact directory ---------------===//

#include "targets/Artifact.h"

#include "core/data/Packing.h"
#include "core/io/Files.h"
#include "dialects/hybrid/HybridOps.h"
#include "frontend/Diagnostic.h"
#include "passes/Passes.h"
#include "passes/schedule/Programs.h"
#include "runtime/formats/FileCheck.h"
#include "targets/StageProgram.h"

#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

using namespace mlir;
using json = nlohmann::json;

namespace hypipe {

namespace {

llvm::Error fail(const std::string &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

llvm::Error failWith(Error err) { return fail("error: " + toString(err)); }

llvm::Error writeFile(const std::string &path, const std::string &text) {
  if (auto err = files::writeAtomically(path, "the artifact's file", text))
    return failWith(std::move(err));
  return llvm::Error::success();
}

} // namespace

LogicalResult lowerForArtifact(ModuleOp module, const std::string &scheduleCsv,
                               const RecomputeSpec &recompute) {
  PassManager pm(module.getContext());
  buildArtifactPassPipeline(pm, scheduleCsv, recompute);
  return pm.run(module);
}

namespace {

/// `path` of the spec, resolved against the spec's directory.
std::string besideSpec(const llvm::SmallString<256> &specPath,
                       const std::string &path) {
  llvm::SmallString<256> resolved(path);
  if (!resolved.empty() && !llvm::sys::path::is_absolute(resolved)) {
    llvm::SmallString<256> base = llvm::sys::path::parent_path(specPath);
    llvm::sys::path::append(base, resolved);
    resolved = base;
  }
  return resolved.str().str();
}

/// An earlier artifact is replaced whole: refused when it holds anything
/// besides the artifact's own files (a checkpoint or a log saved into it).
llvm::Error checkOnlyArtifactFiles(const std::string &dir) {
  std::error_code ec;
  for (const auto &entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name == "manifest.json" || name == "model.mlir")
      continue;
    return fail(fmt::format(
        "error: the artifact '{}' also holds '{}', which is not the "
        "artifact's: replacing the artifact would delete it\nhelp: move it "
        "out of the artifact, or compile into another directory",
        dir, files::excerpt(name)));
  }
  return llvm::Error::success();
}

/// Refuses `dir` for an artifact unless it is absent, empty or a hypipe
/// artifact (the new one replaces it whole), and unless replacing it would
/// delete one of the spec's inputs.
llvm::Error checkArtifactDirectory(const std::string &dir,
                                   const ModelSpec &spec) {
  const char *what = "the artifact directory";
  if (auto err = files::checkDirectoryOutput(dir, what))
    return failWith(std::move(err));
  if (auto err = files::checkNotAnInput(dir, what, specInputs(spec),
                                        /*replacedWhole=*/true))
    return failWith(std::move(err));
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec) ||
      std::filesystem::is_empty(dir, ec))
    return llvm::Error::success();
  Expected<std::string> manifest =
      files::readBounded(dir + "/manifest.json", files::kManifest);
  if (manifest) {
    auto m = json::parse(*manifest, nullptr, /*allow_exceptions=*/false);
    if (m.is_object() && m.value("format", "") == "hypipe-artifact")
      return checkOnlyArtifactFiles(dir);
  }
  (void)manifest.takeError();
  return fail(fmt::format(
      "error: '{}' is a directory of other files, not a hypipe artifact: "
      "the artifact would be written among them\nhelp: give -o a new or "
      "empty directory, or an earlier artifact (which is replaced whole)",
      dir));
}

/// The manifest's `model`: the spec's dimensions and the placed pattern.
rt::ModelInfo modelInfo(const ModelSpec &spec, hybrid::ModelOp model) {
  const ModelDims &d = spec.dims;
  rt::ModelInfo m;
  m.name = spec.name;
  m.pattern = model.getPattern().str();
  m.numLayers = int64_t(model.getMainLayers().size());
  m.hidden = d.hidden;
  m.vocab = d.vocab;
  m.tieEmbeddings = d.tieEmbeddings;
  m.positionEmbedding = spec.positionEmbedding;
  m.moeAuxLossCoeff = spec.moeAuxLossCoeff;
  m.moeExpertCapacityFactor = spec.moeExpertCapacityFactor.value_or(0.0);
  m.moeTokenDropPolicy = spec.moeTokenDropPolicy;
  m.mtpPattern = spec.pattern.mtp;
  m.mtpDepths = spec.pattern.mtpDepths;
  m.mtpLossScalingFactor =
      spec.pattern.mtpDepths > 0 ? spec.mtpLossScalingFactor : 0.0;
  m.ffnHidden = d.ffnHidden;
  m.numHeads = d.numHeads;
  m.numQueryGroups = d.numQueryGroups;
  m.kvChannels = d.kvChannels();
  m.mambaNumHeads = d.mambaNumHeads;
  m.mambaHeadDim = d.mambaHeadDim;
  m.mambaState = d.mambaState;
  m.mambaNumGroups = d.mambaNumGroups;
  m.mambaConvWidth = d.mambaConvWidth;
  m.numExperts = d.numExperts;
  m.moeTopK = d.moeTopK;
  m.moeFfnHidden = d.expertFfnHidden();
  m.activation = d.activation;

  return m;
}

/// The shapes of the model's G and + layers (all of a kind alike), as its
/// stages lowered them: the manifest's `model` records them.
void recordLayerShapes(rt::Artifact &artifact) {
  for (const rt::StageEntry &stage : artifact.stages)
    for (const rt::ProgramLayer &l : stage.program.layers) {
      if (const auto *g = std::get_if<rt::GdnShape>(&l.shape))
        artifact.model.gdn = *g;
      if (const auto *m = std::get_if<rt::MlaShape>(&l.shape))
        artifact.model.mla = *m;
    }
}

/// The manifest's `training`.
rt::TrainingConfig trainingConfig(const TrainingSpec &tr,
                                  const llvm::SmallString<256> &specPath) {
  rt::TrainingConfig t;
  t.seqLength = tr.seqLength;
  t.microBatchSize = tr.microBatchSize;
  t.steps = tr.steps;
  t.seed = tr.seed;
  t.lr = tr.lr;
  t.minLr = tr.minLr;
  t.warmupSteps = tr.warmupSteps;
  t.weightDecay = tr.weightDecay;
  t.gradClip = tr.gradClip;
  t.lrDecaySteps = tr.lrDecaySteps;
  t.lrDecayStyle = tr.lrDecayStyle;
  t.lrWarmupFraction = tr.lrWarmupFraction;
  t.lrWsdDecaySteps = tr.lrWsdDecaySteps;
  t.lrWsdDecayStyle = tr.lrWsdDecayStyle;
  t.beta1 = tr.adamBeta1;
  t.beta2 = tr.adamBeta2;
  t.eps = tr.adamEps;
  t.perTokenLoss = tr.calculatePerTokenLoss;
  if (!tr.initFrom.empty())
    t.initFrom = besideSpec(specPath, tr.initFrom);
  if (!tr.tensorboardDir.empty())
    t.tensorboardDir = besideSpec(specPath, tr.tensorboardDir);
  return t;
}

/// Packed runs: the programs of every other microbatch count per
/// data-parallel rank that packing can give a step, built and verified as
/// the pass pipeline builds the artifact's own, so that hypipe-run only
/// looks them up (docs/artifact.md). Counts the schedule does not run are
/// left out: hypipe-run names them if a step packs into one.
llvm::Error addPackedPrograms(rt::Artifact &a) {
  if (!a.packing.enabled)
    return llvm::Error::success();
  const packing::Options options = rt::packingOptions(a.packing, a.dp);
  for (int64_t count :
       packing::microbatchCounts(options, a.packing.globalBatchSize)) {
    if (count == a.microbatches)
      continue;
    auto built = schedule::buildVerifiedPrograms(
        {a.schedule, a.pp, a.vpp, count, a.groupSize});
    if (!built)
      return toLlvmError(built.takeError());
    if (*built)
      a.packedPrograms[count] = std::move((*built)->ranks);
  }
  return llvm::Error::success();
}

/// Builds the artifact's directory beside `dir` and puts it in place whole.
llvm::Error writeArtifactFiles(const std::string &dir,
                               const std::string &manifest,
                               const std::string &mlirText) {
  // A link to a directory: the directory it names is replaced.
  std::string target = llvm::StringRef(dir).rtrim('/').str();
  llvm::SmallString<256> real;
  if (!llvm::sys::fs::real_path(target, real))
    target = real.str().str();
  llvm::StringRef parent = llvm::sys::path::parent_path(target);
  if (auto ec = parent.empty() ? std::error_code()
                               : llvm::sys::fs::create_directories(parent))
    return fail(fmt::format("error: cannot create '{}': {}", parent.str(),
                            ec.message()));
  const std::string built = files::siblingTemporary(target);
  if (auto ec = llvm::sys::fs::create_directory(built, /*IgnoreExisting=*/false,
                                                llvm::sys::fs::perms::all_all))
    return fail(fmt::format("error: cannot create '{}': {}\nhelp: check "
                            "the permissions of the directory that holds "
                            "'{}'",
                            built, ec.message(), dir));
  llvm::Error written = writeFile(built + "/manifest.json", manifest);
  if (!written)
    written = writeFile(built + "/model.mlir", mlirText);
  if (written) {
    std::error_code ec;
    std::filesystem::remove_all(built, ec);
    return written;
  }
  if (auto err = files::replaceDirectory(built, dir, "the artifact"))
    return failWith(std::move(err));
  return llvm::Error::success();
}

} // namespace

rt::PackingConfig packingConfig(const ModelSpec &spec) {
  rt::PackingConfig p;
  if (!spec.data.packing)
    return p;
  const DataSpec &ds = spec.data;
  p.enabled = true;
  p.maxTokens = *ds.maxTokensPerMicrobatch;
  p.globalBatchSize = *ds.globalBatchSize;
  p.minBins = *ds.minBinCount;
  p.binMultiple = *ds.binCountMultiple;
  p.scheduler = ds.scheduler;
  p.truncate = ds.truncate;
  p.mock = ds.mock;
  packing::SampleCost cost =
      packing::modelSampleCost(spec.dims, spec.pattern.layers(),
                               spec.pattern.mtp, spec.pattern.mtpDepths);
  p.costPerToken = cost.perToken;
  p.costPerSquaredToken = cost.perSquaredToken;
  return p;
}

LogicalResult lowerSpecModel(ModuleOp module, const ModelSpec &spec) {
  for (auto model : module.getOps<hybrid::ModelOp>()) {
    MLIRContext *context = module.getContext();
    context->loadDialect<pipe::PipeDialect>();
    model->setAttr(pipe::kTargetAttr,
                   pipe::targetAttr(context, spec.training.target));
    model->setAttr(pipe::kPrecisionAttr,
                   TypeAttr::get(spec.training.dtype == TrainingPrecision::Bf16
                                     ? Type(BFloat16Type::get(context))
                                     : Type(Float32Type::get(context))));
  }
  return lowerForArtifact(module, spec.parallel.scheduleCsv,
                          spec.training.recompute);
}

llvm::Error writeArtifact(ModuleOp module, const ModelSpec &spec,
                          const std::string &dir) {
  const bool cuda = spec.training.target == rt::Target::Cuda;
  if (cuda && !HYPIPE_CUDA_KERNELS_BUILT)
    return fail(fmt::format(
        "error: {}: the target is cuda, and this hypipe was built without the "
        "CUDA toolkit (no nvcc and cuBLAS were found, so there are no CUDA "
        "kernels to run the stages)\nhelp: install CUDA 13 at /usr/local/cuda "
        "(or set CUDAToolkit_ROOT) and rebuild hypipe, or compile with "
        "--target cpu",
        spec.file));
  llvm::SmallString<256> specPath(spec.file);
  llvm::sys::fs::make_absolute(specPath);
  if (auto err = checkArtifactDirectory(dir, spec))
    return err;
  if (failed(lowerSpecModel(module, spec)))
    return fail("error: lowering failed (the diagnostics above say where)");
  auto models = module.getOps<hybrid::ModelOp>();
  if (models.empty())
    return fail("error: internal: no hybrid.model to write");
  hybrid::ModelOp model = *models.begin();

  rt::Artifact artifact;
  for (auto stage : model.getBody().front().getOps<pipe::StageOp>()) {
    FailureOr<rt::StageEntry> entry =
        translateStage(stage, spec.training.target);
    if (failed(entry))
      return fail("error: the stages cannot be lowered to kernels");
    artifact.stages.push_back(std::move(*entry));
  }

  auto programs = schedule::readPrograms(model);
  if (!programs)
    return toLlvmError(programs.takeError());
  artifact.programs = programs->ranks;
  auto forward = schedule::buildVerifiedForwardPrograms(*programs);
  if (!forward)
    return toLlvmError(forward.takeError());
  artifact.forwardPrograms = std::move(forward->ranks);

  const TrainingSpec &tr = spec.training;
  if (Expected<std::string> text = files::readBounded(spec.file, files::kSpec))
    artifact.specText = std::move(*text);
  else
    (void)text.takeError();
  artifact.specFile = specPath.str().str();
  artifact.target = spec.training.target;
  artifact.precision = spec.training.dtype;
  artifact.computeCapability = cuda ? 90 : 0;

  artifact.model = modelInfo(spec, model);
  recordLayerShapes(artifact);
  artifact.pp = spec.parallel.pp;
  artifact.vpp = spec.parallel.vpp;
  artifact.dp = spec.parallel.dp;
  artifact.tp = spec.parallel.tp;
  artifact.sequenceParallel = spec.parallel.sequenceParallel;
  artifact.schedule = spec.parallel.schedule;
  artifact.microbatches = spec.parallel.microbatches;
  artifact.groupSize = spec.parallel.groupSize;
  artifact.distributedOptimizer = spec.parallel.distributedOptimizer;
  artifact.comm = spec.parallel.comm;
  artifact.numStages = int64_t(artifact.stages.size());

  artifact.training = trainingConfig(tr, specPath);
  artifact.dataPath = besideSpec(specPath, spec.data.path);
  artifact.dataFormat = spec.data.format;
  artifact.split = spec.data.split;
  artifact.packing = packingConfig(spec);
  if (auto err = addPackedPrograms(artifact))
    return err;

  std::string mlirText;
  llvm::raw_string_ostream os(mlirText);
  module.print(os);
  os << "\n";
  return writeArtifactFiles(dir, rt::manifestToJson(artifact).dump(1) + "\n",
                            mlirText);
}

} // namespace hypipe
