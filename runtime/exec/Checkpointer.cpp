//===- Checkpointer.cpp - a rank's save and resume through Checkpoint.h ---===//

#include "runtime/exec/Checkpointer.h"

#include "runtime/comm/Comm.h"
#include "runtime/exec/GradientSync.h"
#include "runtime/formats/SafeTensors.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>
#include <sys/stat.h>

namespace hypipe::rt {

namespace {

/// The index of the first element of `values[0, n)` that is NaN or
/// infinite, or of the first negative one with `nonNegative`; -1 if none.
int64_t firstInsane(const float *values, int64_t n, bool nonNegative) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(values[i]) || (nonNegative && values[i] < 0))
      return i;
  return -1;
}

/// Refuses a checkpoint whose parameter `p` or Adam moments cannot have
/// been written by a run: training from them would turn the first update
/// into NaN (sqrt of a negative second moment) and save it.
void checkOptimizerState(const std::string &where, const ParamEntry &p,
                         const float *w, const float *m, const float *v) {
  const struct {
    std::string name;
    const float *values;
    bool nonNegative;
  } tensors[] = {{p.name, w, false},
                 {"optimizer.exp_avg." + p.name, m, false},
                 {"optimizer.exp_avg_sq." + p.name, v, true}};
  for (const auto &t : tensors) {
    const int64_t at = firstInsane(t.values + p.offset, p.numel, t.nonNegative);
    if (at < 0)
      continue;
    const float value = t.values[p.offset + at];
    throw RuntimeError(fmt::format(
        "checkpoint '{}': tensor '{}' holds {} at element {}{}; no run "
        "writes that, so the checkpoint was edited or is corrupt\nhelp: "
        "resume from an earlier checkpoint (a step_* directory), or start "
        "over from its weights with --init-from",
        where, t.name, value, at,
        t.nonNegative && std::isfinite(value)
            ? " (a second moment is a mean of squares, never negative)"
            : ""));
  }
}

/// The name of a parameter of `stage` that holds a NaN or infinite value
/// in `params` (its full parameters), or "".
std::string nonFiniteParameter(const StageEntry &stage,
                               const std::vector<float> &params) {
  for (const ParamEntry &p : stage.params)
    if (firstInsane(params.data() + p.offset, p.numel, false) >= 0)
      return p.name;
  return std::string();
}

/// The metadata a checkpoint of `artifact`'s run at `step` carries.
CheckpointInfo checkpointInfoOf(const Artifact &artifact, int64_t step,
                                int64_t globalBatch) {
  CheckpointInfo info;
  info.step = step;
  info.lrDecaySteps = artifact.training.decayEnd();
  info.globalBatch = globalBatch;
  info.consumedSamples = step * info.globalBatch;
  info.seed = artifact.training.seed;
  info.model = artifact.model.name;
  info.pattern = artifact.model.pattern;
  info.modelConfig = modelJson(artifact.model).dump();
  info.optimizerConfig = optimizerJson(artifact.training).dump();
  info.layout = fmt::format("pp={},vpp={},dp={},schedule={},microbatches={}",
                            artifact.pp, artifact.vpp, artifact.dp,
                            schedule::scheduleName(artifact.schedule),
                            artifact.microbatches);
  return info;
}

/// A model's layers, without the stage boundaries ('|').
std::string layersOf(std::string pattern) {
  pattern.erase(std::remove(pattern.begin(), pattern.end(), '|'),
                pattern.end());
  return pattern;
}

/// The settings of the model the checkpoint at `location` recorded
/// (`modelConfig`, modelJson's text; "" in checkpoints older than it) that
/// differ from `model`'s: those that change what the layers compute while
/// the tensors keep their shapes, which the shape checks cannot see (the
/// activation, the position embedding, the experts a token takes, MLA's
/// rotary settings and G's shape). "" when none does.
std::string modelSettingsDiffer(const std::string &location,
                                const std::string &modelConfig,
                                const ModelInfo &model) {
  if (modelConfig.empty())
    return "";
  const nlohmann::json theirs =
      nlohmann::json::parse(modelConfig, nullptr, false);
  if (!theirs.is_object())
    throw RuntimeError(fmt::format(
        "error: the model_config in the metadata of '{}' is not a JSON "
        "object\nhelp: the checkpoint was edited or is corrupt; use an "
        "earlier one",
        location));
  const nlohmann::json ours = modelJson(model);
  std::string differ;
  for (const char *key :
       {"activation", "position_embedding", "moe_router_topk", "mla", "gdn"}) {
    const nlohmann::json a = theirs.value(key, nlohmann::json()),
                         b = ours.value(key, nlohmann::json());
    if (a != b)
      differ +=
          fmt::format("{}{} {} (this model: {})", differ.empty() ? "" : ", ",
                      key, a.dump(), b.dump());
  }
  return differ;
}

} // namespace

void Checkpointer::readShard(CheckpointReader &ckpt, const std::string &name,
                             const ParamEntry &p, float *dst) const {
  if (comm.paramRanks(p) == 1 || (p.split == Split::None && p.expertRank < 0)) {
    ckpt.read(name, p.shape, dst);
    return;
  }
  // An expert of another expert-parallel rank: its slot is this rank's own
  // expert's, which its own entry reads.
  if (!comm.holds(p))
    return;
  std::vector<float> whole(size_t(shapeNumel(p.shape)));
  ckpt.read(name, p.shape, whole.data());
  forEachParamShardRun(p, comm.paramRanks(p), comm.paramRank(p),
                       [&](int64_t global, int64_t local, int64_t n) {
                         std::copy(whole.data() + global,
                                   whole.data() + global + n, dst + local);
                       });
}

Checkpointer::Checkpointer(const Artifact &artifact, std::vector<Stage> &stages,
                           AdamWOptimizer &optimizer, Transport &transport,
                           Comm &comm)
    : artifact(artifact), stages(stages), optimizer(optimizer),
      transport(transport), comm(comm) {}

std::vector<std::vector<float>> Checkpointer::gatherState(int64_t step,
                                                          std::string &error) {
  // Data-parallel replicas hold the same parameters: replica 0 writes
  // them, with the moments gathered from every shard when sharded (the
  // file is the same either way).
  std::vector<std::vector<float>> host;
  for (size_t i = 0; i < stages.size(); ++i) {
    optimizer.finishParamSync(i);
    host.push_back(optimizer.fullParameters(i));
    host.push_back(optimizer.fullExpAvg(i));
    host.push_back(optimizer.fullExpAvgSq(i));
    // A NaN saved would become `latest`, and every resume would start from
    // it: the last good checkpoint stays latest instead.
    // (Only the replicas that write hold them: the others' are empty.)
    const std::vector<float> &params = host[host.size() - 3];
    const StageEntry &entry = stages[i].entry();
    const std::string bad = params.size() < size_t(entry.numParams)
                                ? std::string()
                                : nonFiniteParameter(entry, params);
    if (!bad.empty() && error.empty())
      error = fmt::format(
          "step {}: parameter '{}' holds a NaN or infinite value; no "
          "checkpoint is saved for it\nhelp: the update diverged: lower "
          "training.lr or raise warmup_steps, and check the state it started "
          "from (--resume, --init-from)",
          step, bad);
  }
  return host;
}

void Checkpointer::gatherShards(std::vector<std::vector<float>> &host,
                                std::vector<std::vector<int64_t>> &at,
                                size_t perStage) {
  // Over the tensor-parallel group, or where MoE layers' experts spread
  // over data-parallel replicas over their tp-ep group (the replicas'
  // tensor-parallel groups, the dense tensors taken from the first).
  const int64_t tp = comm.tpSize(), ranks = comm.expertSize(),
                me = comm.expertRank();
  at.assign(stages.size(), {});
  for (size_t i = 0; i < stages.size(); ++i) {
    const StageEntry &e = stages[i].entry();
    int64_t next = 0;
    for (const ParamEntry &p : e.params) {
      at[i].push_back(ranks == 1 ? p.offset : next);
      next += shapeNumel(p.shape);
    }
    if (ranks == 1)
      continue;
    for (size_t kind = 0; kind < perStage; ++kind) {
      std::vector<float> &mine = host[perStage * i + kind];
      std::vector<float> all(me == 0 ? size_t(ranks * e.numParams) : 0);
      comm.gatherExpert(mine.data(), e.numParams, all.data());
      if (me != 0) {
        mine.clear();
        continue;
      }
      std::vector<float> whole(size_t(next), 0.0f);
      for (size_t k = 0; k < e.params.size(); ++k) {
        const ParamEntry &p = e.params[k];
        const int64_t cut = comm.paramRanks(p);
        for (int64_t r = 0; r < cut; ++r)
          forEachParamShardRun(
              p, cut, r, [&](int64_t global, int64_t local, int64_t n) {
                const float *from =
                    all.data() + r * e.numParams + p.offset + local;
                std::copy(from, from + n, whole.data() + at[i][k] + global);
              });
      }
      mine = std::move(whole);
    }
  }
}

std::string Checkpointer::writeFile(const std::string &dir,
                                    const std::vector<std::vector<float>> &host,
                                    const std::vector<std::vector<int64_t>> &at,
                                    const CheckpointInfo &info,
                                    std::string &error) {
  SafeTensorsWriter w;
  std::set<std::string> seen;
  for (size_t i = 0; i < stages.size(); ++i) {
    const float *params = host[3 * i].data();
    const float *m = host[3 * i + 1].data();
    const float *v = host[3 * i + 2].data();
    const std::vector<ParamEntry> &entries = stages[i].entry().params;
    for (size_t k = 0; k < entries.size(); ++k) {
      const ParamEntry &p = entries[k];
      if (!seen.insert(p.name).second)
        continue;
      w.add(p.name, p.shape, params + at[i][k]);
      w.add("optimizer.exp_avg." + p.name, p.shape, m + at[i][k]);
      w.add("optimizer.exp_avg_sq." + p.name, p.shape, v + at[i][k]);
    }
  }
  for (auto &[k, v] : info.metadata())
    w.metadata(k, v);
  const int64_t ppRank = comm.ppRank();
  try {
    WrittenFile f = w.write(fmt::format("{}/pp{}.safetensors", dir, ppRank));
    return fmt::format("pp{}.safetensors {} {}", ppRank, f.bytes, f.checksum);
  } catch (const RuntimeError &e) {
    error = e.what();
  }
  return std::string();
}

void Checkpointer::writeIndex(const std::string &root, const std::string &name,
                              const CheckpointInfo &info,
                              const std::vector<std::string> &writtenByRank,
                              std::string &error) {
  std::map<std::string, WrittenFile> files;
  for (const std::string &line : writtenByRank) {
    char file[64] = {0}, checksum[128] = {0};
    unsigned long long bytes = 0;
    if (std::sscanf(line.c_str(), "%63s %llu %127s", file, &bytes, checksum) ==
        3)
      files[file] = {checksum, bytes};
  }
  std::map<std::string, std::string> weightMap;
  for (const StageEntry &e : artifact.stages)
    for (const ParamEntry &p : e.params) {
      std::string file = fmt::format("pp{}.safetensors", e.ppRank);
      for (const std::string &prefix :
           {"", "optimizer.exp_avg.", "optimizer.exp_avg_sq."})
        weightMap.emplace(prefix + p.name, file);
    }
  try {
    writeCheckpointIndex(root + "/" + name, info, weightMap, files, artifact.pp,
                         artifact.vpp, artifact.dp, artifact.schedule,
                         artifact.microbatches);
    markLatest(root, name);
  } catch (const RuntimeError &e) {
    error = e.what();
  }
}

void Checkpointer::save(const std::string &root, int64_t step) {
  const CheckpointInfo info =
      checkpointInfoOf(artifact, step, globalBatchSize(artifact, comm));
  const std::string name = stepDirectoryName(step), dir = root + "/" + name;
  const std::string what =
      fmt::format("error: saving the checkpoint of step {} to '{}' failed; "
                  "the previous checkpoint is intact",
                  step, dir);
  std::string error;
  std::vector<std::vector<float>> host = gatherState(step, error);
  if (comm.rank() == 0 && error.empty())
    for (const std::string &d : {root, dir})
      if (::mkdir(d.c_str(), 0755) != 0 && errno != EEXIST) {
        error = fmt::format("cannot create '{}': {}", d, std::strerror(errno));
        break;
      }
  agreeAcrossRanks(comm, error, what);
  // Replica 0 of each pipeline rank writes: its tensor-parallel rank 0,
  // the whole tensors of its group's shards.
  // (Where experts spread over replicas, the first group of them.)
  std::vector<std::vector<int64_t>> at;
  if (comm.expertDpRank() == 0)
    gatherShards(host, at, 3);
  std::string written; // "FILE BYTES CHECKSUM" on the ranks that write
  if (comm.dpRank() == 0 && comm.tpRank() == 0)
    written = writeFile(dir, host, at, info, error);
  agreeAcrossRanks(comm, error, what);
  // Each writer's file size and checksum, for the index.
  std::vector<std::string> writtenByRank = comm.gatherToRoot(written);
  if (comm.rank() == 0)
    writeIndex(root, name, info, writtenByRank, error);
  agreeAcrossRanks(comm, error, what);
}

int64_t Checkpointer::readState(const std::string &path,
                                TrainingConfig &saved) {
  CheckpointReader ckpt(path);
  const CheckpointInfo &info = ckpt.info();
  const TrainingConfig &t = artifact.training;
  const int64_t globalBatch = globalBatchSize(artifact, comm);
  // The layers must match; where the stage boundaries fall may not.
  if (info.model != artifact.model.name ||
      layersOf(info.pattern) != layersOf(artifact.model.pattern))
    throw RuntimeError(fmt::format(
        "checkpoint '{}' is of model '{}' ({}), this artifact of '{}' "
        "({})\nhelp: resume with the spec that wrote it",
        ckpt.location(), info.model, layersOf(info.pattern),
        artifact.model.name, layersOf(artifact.model.pattern)));
  if (std::string differ = modelSettingsDiffer(
          ckpt.location(), info.modelConfig, artifact.model);
      !differ.empty())
    throw RuntimeError(fmt::format(
        "checkpoint '{}' is of another model: {}\nhelp: resume with the "
        "spec that wrote it (its layers would compute something else here)",
        ckpt.location(), differ));
  if (info.globalBatch != globalBatch || info.seed != t.seed)
    throw RuntimeError(fmt::format(
        "checkpoint '{}' was trained with global batch {} and seed {}, "
        "this run has {} and {}; the data order would change\nhelp: keep "
        "dp x microbatches x micro_batch_size and the seed of the run that "
        "saved it (pp, vpp and the schedule may change)",
        ckpt.location(), info.globalBatch, info.seed, globalBatch, t.seed));
  if (info.step >= t.steps)
    throw RuntimeError(fmt::format(
        "checkpoint '{}' is at step {}, and this run ends at step {}\n"
        "help: pass --steps N with N > {}",
        ckpt.location(), info.step, t.steps, info.step));
  // Every rank reads all of its stages' state and keeps its shard of the
  // moments: a checkpoint resumes on any dp, sharded or not.
  for (size_t i = 0; i < stages.size(); ++i) {
    optimizer.finishParamSync(i);
    const size_t n = size_t(stages[i].params().size());
    std::vector<float> w(n, 0.0f), m(n, 0.0f), v(n, 0.0f);
    for (const ParamEntry &p : stages[i].entry().params) {
      readShard(ckpt, p.name, p, w.data() + p.offset);
      readShard(ckpt, "optimizer.exp_avg." + p.name, p, m.data() + p.offset);
      readShard(ckpt, "optimizer.exp_avg_sq." + p.name, p, v.data() + p.offset);
      checkOptimizerState(ckpt.location(), p, w.data(), m.data(), v.data());
    }
    optimizer.loadState(i, w, m, v);
  }
  saved = artifact.training;
  saved.lrDecaySteps = info.lrDecaySteps;
  if (!info.optimizerConfig.empty()) {
    const std::string where = fmt::format(
        "the optimizer_config in the metadata of '{}'", ckpt.location());
    const nlohmann::json j =
        nlohmann::json::parse(info.optimizerConfig, nullptr, false);
    if (!j.is_object())
      throw RuntimeError(fmt::format(
          "error: {} is not a JSON object\nhelp: the checkpoint was edited "
          "or is corrupt; use an earlier one",
          where));
    readOptimizerSettings(j, where, saved);
    saved.lrDecaySteps = info.lrDecaySteps;
  }
  return info.step;
}

int64_t Checkpointer::resume(const std::string &path, TrainingConfig &saved) {
  std::string error;
  int64_t step = 0;
  try {
    step = readState(path, saved);
  } catch (const RuntimeError &e) {
    error = e.what();
  }
  agreeAcrossRanks(comm, error,
                   fmt::format("error: cannot resume from '{}'", path));
  return step;
}

void Checkpointer::initFrom(const std::string &path) {
  std::string error;
  try {
    CheckpointReader ckpt(path);
    const std::string theirs = layersOf(ckpt.info().pattern);
    if (!theirs.empty() && theirs != layersOf(artifact.model.pattern))
      throw RuntimeError(fmt::format(
          "'{}' holds a model of layers {}, and this one has {}\nhelp: start "
          "from weights of the same pattern (stage boundaries may differ)",
          ckpt.location(), theirs, layersOf(artifact.model.pattern)));
    if (std::string differ = modelSettingsDiffer(
            ckpt.location(), ckpt.info().modelConfig, artifact.model);
        !differ.empty())
      throw RuntimeError(fmt::format(
          "'{}' holds the weights of another model: {}\nhelp: start from "
          "weights of the same model (their layers would compute something "
          "else here)",
          ckpt.location(), differ));
    for (size_t i = 0; i < stages.size(); ++i) {
      optimizer.finishParamSync(i);
      Stage &s = stages[i];
      std::vector<float> w = s.params().download();
      for (const ParamEntry &p : s.entry().params)
        readShard(ckpt, p.name, p, w.data() + p.offset);
      s.params().upload(w.data(), s.params().size());
      s.mainWeightsChanged();
    }
  } catch (const RuntimeError &e) {
    error = e.what();
  }
  agreeAcrossRanks(comm, error,
                   fmt::format("error: cannot take the initial weights from "
                               "'{}'",
                               path));
}

void Checkpointer::dump(const std::string &path, int64_t step,
                        const StepLosses &losses, double mtpObjective,
                        const StepBatch &batch) {
  if (optimizer.sharded()) {
    // Every rank's parts of summed gradients, for the whole gradient.
    std::vector<Transport::Request> gathers;
    for (size_t i = 0; i < stages.size(); ++i) {
      optimizer.finishParamSync(i);
      Stage &s = stages[i];
      for (int64_t b = 0; b < s.shard().buckets(); ++b)
        optimizer.allGatherBucket(i, s.grads().data(), b, gathers);
    }
    transport.waitAll(gathers);
  }
  SafeTensorsWriter w;
  std::vector<std::vector<float>> host; // alive until write()
  for (Stage &s : stages) {
    host.push_back(s.params().download());
    host.push_back(s.grads().download());
  }
  // Split over tensor-parallel ranks: tp rank 0 writes the whole tensors.
  std::vector<std::vector<int64_t>> at;
  gatherShards(host, at, 2);
  if (comm.tpRank() != 0)
    return;
  for (size_t i = 0; i < stages.size(); ++i) {
    const float *params = host[2 * i].data(), *grads = host[2 * i + 1].data();
    const std::vector<ParamEntry> &entries = stages[i].entry().params;
    for (size_t k = 0; k < entries.size(); ++k) {
      w.add("param." + entries[k].name, entries[k].shape, params + at[i][k]);
      w.add("grad." + entries[k].name, entries[k].shape, grads + at[i][k]);
    }
  }
  std::vector<std::vector<int32_t>> starts; // alive until write()
  batch.addTo(w, starts);
  w.metadata("step", std::to_string(step));
  w.metadata("loss", fmt::format("{:.9g}", losses.loss));
  w.metadata("aux_loss", fmt::format("{:.9g}", losses.aux));
  for (size_t d = 0; d < losses.mtp.size(); ++d)
    w.metadata(fmt::format("mtp_{}_loss", d + 1),
               fmt::format("{:.9g}", losses.mtp[d]));
  if (!losses.mtp.empty())
    w.metadata("mtp_loss", fmt::format("{:.9g}", mtpObjective));
  w.write(path);
}

} // namespace hypipe::rt
