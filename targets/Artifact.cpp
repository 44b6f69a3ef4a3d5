//===- Artifact.cpp - write the compiled artifact directory ---------------===//

#include "targets/Artifact.h"

#include "dialects/hybrid/HybridOps.h"
#include "frontend/Diagnostic.h"
#include "passes/Passes.h"
#include "passes/lowering/KernelPlan.h"
#include "passes/schedule/Programs.h"
#include "targets/cpu/EmitStage.h"

#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fstream>

using namespace mlir;
using json = nlohmann::json;

namespace hypipe {

namespace {

llvm::Error fail(const std::string &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

llvm::Error writeFile(const std::string &path, const std::string &text) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (ec)
    return fail(
        fmt::format("error: cannot write '{}': {}", path, ec.message()));
  os << text;
  return llvm::Error::success();
}

json paramTable(const cpu::StagePlan &plan) {
  json params = json::array();
  for (const cpu::KernelLayer &layer : plan.layers) {
    int64_t offset = layer.paramOffset;
    for (const rt::ParamSpec &p : layer.params) {
      params.push_back({{"name", layer.prefix + p.name},
                        {"shape", p.shape},
                        {"offset", offset},
                        {"init", rt::initName(p.init)},
                        {"init_args", {p.a, p.b}},
                        {"weight_decay", p.decay()}});
      offset += p.numel();
    }
  }
  return params;
}

json stageJson(const cpu::StagePlan &plan) {
  json layers = json::array();
  for (const cpu::KernelLayer &l : plan.layers)
    layers.push_back({{"kind", cpu::kernelKindName(l.kind)},
                      {"layer", l.layer},
                      {"params", {l.paramOffset, l.paramFloats}},
                      {"saved", {l.savedOffset, l.savedFloats}}});
  std::string base = fmt::format("stages/stage_{}", plan.index);
  return {{"index", plan.index},
          {"pp_rank", plan.ppRank},
          {"vp_stage", plan.vpStage},
          {"source", base + ".cpp"},
          {"library", base + ".so"},
          {"has_embedding", plan.hasEmbedding},
          {"has_head", plan.hasHead},
          {"batch", plan.tokens.batch},
          {"seq", plan.tokens.seq},
          {"hidden", plan.hidden},
          {"num_params", plan.paramFloats},
          {"saved_floats", plan.savedFloats},
          {"workspace_floats", plan.workspaceFloats},
          {"layers", layers},
          {"params", paramTable(plan)}};
}

json programJson(const schedule::Schedule &s, int64_t rank) {
  json actions = json::array();
  for (const schedule::Action &a : s.ranks[rank]) {
    json action = {{"op", std::string(schedule::opName(a.op))},
                   {"stage", a.stage},
                   {"mb", a.microbatch},
                   {"text", schedule::pytorchText(a)}};
    if (a.peer >= 0)
      action["peer"] = a.peer;
    if (a.batched)
      action["batched"] = true;
    actions.push_back(action);
  }
  return {{"pp_rank", rank}, {"schedule", s.name}, {"actions", actions}};
}

} // namespace

ArtifactOptions defaultArtifactOptions() {
  ArtifactOptions o;
  const char *cxx = std::getenv("HYPIPE_CXX");
  o.cxx = cxx && *cxx ? cxx : "c++";
  o.includeDir = HYPIPE_RUNTIME_INCLUDE_DIR;
  o.libDir = HYPIPE_KERNELS_LIB_DIR;
  return o;
}

LogicalResult lowerForArtifact(ModuleOp module) {
  PassManager pm(module.getContext());
  pm.addPass(createPipeOutlineStages());
  pm.addPass(createPipeInsertP2P());
  pm.addPass(createPipeBuildSchedule());
  pm.addPass(createPipeInsertComms());
  pm.addPass(createPipeVerifySchedule());
  pm.addPass(createPipePlanBuffers());
  return pm.run(module);
}

llvm::Error writeArtifact(ModuleOp module, const ModelSpec &spec,
                          const std::string &dir,
                          const ArtifactOptions &options) {
  if (spec.training.dtype != "fp32")
    return fail(fmt::format(
        "error: {}: training.dtype is '{}', but the CPU target trains in fp32 "
        "only\nhelp: set training.dtype: fp32 (bf16 is understood by the cost "
        "model and `hypipe explain`)",
        spec.file, spec.training.dtype));
  if (failed(lowerForArtifact(module)))
    return fail("error: lowering failed (the diagnostics above say where)");
  auto models = module.getOps<hybrid::ModelOp>();
  if (models.empty())
    return fail("error: internal: no hybrid.model to write");
  hybrid::ModelOp model = *models.begin();

  std::string stagesDir = dir + "/stages";
  if (auto ec = llvm::sys::fs::create_directories(stagesDir))
    return fail(
        fmt::format("error: cannot create '{}': {}", stagesDir, ec.message()));

  auto cxx = llvm::sys::findProgramByName(options.cxx);
  if (!cxx)
    return fail(
        fmt::format("error: C++ compiler '{}' not found\nhelp: install g++ "
                    "(scripts/setup.sh) or point HYPIPE_CXX at a compiler",
                    options.cxx));

  json stages = json::array();
  struct Job {
    llvm::sys::ProcessInfo process;
    std::string source, log;
  };
  std::vector<Job> jobs;
  for (auto stage : model.getBody().front().getOps<pipe::StageOp>()) {
    FailureOr<cpu::StagePlan> plan = cpu::planStage(stage);
    if (failed(plan))
      return fail("error: the stages cannot be lowered to CPU kernels");
    std::string base = fmt::format("{}/stage_{}", stagesDir, plan->index);
    if (auto err = writeFile(
            base + ".cpp", cpu::emitStageCpp(*plan, model.getSymName().str())))
      return err;
    stages.push_back(stageJson(*plan));

    std::vector<std::string> argStore = {*cxx,
                                         "-std=c++17",
                                         "-O2",
                                         "-march=native",
                                         "-fPIC",
                                         "-shared",
                                         "-I",
                                         options.includeDir,
                                         "-o",
                                         base + ".so",
                                         base + ".cpp",
                                         "-L" + options.libDir,
                                         "-lhypipe_kernels_cpu",
                                         "-Wl,-rpath," + options.libDir};
    std::vector<llvm::StringRef> args(argStore.begin(), argStore.end());
    Job job;
    job.source = base + ".cpp";
    job.log = base + ".log";
    std::optional<llvm::StringRef> redirects[] = {
        std::nullopt, llvm::StringRef(job.log), llvm::StringRef(job.log)};
    std::string error;
    job.process = llvm::sys::ExecuteNoWait(*cxx, args, std::nullopt, redirects,
                                           0, &error);
    if (job.process.Pid == llvm::sys::ProcessInfo::InvalidPid)
      return fail(fmt::format("error: cannot run '{}': {}", *cxx, error));
    jobs.push_back(std::move(job));
  }
  std::string failures;
  for (Job &job : jobs) {
    std::string error;
    llvm::sys::ProcessInfo done =
        llvm::sys::Wait(job.process, std::nullopt, &error);
    if (done.ReturnCode != 0)
      failures += fmt::format("error: compiling {} failed (log: {})\n",
                              job.source, job.log);
    else
      llvm::sys::fs::remove(job.log);
  }
  if (!failures.empty())
    return fail(failures + "help: this is a bug in hypipe's CPU lowering if "
                           "the compiler itself works; please report it");

  auto programs = schedule::readPrograms(model);
  if (!programs)
    return toLlvmError(programs.takeError());
  json ranks = json::array();
  for (int64_t r = 0; r < programs->pp; ++r)
    ranks.push_back(programJson(*programs, r));

  const ModelDims &d = spec.dims;
  const TrainingSpec &tr = spec.training;
  llvm::SmallString<256> specPath(spec.file), dataPath(spec.data.path);
  llvm::sys::fs::make_absolute(specPath);
  if (!dataPath.empty() && !llvm::sys::path::is_absolute(dataPath)) {
    llvm::SmallString<256> base = llvm::sys::path::parent_path(specPath);
    llvm::sys::path::append(base, dataPath);
    dataPath = base;
  }
  std::string specText;
  if (auto buffer = llvm::MemoryBuffer::getFile(spec.file))
    specText = (*buffer)->getBuffer().str();

  json manifest = {
      {"format", "hypipe-artifact"},
      {"version", rt::kArtifactVersion},
      {"target", "cpu"},
      {"model",
       {{"name", spec.name},
        {"pattern", model.getPattern().str()},
        {"num_layers", int64_t(model.getMainLayers().size())},
        {"hidden_size", d.hidden},
        {"vocab_size", d.vocab},
        {"tie_embeddings", d.tieEmbeddings},
        {"position_embedding", spec.positionEmbedding},
        {"moe_aux_loss_coeff", spec.moeAuxLossCoeff},
        {"ffn_hidden_size", d.ffnHidden},
        {"num_attention_heads", d.numHeads},
        {"num_query_groups", d.numQueryGroups},
        {"kv_channels", d.kvChannels()},
        {"mamba_num_heads", d.mambaNumHeads},
        {"mamba_head_dim", d.mambaHeadDim},
        {"mamba_state_dim", d.mambaState},
        {"mamba_num_groups", d.mambaNumGroups},
        {"mamba_conv_width", d.mambaConvWidth},
        {"num_experts", d.numExperts},
        {"moe_router_topk", d.moeTopK},
        {"moe_ffn_hidden_size", d.expertFfnHidden()},
        {"activation", d.activation}}},
      {"parallel",
       {{"pp", spec.parallel.pp},
        {"vpp", spec.parallel.vpp},
        {"dp", spec.parallel.dp},
        {"schedule", spec.parallel.schedule},
        {"microbatches", spec.parallel.microbatches}}},
      {"training",
       {{"seq_length", tr.seqLength},
        {"micro_batch_size", tr.microBatchSize},
        {"steps", tr.steps},
        {"seed", tr.seed},
        {"lr", tr.lr},
        {"min_lr", tr.minLr},
        {"warmup_steps", tr.warmupSteps},
        {"weight_decay", tr.weightDecay},
        {"grad_clip", tr.gradClip},
        {"adam_beta1", 0.9},
        {"adam_beta2", 0.999},
        {"adam_eps", 1e-8}}},
      {"data", {{"path", dataPath.str().str()}, {"format", spec.data.format}}},
      {"spec", {{"file", specPath.str().str()}, {"text", specText}}},
      {"stages", stages},
      {"programs", ranks},
  };
  if (auto err = writeFile(dir + "/manifest.json", manifest.dump(1) + "\n"))
    return err;

  std::string mlirText;
  llvm::raw_string_ostream os(mlirText);
  module.print(os);
  os << "\n";
  return writeFile(dir + "/model.mlir", mlirText);
}

} // namespace hypipe
