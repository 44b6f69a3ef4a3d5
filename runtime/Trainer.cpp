//===- Trainer.cpp - run one rank's schedule program, step after step
//------===//

#include "runtime/Trainer.h"

#include "runtime/Init.h"
#include "runtime/SafeTensors.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstring>

namespace hypipe::rt {

double learningRate(const TrainingConfig &c, int64_t step) {
  if (c.warmupSteps > 0 && step <= c.warmupSteps)
    return c.lr * double(step) / double(c.warmupSteps);
  int64_t decaySteps = std::max<int64_t>(1, c.steps - c.warmupSteps);
  double ratio =
      std::min(1.0, double(step - c.warmupSteps) / double(decaySteps));
  return c.minLr + 0.5 * (1.0 + std::cos(M_PI * ratio)) * (c.lr - c.minLr);
}

Trainer::Trainer(Artifact &artifact, int64_t ppRank, const TextDataset &data)
    : artifact(artifact), ppRank(ppRank), data(data) {
  loadStageLibraries(artifact, ppRank);
  for (StageEntry *e : artifact.stagesOf(ppRank)) {
    StageState s;
    s.entry = e;
    s.params.assign(e->numParams, 0.0f);
    s.grads.assign(e->numParams, 0.0f);
    s.adamM.assign(e->numParams, 0.0f);
    s.adamV.assign(e->numParams, 0.0f);
    s.workspace.assign(e->workspaceFloats, 0.0f);
    for (const ParamEntry &p : e->params) {
      initParameter(p, artifact.training.seed, s.params.data() + p.offset);
      copies[p.name].push_back({stages.size(), p.offset});
    }
    stages.push_back(std::move(s));
  }
  for (auto it = copies.begin(); it != copies.end();)
    it = it->second.size() > 1 ? std::next(it) : copies.erase(it);
  const TrainingConfig &t = artifact.training;
  int64_t perMb = t.microBatchSize * t.seqLength;
  tokens.resize(artifact.microbatches * perMb);
  labels.resize(artifact.microbatches * perMb);
}

void Trainer::runProgram(int64_t step, double &loss, double &aux) {
  const TrainingConfig &t = artifact.training;
  const int64_t M = artifact.microbatches,
                perMb = t.microBatchSize * t.seqLength;
  const int64_t activation = perMb * artifact.stages[0].hidden;
  // Every rank draws the same global batch, so first and last stages agree
  // on tokens and labels without sending them.
  for (int64_t mb = 0; mb < M; ++mb)
    for (int64_t row = 0; row < t.microBatchSize; ++row) {
      int64_t index = ((step - 1) * M + mb) * t.microBatchSize + row;
      int64_t at = mb * perMb + row * t.seqLength;
      data.sample(uint64_t(t.seed), index, tokens.data() + at,
                  labels.data() + at);
    }

  auto key = [](int64_t stage, int64_t mb) { return stage * (1 << 20) + mb; };
  std::map<int64_t, std::vector<float>> acts, grads; // outputs, input grads
  std::map<int64_t, int> slotOf;
  auto local = [&](int64_t stage) -> StageState & {
    for (StageState &s : stages)
      if (s.entry->index == stage)
        return s;
    throw RuntimeError(fmt::format(
        "error: rank {}'s program names stage {}, which runs on another rank\n"
        "help: the artifact is corrupt; recompile it",
        ppRank, stage));
  };

  for (const ActionEntry &a : artifact.programs[ppRank]) {
    if (a.kind != ActionEntry::F && a.kind != ActionEntry::B &&
        a.kind != ActionEntry::I && a.kind != ActionEntry::W)
      throw RuntimeError(fmt::format(
          "error: action '{}' exchanges tensors with rank {}; this run has a "
          "single process\nhelp: launch {} ranks with mpirun (or compile "
          "with --pp 1)",
          a.text, a.peer, artifact.pp * artifact.dp));
    StageState &s = local(a.stage);
    StageEntry &e = *s.entry;
    hypipe_stage_args_t args{};
    args.params = s.params.data();
    args.grads = s.grads.data();
    args.workspace = s.workspace.data();
    args.tokens = tokens.data() + a.mb * perMb;
    args.labels = labels.data() + a.mb * perMb;
    args.loss_scale = float(1.0 / double(M));
    int64_t k = key(a.stage, a.mb);

    if (a.kind == ActionEntry::F) {
      int slot;
      if (s.freeSlots.empty()) {
        slot = int(s.slots.size());
        s.slots.emplace_back(e.savedFloats);
      } else {
        slot = s.freeSlots.back();
        s.freeSlots.pop_back();
      }
      slotOf[k] = slot;
      args.saved = s.slots[slot].data();
      if (!e.hasEmbedding)
        args.input = acts.at(key(a.stage - 1, a.mb)).data();
      if (!e.hasHead)
        args.output = acts.emplace(k, std::vector<float>(activation))
                          .first->second.data();
      e.forward(&args);
      if (!e.hasEmbedding)
        acts.erase(key(a.stage - 1, a.mb));
      if (e.hasHead)
        loss += args.loss / double(M);
      aux += args.aux_loss / double(M);
      continue;
    }
    args.saved = s.slots.at(slotOf.at(k)).data();
    if (a.kind == ActionEntry::B || a.kind == ActionEntry::I) {
      if (!e.hasHead)
        args.grad_output = grads.at(key(a.stage + 1, a.mb)).data();
      if (!e.hasEmbedding)
        args.grad_input = grads.emplace(k, std::vector<float>(activation))
                              .first->second.data();
      e.backwardInput(&args);
      if (!e.hasHead)
        grads.erase(key(a.stage + 1, a.mb));
    }
    if (a.kind == ActionEntry::B || a.kind == ActionEntry::W) {
      e.backwardWeight(&args);
      s.freeSlots.push_back(slotOf.at(k));
      slotOf.erase(k);
    }
  }
}

void Trainer::reduceTiedGradients() {
  for (auto &[name, where] : copies) {
    const StageState &first = stages[where[0].first];
    int64_t n = 0;
    for (const ParamEntry &p : first.entry->params)
      if (p.name == name)
        n = p.numel;
    std::vector<float> sum(n, 0.0f);
    for (auto [stage, offset] : where)
      for (int64_t i = 0; i < n; ++i)
        sum[i] += stages[stage].grads[offset + i];
    for (auto [stage, offset] : where)
      std::memcpy(stages[stage].grads.data() + offset, sum.data(),
                  sizeof(float) * n);
  }
}

double Trainer::gradNorm() const {
  // Each parameter once: a tied copy after its first is skipped.
  double sq = 0;
  for (size_t si = 0; si < stages.size(); ++si)
    for (const ParamEntry &p : stages[si].entry->params) {
      auto it = copies.find(p.name);
      if (it != copies.end() && it->second[0].first != si)
        continue;
      const float *g = stages[si].grads.data() + p.offset;
      for (int64_t i = 0; i < p.numel; ++i)
        sq += double(g[i]) * g[i];
    }
  return std::sqrt(sq);
}

void Trainer::optimizerStep(int64_t step, double lr, double clipScale) {
  const TrainingConfig &t = artifact.training;
  const double b1 = t.beta1, b2 = t.beta2;
  const double c1 = 1.0 - std::pow(b1, double(step)),
               c2 = 1.0 - std::pow(b2, double(step));
  for (StageState &s : stages)
    for (const ParamEntry &p : s.entry->params) {
      float decay = p.weightDecay ? float(1.0 - lr * t.weightDecay) : 1.0f;
      float *w = s.params.data() + p.offset, *g = s.grads.data() + p.offset;
      float *m = s.adamM.data() + p.offset, *v = s.adamV.data() + p.offset;
      for (int64_t i = 0; i < p.numel; ++i) {
        float gi = float(g[i] * clipScale);
        m[i] = float(b1 * m[i] + (1 - b1) * gi);
        v[i] = float(b2 * v[i] + (1 - b2) * double(gi) * gi);
        double update = (m[i] / c1) / (std::sqrt(v[i] / c2) + t.eps);
        w[i] = float(w[i] * decay - lr * update);
      }
    }
}

void Trainer::dump(const std::string &path, double loss, double aux) {
  SafeTensorsWriter w;
  for (StageState &s : stages)
    for (const ParamEntry &p : s.entry->params) {
      w.add("param." + p.name, p.shape, s.params.data() + p.offset);
      w.add("grad." + p.name, p.shape, s.grads.data() + p.offset);
    }
  const TrainingConfig &t = artifact.training;
  std::vector<int64_t> shape = {artifact.microbatches, t.microBatchSize,
                                t.seqLength};
  w.add("tokens", shape, tokens.data());
  w.add("labels", shape, labels.data());
  w.metadata("loss", fmt::format("{:.9g}", loss));
  w.metadata("aux_loss", fmt::format("{:.9g}", aux));
  w.write(path);
}

StepStats Trainer::step(int64_t step, const std::string &dumpPath) {
  auto start = std::chrono::steady_clock::now();
  for (StageState &s : stages)
    std::fill(s.grads.begin(), s.grads.end(), 0.0f);
  StepStats st;
  st.step = step;
  runProgram(step, st.loss, st.auxLoss);
  reduceTiedGradients();
  if (!dumpPath.empty())
    dump(dumpPath, st.loss, st.auxLoss);
  st.gradNorm = gradNorm();
  if (!std::isfinite(st.loss) || !std::isfinite(st.gradNorm))
    throw RuntimeError(fmt::format(
        "error: step {}: the loss is {} and the gradient norm {}; training "
        "diverged\nhelp: lower training.lr or raise warmup_steps",
        step, st.loss, st.gradNorm));
  const TrainingConfig &t = artifact.training;
  double clip = 1.0;
  if (t.gradClip > 0) {
    double coeff = t.gradClip / (st.gradNorm + 1e-6);
    if (coeff < 1.0)
      clip = coeff;
  }
  st.lr = learningRate(t, step);
  optimizerStep(step, st.lr, clip);
  st.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  double tokensPerStep =
      double(artifact.microbatches * t.microBatchSize * t.seqLength);
  st.tokensPerSecond = tokensPerStep / st.seconds;
  return st;
}

} // namespace hypipe::rt
