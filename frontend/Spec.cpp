//===- Spec.cpp - YAML spec loader ----------------------------------------===//
#include "frontend/Spec.h"
#include "core/schedule/CommKind.h"

#include "core/data/MockSft.h"
#include "core/data/Packing.h"
#include "core/data/Split.h"
#include "core/data/Tokenizer.h"
#include "core/io/Files.h"
#include "core/lang/PipelineLayout.h"
#include "core/model/SizeBounds.h"
#include "core/model/TensorParallel.h"
#include "core/schedule/Schedule.h"
#include "frontend/Diagnostic.h"
#include "frontend/SpecCosts.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/ConvertUTF.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/YAMLParser.h"
#include "llvm/Support/raw_ostream.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>
#include <variant>

namespace hypipe {

namespace {

namespace yaml = llvm::yaml;

/// One word of a list a spec gives as a YAML sequence or as one string of
/// words separated by spaces (Megatron's nargs='*' flags): where it is, for
/// an error about it. `node` is null for a word from the command line.
struct Word {
  std::string text;
  yaml::Node *node = nullptr;
  size_t offset = 0; ///< in the scalar `node`'s value
};

/// What the loader collects before the whole spec can be checked.
struct Draft {
  ModelSpec spec;
  std::string pattern;
  std::optional<int64_t> numLayers;
  std::optional<double> attentionRatio;
  std::optional<double> mlpRatio;
  std::optional<int64_t> vpp;
  std::optional<int64_t> microbatches;
  std::optional<int64_t> groupSize; ///< absent: pp, Megatron's default
  std::optional<int64_t> etp;       ///< absent: tp, Megatron's default
  /// model.q_lora_rank: absent or null is Megatron's None.
  std::optional<int64_t> qLoraRank;
  /// model.dsa_indexer_*: absent or null is Megatron's None.
  std::optional<int64_t> dsaIndexerNHeads, dsaIndexerHeadDim, dsaIndexerTopk;
  std::optional<double> dsaIndexerLossCoeff;
  /// The enum fields as written; checking parses each into the spec once.
  std::string schedule = "1f1b", comm = "auto", objective = "time",
              dtype = "fp32", target = "cpu", format = "text",
              lrDecayStyle = "cosine", lrWsdDecayStyle = "exponential",
              ropeType = "yarn", moeDispatcher = "allgather";
  /// training.recompute as written; checkRecompute parses it into the spec.
  std::string recomputeGranularity = "none", recomputeMethod;
  std::optional<int64_t> recomputeNumLayers;
  std::vector<Word> recomputeModules;
};

struct Section;

/// A field's slot in the draft, or the mapping it nests (a section of its
/// own, e.g. training.recompute).
using FieldRef =
    std::variant<int64_t &(*)(Draft &), std::optional<int64_t> &(*)(Draft &),
                 double &(*)(Draft &), std::optional<double> &(*)(Draft &),
                 bool &(*)(Draft &), std::string &(*)(Draft &),
                 std::vector<Word> &(*)(Draft &), const Section *>;

struct Field {
  llvm::StringLiteral name;
  FieldRef ref;
  /// An optional value that `null` unsets (Megatron's None), as leaving
  /// the key out does; every other key refuses `null`.
  bool nullable = false;
};

/// The keys of a mapping: a section of the spec, or a mapping nested in one
/// (named "section.key").
struct Section {
  llvm::StringLiteral name;
  const std::vector<Field> &(*fields)();
};

#define HYPIPE_FIELD(key, member)                                              \
  Field {                                                                      \
    key, +[](Draft &d) -> decltype(auto) { return (member); }                  \
  }
#define HYPIPE_NULLABLE_FIELD(key, member)                                     \
  Field {                                                                      \
    key, +[](Draft &d) -> decltype(auto) { return (member); }, true            \
  }

const std::vector<Field> &modelFields() {
  static const std::vector<Field> fields = {
      HYPIPE_FIELD("name", d.spec.name),
      HYPIPE_FIELD("pattern", d.pattern),
      HYPIPE_FIELD("num_layers", d.numLayers),
      HYPIPE_FIELD("attention_ratio", d.attentionRatio),
      HYPIPE_FIELD("mlp_ratio", d.mlpRatio),
      HYPIPE_FIELD("hidden_size", d.spec.dims.hidden),
      HYPIPE_FIELD("ffn_hidden_size", d.spec.dims.ffnHidden),
      HYPIPE_FIELD("num_attention_heads", d.spec.dims.numHeads),
      HYPIPE_FIELD("num_query_groups", d.spec.dims.numQueryGroups),
      HYPIPE_FIELD("mamba_state_dim", d.spec.dims.mambaState),
      HYPIPE_FIELD("mamba_num_heads", d.spec.dims.mambaNumHeads),
      HYPIPE_FIELD("mamba_head_dim", d.spec.dims.mambaHeadDim),
      HYPIPE_FIELD("mamba_num_groups", d.spec.dims.mambaNumGroups),
      HYPIPE_FIELD("mamba_conv_width", d.spec.dims.mambaConvWidth),
      HYPIPE_FIELD("linear_num_key_heads", d.spec.dims.gdnNumKeyHeads),
      HYPIPE_FIELD("linear_num_value_heads", d.spec.dims.gdnNumValueHeads),
      HYPIPE_FIELD("linear_key_head_dim", d.spec.dims.gdnKeyHeadDim),
      HYPIPE_FIELD("linear_value_head_dim", d.spec.dims.gdnValueHeadDim),
      HYPIPE_FIELD("linear_conv_kernel_dim", d.spec.dims.gdnConvWidth),
      HYPIPE_FIELD("num_experts", d.spec.dims.numExperts),
      HYPIPE_FIELD("moe_router_topk", d.spec.dims.moeTopK),
      HYPIPE_FIELD("moe_ffn_hidden_size", d.spec.dims.moeFfnHidden),
      HYPIPE_FIELD("moe_aux_loss_coeff", d.spec.moeAuxLossCoeff),
      HYPIPE_FIELD("moe_token_dispatcher_type", d.moeDispatcher),
      HYPIPE_NULLABLE_FIELD("moe_expert_capacity_factor",
                            d.spec.moeExpertCapacityFactor),
      HYPIPE_FIELD("moe_token_drop_policy", d.spec.moeTokenDropPolicy),
      HYPIPE_FIELD("moe_pad_expert_input_to_capacity",
                   d.spec.moePadExpertInputToCapacity),
      HYPIPE_FIELD("mtp_loss_scaling_factor", d.spec.mtpLossScalingFactor),
      HYPIPE_FIELD("cross_entropy_fusion_impl", d.spec.crossEntropyFusionImpl),
      HYPIPE_NULLABLE_FIELD("cross_entropy_chunk_tokens",
                            d.spec.crossEntropyChunkTokens),
      HYPIPE_FIELD("vocab_size", d.spec.dims.vocab),
      HYPIPE_FIELD("make_vocab_size_divisible_by", d.spec.vocabDivisor),
      HYPIPE_FIELD("tie_embeddings", d.spec.dims.tieEmbeddings),
      HYPIPE_FIELD("activation", d.spec.dims.activation),
      HYPIPE_FIELD("position_embedding", d.spec.positionEmbedding),
      HYPIPE_NULLABLE_FIELD("q_lora_rank", d.qLoraRank),
      HYPIPE_FIELD("kv_lora_rank", d.spec.dims.kvLoraRank),
      HYPIPE_FIELD("qk_head_dim", d.spec.dims.qkHeadDim),
      HYPIPE_FIELD("qk_pos_emb_head_dim", d.spec.dims.qkPosEmbHeadDim),
      HYPIPE_FIELD("v_head_dim", d.spec.dims.vHeadDim),
      HYPIPE_FIELD("qk_layernorm", d.spec.dims.qkLayernorm),
      HYPIPE_FIELD("rope_type", d.ropeType),
      HYPIPE_FIELD("rotary_scaling_factor", d.spec.mlaRope.rotaryScalingFactor),
      HYPIPE_FIELD("mscale", d.spec.mlaRope.mscale),
      HYPIPE_FIELD("mscale_all_dim", d.spec.mlaRope.mscaleAllDim),
      HYPIPE_NULLABLE_FIELD("dsa_indexer_n_heads", d.dsaIndexerNHeads),
      HYPIPE_NULLABLE_FIELD("dsa_indexer_head_dim", d.dsaIndexerHeadDim),
      HYPIPE_NULLABLE_FIELD("dsa_indexer_topk", d.dsaIndexerTopk),
      HYPIPE_NULLABLE_FIELD("dsa_indexer_loss_coeff", d.dsaIndexerLossCoeff),
      HYPIPE_FIELD("dsa_indexer_use_sparse_loss",
                   d.spec.dsaIndexerUseSparseLoss),
  };
  return fields;
}

const std::vector<Field> &parallelFields() {
  static const std::vector<Field> fields = {
      HYPIPE_FIELD("pp", d.spec.parallel.pp),
      HYPIPE_FIELD("vpp", d.vpp),
      HYPIPE_FIELD("dp", d.spec.parallel.dp),
      HYPIPE_FIELD("tp", d.spec.parallel.tp),
      HYPIPE_FIELD("sequence_parallel", d.spec.parallel.sequenceParallel),
      HYPIPE_FIELD("ep", d.spec.parallel.ep),
      HYPIPE_FIELD("etp", d.etp),
      HYPIPE_FIELD("schedule", d.schedule),
      HYPIPE_FIELD("microbatches", d.microbatches),
      HYPIPE_FIELD("microbatch_group_size_per_vp_stage", d.groupSize),
      HYPIPE_FIELD("first_stage_layers", d.spec.parallel.firstStageLayers),
      HYPIPE_FIELD("last_stage_layers", d.spec.parallel.lastStageLayers),
      HYPIPE_FIELD("layout", d.spec.parallel.layout),
      HYPIPE_FIELD("objective", d.objective),
      HYPIPE_FIELD("max_memory_gib", d.spec.parallel.maxMemoryGiB),
      HYPIPE_FIELD("distributed_optimizer",
                   d.spec.parallel.distributedOptimizer),
      HYPIPE_FIELD("comm", d.comm),
      HYPIPE_FIELD("schedule_csv", d.spec.parallel.scheduleCsv),
  };
  return fields;
}

const std::vector<Field> &recomputeFields() {
  static const std::vector<Field> fields = {
      HYPIPE_FIELD("granularity", d.recomputeGranularity),
      HYPIPE_FIELD("method", d.recomputeMethod),
      HYPIPE_FIELD("num_layers", d.recomputeNumLayers),
      HYPIPE_FIELD("modules", d.recomputeModules),
  };
  return fields;
}

const Section kRecomputeSection = {"training.recompute", recomputeFields};

const std::vector<Field> &trainingFields() {
  static const std::vector<Field> fields = {
      HYPIPE_FIELD("seq_length", d.spec.training.seqLength),
      HYPIPE_FIELD("micro_batch_size", d.spec.training.microBatchSize),
      HYPIPE_FIELD("steps", d.spec.training.steps),
      HYPIPE_FIELD("seed", d.spec.training.seed),
      HYPIPE_FIELD("lr", d.spec.training.lr),
      HYPIPE_FIELD("min_lr", d.spec.training.minLr),
      HYPIPE_FIELD("warmup_steps", d.spec.training.warmupSteps),
      HYPIPE_FIELD("weight_decay", d.spec.training.weightDecay),
      HYPIPE_FIELD("grad_clip", d.spec.training.gradClip),
      HYPIPE_FIELD("lr_decay_steps", d.spec.training.lrDecaySteps),
      HYPIPE_FIELD("lr_decay_style", d.lrDecayStyle),
      HYPIPE_FIELD("lr_warmup_fraction", d.spec.training.lrWarmupFraction),
      HYPIPE_FIELD("lr_wsd_decay_iters", d.spec.training.lrWsdDecaySteps),
      HYPIPE_FIELD("lr_wsd_decay_style", d.lrWsdDecayStyle),
      HYPIPE_FIELD("adam_beta1", d.spec.training.adamBeta1),
      HYPIPE_FIELD("adam_beta2", d.spec.training.adamBeta2),
      HYPIPE_FIELD("adam_eps", d.spec.training.adamEps),
      HYPIPE_FIELD("calculate_per_token_loss",
                   d.spec.training.calculatePerTokenLoss),
      HYPIPE_FIELD("init_from", d.spec.training.initFrom),
      HYPIPE_FIELD("tensorboard_dir", d.spec.training.tensorboardDir),
      HYPIPE_FIELD("dtype", d.dtype),
      HYPIPE_FIELD("target", d.target),
      Field{"recompute", &kRecomputeSection},
  };
  return fields;
}

const std::vector<Field> &dataFields() {
  static const std::vector<Field> fields = {
      HYPIPE_FIELD("path", d.spec.data.path),
      HYPIPE_FIELD("format", d.format),
      HYPIPE_FIELD("tokenizer", d.spec.data.tokenizer),
      HYPIPE_FIELD("packing", d.spec.data.packing),
      HYPIPE_FIELD("max_tokens_per_microbatch",
                   d.spec.data.maxTokensPerMicrobatch),
      HYPIPE_FIELD("scheduler", d.spec.data.scheduler),
      HYPIPE_FIELD("global_batch_size", d.spec.data.globalBatchSize),
      HYPIPE_FIELD("min_bin_count", d.spec.data.minBinCount),
      HYPIPE_FIELD("bin_count_multiple", d.spec.data.binCountMultiple),
      HYPIPE_FIELD("truncate", d.spec.data.truncate),
      HYPIPE_FIELD("mock", d.spec.data.mock),
      HYPIPE_FIELD("split", d.spec.data.split),
  };
  return fields;
}

#undef HYPIPE_FIELD

const Section kSections[] = {{"model", modelFields},
                             {"parallel", parallelFields},
                             {"training", trainingFields},
                             {"data", dataFields}};

/// The key a section, or a mapping nested in one, is written under:
/// "recompute" of "training.recompute".
llvm::StringRef lastKey(llvm::StringRef name) {
  return name.substr(name.rfind('.') + 1);
}

/// The section, or else the nested mapping, that has a key `key`, if one
/// has (model.num_layers before training.recompute.num_layers).
std::optional<std::string> sectionWithKey(llvm::StringRef key) {
  std::vector<const Section *> sections;
  for (const Section &s : kSections)
    sections.push_back(&s);
  for (size_t i = 0; i < sections.size(); ++i)
    for (const Field &f : sections[i]->fields()) {
      if (f.name == key)
        return sections[i]->name.str();
      if (auto *nested = std::get_if<const Section *>(&f.ref))
        sections.push_back(*nested);
    }
  return std::nullopt;
}

/// The closest of `candidates` to `word`, if close enough to suggest.
std::optional<std::string> closest(llvm::StringRef word,
                                   llvm::ArrayRef<llvm::StringRef> candidates) {
  std::optional<std::string> best;
  unsigned bestDistance = std::max<unsigned>(2, word.size() / 3) + 1;
  for (llvm::StringRef c : candidates) {
    unsigned d =
        word.edit_distance(c, /*AllowReplacements=*/true, bestDistance);
    if (d < bestDistance) {
      bestDistance = d;
      best = c.str();
    }
  }
  return best;
}

/// "a, b or c".
std::string orList(llvm::ArrayRef<std::string> words) {
  std::string out;
  for (size_t i = 0; i < words.size(); ++i)
    out += (i == 0 ? "" : i + 1 == words.size() ? " or " : ", ") + words[i];
  return out;
}

/// The help for `value`, which is none of the names of `kinds`: the
/// closest, or else them all.
template <class Kinds, class Name>
std::string spellingHelp(llvm::StringRef value, const Kinds &kinds, Name name) {
  std::vector<std::string> names;
  for (auto kind : kinds)
    names.push_back(name(kind));
  llvm::SmallVector<llvm::StringRef> candidates(names.begin(), names.end());
  if (std::optional<std::string> guess = closest(value, candidates))
    return fmt::format("did you mean '{}'?", *guess);
  return fmt::format("use {}", orList(names));
}

class Loader {
public:
  Loader(std::unique_ptr<llvm::MemoryBuffer> buffer,
         SpecOverrides overrides = {})
      : overrides(std::move(overrides)) {
    text = buffer->getBuffer();
    file = buffer->getBufferIdentifier().str();
    sm.AddNewSourceBuffer(std::move(buffer), llvm::SMLoc());
    sm.setDiagHandler(
        [](const llvm::SMDiagnostic &d, void *ctx) {
          auto *self = static_cast<Loader *>(ctx);
          if (!self->yamlError.empty())
            return;
          llvm::raw_string_ostream os(self->yamlError);
          d.print(nullptr, os, /*ShowColors=*/false);
          os << "help: this is a YAML syntax error; patterns that start with "
                "'*', '|' or "
                "'-' must be quoted, e.g. pattern: \"*M-M\"\n";
        },
        this);
  }

  llvm::Expected<ModelSpec> load();

private:
  llvm::Error error(llvm::SMLoc loc, size_t length, llvm::StringRef message,
                    llvm::StringRef help) {
    std::string out;
    llvm::raw_string_ostream os(out);
    printError(os, sm, loc, length, message, help);
    return llvm::createStringError(llvm::inconvertibleErrorCode(), os.str());
  }
  llvm::Error error(yaml::Node *node, llvm::StringRef message,
                    llvm::StringRef help) {
    if (!node && !overriddenFlag.empty()) // a value given in place of one
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          fmt::format("error: {} ({})\nhelp: {}\n", message.str(),
                      overrides.givenBy.empty()
                          ? fmt::format("given as {} on the command line",
                                        overriddenFlag)
                          : fmt::format("{} as {} sets it", overriddenKey,
                                        overrides.givenBy),
                      help.str()));
    llvm::SMRange range = node ? node->getSourceRange() : llvm::SMRange();
    // Nodes the parser gave up on have no source range.
    if (!range.Start.isValid())
      return error(llvm::SMLoc::getFromPointer(text.data()), 1, message, help);
    if (!range.End.isValid())
      range.End = range.Start;
    size_t length = range.End.getPointer() > range.Start.getPointer()
                        ? range.End.getPointer() - range.Start.getPointer()
                        : 1;
    // Underline within one line only.
    llvm::StringRef rest(range.Start.getPointer(), length);
    length = std::max<size_t>(
        rest.take_until([](char c) { return c == '\n'; }).size(), 1);
    return error(range.Start, length, message, help);
  }
  llvm::Error yamlFailure() {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), yamlError);
  }
  /// The YAML parser's own error if it reported one, else one at `near`.
  llvm::Error brokenYaml(yaml::Node *near) {
    if (!yamlError.empty())
      return yamlFailure();
    return error(near, "this entry is not valid YAML",
                 "write `key: value`, one entry per line");
  }

  llvm::Error readSection(const Section &section, yaml::Node *value);
  /// Text fields: bounded, UTF-8, one line of printable characters (the
  /// mock JSON may span lines); model.name a file-like name.
  llvm::Error checkText(const Section &section, const Field &field,
                        yaml::Node *value, llvm::StringRef v);
  /// A field's value: a scalar, a list of words, or a nested mapping;
  /// `key` its key (an empty value's error points there: the parser puts
  /// an empty value where the next token starts).
  llvm::Error readField(const Section &section, const Field &field,
                        yaml::Node *key, yaml::Node *value);
  /// A YAML sequence of names, or one string of names separated by spaces.
  llvm::Error readWords(const Section &section, const Field &field,
                        yaml::Node *value, std::vector<Word> &words);
  /// Checks the draft section by section, filling in what follows from it.
  llvm::Error check();
  llvm::Error checkSizes();
  llvm::Error checkPattern();
  llvm::Error checkPatternLayers();
  llvm::Error checkModel();
  llvm::Error checkMlaRope();
  llvm::Error checkDsaLoss();
  llvm::Error checkParallel();
  llvm::Error checkTraining();
  llvm::Error checkLrSchedule();
  llvm::Error checkAdam();
  llvm::Error checkTensorParallel();
  /// An error about a part of the model that cannot split over tp ranks
  /// (TensorParallelRefusal): at the width tp does not divide, or at the
  /// pattern's layer or MTP parts.
  llvm::Error tensorParallelError(char part, const std::string &why);
  llvm::Error checkSequenceParallel();
  llvm::Error checkExpertParallel();
  /// Sets ModelSpec::unplannable (never an error: only plan refuses).
  llvm::Error notePlannable();
  llvm::Error checkMoeCapacity();
  llvm::Error checkCrossEntropyFusion();
  llvm::Error padVocabulary();
  llvm::Error checkMoeNeedsSequenceParallel();
  llvm::Error checkRecompute();
  llvm::Error checkRecomputeModules();
  llvm::Error checkSplit();
  /// An error about one word of training.recompute.modules.
  llvm::Error moduleError(const Word &word, llvm::StringRef message,
                          llvm::StringRef help);
  /// Whether the file or the command line gives "section.key".
  bool given(llvm::StringRef key) const {
    return valueNodes.count(key.str()) || overridden.count(key.str());
  }
  llvm::Error checkScheduleCsv();
  llvm::Error checkTokenizer();
  /// The path a "section.key" field names, made absolute: a flag's against
  /// the working directory, the spec's against the spec's directory.
  std::string resolvePath(llvm::StringRef key, llvm::StringRef value) const;
  llvm::Error checkGroupSize();
  llvm::Error placeByLayout();
  llvm::Error checkPacking();
  llvm::Error checkPartition();
  llvm::Error checkMemory();
  /// The node of a "section.key" field (nodeFor's).
  yaml::Node *nodeForField(llvm::StringRef field) {
    auto [section, key] = field.split('.');
    return nodeFor(section, key);
  }
  /// The pattern's value node, if the spec gives one.
  yaml::Node *patternNode = nullptr;

  /// The text of the scalar `node` in the file, without quotes, if it maps
  /// one to one onto the scalar's value (no escapes); else nullopt.
  std::optional<llvm::StringRef> verbatimScalar(yaml::Node *node);
  /// Location of byte `offset` of the value of the scalar `node`, if the
  /// scalar's text maps one to one onto its value; else its start.
  llvm::SMLoc locInScalar(yaml::Node *node, size_t offset);
  /// Renders a SourceError whose offsets are into the scalar `node`.
  llvm::Error scalarError(yaml::Node *node, Error err);
  /// The value node of `section.key`, or the section's key node, or the
  /// start of the file.
  yaml::Node *nodeFor(llvm::StringRef section, llvm::StringRef key);

  llvm::SourceMgr sm;
  llvm::StringRef text;
  std::string file;
  std::string yamlError;
  Draft draft;
  SpecOverrides overrides;

  /// Command-line values win over the file's; the checks that follow treat
  /// them as if the file said so.
  llvm::Error applyOverrides() {
    ParallelSpec &par = draft.spec.parallel;
    TrainingSpec &tr = draft.spec.training;
    // The flag each command-line value came by: an error about one names it.
    const std::tuple<const char *, const char *, bool> given[] = {
        {"parallel.pp", "--pp", bool(overrides.pp)},
        {"parallel.vpp", "--vpp", bool(overrides.vpp)},
        {"parallel.dp", "--dp", bool(overrides.dp)},
        {"parallel.tp", "--tensor-model-parallel-size", bool(overrides.tp)},
        {"parallel.sequence_parallel", "--sequence-parallel",
         bool(overrides.sequenceParallel)},
        {"parallel.ep", "--expert-model-parallel-size", bool(overrides.ep)},
        {"parallel.etp", "--expert-tensor-parallel-size", bool(overrides.etp)},
        {"model.moe_token_dispatcher_type", "--moe-token-dispatcher-type",
         bool(overrides.moeTokenDispatcher)},
        {"model.moe_expert_capacity_factor", "--moe-expert-capacity-factor",
         bool(overrides.moeExpertCapacityFactor)},
        {"model.moe_token_drop_policy", "--moe-token-drop-policy",
         bool(overrides.moeTokenDropPolicy)},
        {"model.moe_pad_expert_input_to_capacity",
         "--moe-pad-expert-input-to-capacity",
         bool(overrides.moePadExpertInputToCapacity)},
        {"model.cross_entropy_fusion_impl", "--cross-entropy-fusion-impl",
         bool(overrides.crossEntropyFusionImpl)},
        {"model.cross_entropy_chunk_tokens", "--cross-entropy-chunk-tokens",
         bool(overrides.crossEntropyChunkTokens)},
        {"parallel.schedule", "--schedule", bool(overrides.schedule)},
        {"parallel.microbatches",
         overrides.globalBatchSize && !draft.spec.data.packing
             ? "--global-batch-size"
             : "--microbatches",
         bool(overrides.microbatches ||
              (overrides.globalBatchSize && !draft.spec.data.packing))},
        {"data.global_batch_size", "--global-batch-size",
         bool(overrides.globalBatchSize && draft.spec.data.packing)},
        {"training.micro_batch_size", "--micro-batch-size",
         bool(overrides.microBatchSize)},
        {"training.steps", "--steps", bool(overrides.steps)},
        {"training.seed", "--seed", bool(overrides.seed)},
        {"training.target", "--target", bool(overrides.target)},
        {"training.dtype", "--dtype", bool(overrides.dtype)},
        {"training.lr", "--lr", bool(overrides.lr)},
        {"training.min_lr", "--min-lr", bool(overrides.minLr)},
        {"training.lr_decay_style", "--lr-decay-style",
         bool(overrides.lrDecayStyle)},
        {"training.warmup_steps", "--lr-warmup-iters",
         bool(overrides.lrWarmupIters)},
        {"training.lr_warmup_fraction", "--lr-warmup-fraction",
         bool(overrides.lrWarmupFraction)},
        {"training.lr_wsd_decay_iters", "--lr-wsd-decay-iters",
         bool(overrides.lrWsdDecayIters)},
        {"training.lr_wsd_decay_style", "--lr-wsd-decay-style",
         bool(overrides.lrWsdDecayStyle)},
        {"training.weight_decay", "--weight-decay",
         bool(overrides.weightDecay)},
        {"training.grad_clip", "--clip-grad", bool(overrides.clipGrad)},
        {"training.adam_beta1", "--adam-beta1", bool(overrides.adamBeta1)},
        {"training.adam_beta2", "--adam-beta2", bool(overrides.adamBeta2)},
        {"training.adam_eps", "--adam-eps", bool(overrides.adamEps)},
        {"parallel.distributed_optimizer", "--distributed-optimizer",
         bool(overrides.distributedOptimizer)},
        {"parallel.schedule_csv", "--schedule-csv",
         bool(overrides.scheduleCsv)},
        {"training.recompute.granularity", "--recompute-granularity",
         bool(overrides.recomputeGranularity)},
        {"training.recompute.method", "--recompute-method",
         bool(overrides.recomputeMethod)},
        {"training.recompute.num_layers", "--recompute-num-layers",
         bool(overrides.recomputeNumLayers)},
        {"training.recompute.modules", "--recompute-modules",
         bool(overrides.recomputeModules)},
        {"data.split", "--split", bool(overrides.split)},
        {"model.make_vocab_size_divisible_by", "--make-vocab-size-divisible-by",
         bool(overrides.makeVocabSizeDivisibleBy)}};
    for (auto [key, flag, isGiven] : given)
      if (isGiven)
        overridden[key] = flag;
    if (overrides.pp)
      par.pp = *overrides.pp;
    if (overrides.vpp)
      draft.vpp = *overrides.vpp;
    if (overrides.dp)
      par.dp = *overrides.dp;
    if (overrides.tp)
      par.tp = *overrides.tp;
    if (overrides.makeVocabSizeDivisibleBy)
      draft.spec.vocabDivisor = *overrides.makeVocabSizeDivisibleBy;
    if (overrides.sequenceParallel)
      par.sequenceParallel = *overrides.sequenceParallel;
    if (overrides.ep)
      par.ep = *overrides.ep;
    if (overrides.etp)
      draft.etp = *overrides.etp;
    if (overrides.moeTokenDispatcher)
      draft.moeDispatcher = *overrides.moeTokenDispatcher;
    if (overrides.moeExpertCapacityFactor)
      draft.spec.moeExpertCapacityFactor = *overrides.moeExpertCapacityFactor;
    if (overrides.moeTokenDropPolicy)
      draft.spec.moeTokenDropPolicy = *overrides.moeTokenDropPolicy;
    if (overrides.moePadExpertInputToCapacity)
      draft.spec.moePadExpertInputToCapacity =
          *overrides.moePadExpertInputToCapacity;
    if (overrides.crossEntropyFusionImpl)
      draft.spec.crossEntropyFusionImpl = *overrides.crossEntropyFusionImpl;
    if (overrides.crossEntropyChunkTokens)
      draft.spec.crossEntropyChunkTokens = *overrides.crossEntropyChunkTokens;
    if (overrides.schedule)
      draft.schedule = *overrides.schedule;
    if (overrides.microbatches)
      draft.microbatches = *overrides.microbatches;
    if (overrides.microBatchSize)
      tr.microBatchSize = *overrides.microBatchSize;
    if (overrides.steps)
      tr.steps = *overrides.steps;
    if (overrides.seed)
      tr.seed = *overrides.seed;
    if (overrides.target)
      draft.target = *overrides.target;
    if (overrides.dtype)
      draft.dtype = *overrides.dtype;
    if (overrides.distributedOptimizer)
      par.distributedOptimizer = *overrides.distributedOptimizer;
    if (overrides.scheduleCsv)
      par.scheduleCsv = *overrides.scheduleCsv;
    if (overrides.split)
      draft.spec.data.split = *overrides.split;
    if (overrides.lr)
      tr.lr = *overrides.lr;
    if (overrides.minLr)
      tr.minLr = *overrides.minLr;
    if (overrides.lrDecayStyle)
      draft.lrDecayStyle = *overrides.lrDecayStyle;
    if (overrides.lrWarmupIters)
      tr.warmupSteps = *overrides.lrWarmupIters;
    if (overrides.lrWarmupFraction)
      tr.lrWarmupFraction = *overrides.lrWarmupFraction;
    if (overrides.lrWsdDecayIters)
      tr.lrWsdDecaySteps = *overrides.lrWsdDecayIters;
    if (overrides.lrWsdDecayStyle)
      draft.lrWsdDecayStyle = *overrides.lrWsdDecayStyle;
    if (overrides.weightDecay)
      tr.weightDecay = *overrides.weightDecay;
    if (overrides.clipGrad)
      tr.gradClip = *overrides.clipGrad;
    if (overrides.adamBeta1)
      tr.adamBeta1 = *overrides.adamBeta1;
    if (overrides.adamBeta2)
      tr.adamBeta2 = *overrides.adamBeta2;
    if (overrides.adamEps)
      tr.adamEps = *overrides.adamEps;
    if (overrides.recomputeGranularity)
      draft.recomputeGranularity = *overrides.recomputeGranularity;
    if (overrides.recomputeMethod)
      draft.recomputeMethod = *overrides.recomputeMethod;
    if (overrides.recomputeNumLayers)
      draft.recomputeNumLayers = *overrides.recomputeNumLayers;
    if (overrides.recomputeModules) {
      draft.recomputeModules.clear();
      for (const std::string &name : *overrides.recomputeModules)
        draft.recomputeModules.push_back({name});
    }
    return applyGlobalBatchSize();
  }
  /// --global-batch-size as Megatron-LM reads it: micro_batch_size x dp x
  /// the microbatches per step; packed, the samples a step packs
  /// (data.global_batch_size, checked with the packing keys).
  llvm::Error applyGlobalBatchSize() {
    if (!overrides.globalBatchSize)
      return llvm::Error::success();
    const int64_t global = *overrides.globalBatchSize;
    if (draft.spec.data.packing) {
      draft.spec.data.globalBatchSize = global;
      return llvm::Error::success();
    }
    const int64_t mbs = draft.spec.training.microBatchSize;
    const int64_t dp = draft.spec.parallel.dp;
    auto fail = [](std::string message, std::string help) {
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          fmt::format("error: {}\nhelp: {}\n", message, help));
    };
    if (overrides.microbatches)
      return fail("--global-batch-size and --microbatches both set the "
                  "microbatches per step",
                  "give one: the global batch is micro_batch_size x dp x "
                  "microbatches");
    if (mbs < 1 || dp < 1 || global < mbs * dp || global % (mbs * dp) != 0)
      return fail(fmt::format("--global-batch-size {} is not a whole number of "
                              "micro_batch_size ({}) x dp ({}) = {} samples",
                              global, mbs, dp, mbs * dp),
                  fmt::format("give a multiple of {}: each step runs the "
                              "global batch over that many microbatches, as "
                              "Megatron-LM does",
                              mbs * dp));
    draft.microbatches = global / (mbs * dp);
    return llvm::Error::success();
  }
  /// "section.key" of the values the command line gave: an error about one
  /// names its flag, not the spec's line.
  std::map<std::string, std::string> overridden; // "section.key" -> flag
  /// Set by nodeFor for the error that follows: the flag and "section.key".
  std::string overriddenFlag, overriddenKey;
  std::map<std::string, yaml::Node *> valueNodes;   // "section.key" -> value
  std::map<std::string, yaml::Node *> sectionNodes; // "section" -> key node
  yaml::Node *rootNode = nullptr;
};

std::optional<llvm::StringRef> Loader::verbatimScalar(yaml::Node *node) {
  auto *scalar = llvm::dyn_cast_or_null<yaml::ScalarNode>(node);
  if (!scalar || !node->getSourceRange().Start.isValid())
    return std::nullopt;
  llvm::StringRef raw = scalar->getRawValue();
  llvm::StringRef inner = raw;
  if (raw.size() >= 2 && (raw.front() == '"' || raw.front() == '\''))
    inner = raw.drop_front().drop_back();
  llvm::SmallString<64> storage;
  if (scalar->getValue(storage) != inner)
    return std::nullopt;
  return inner;
}

llvm::SMLoc Loader::locInScalar(yaml::Node *node, size_t offset) {
  if (std::optional<llvm::StringRef> inner = verbatimScalar(node))
    return llvm::SMLoc::getFromPointer(inner->data() +
                                       std::min(offset, inner->size()));
  if (auto *scalar = llvm::dyn_cast_or_null<yaml::ScalarNode>(node);
      scalar && node->getSourceRange().Start.isValid())
    return llvm::SMLoc::getFromPointer(scalar->getRawValue().data());
  return node && node->getSourceRange().Start.isValid()
             ? node->getSourceRange().Start
             : llvm::SMLoc::getFromPointer(text.data());
}

llvm::Error Loader::scalarError(yaml::Node *node, Error err) {
  const Problem &e = err.problem();
  if (!e.offset)
    return toLlvmError(std::move(err));
  size_t length = e.length;
  if (auto *scalar = llvm::dyn_cast_or_null<yaml::ScalarNode>(node)) {
    llvm::SmallString<64> storage;
    size_t size = scalar->getValue(storage).size();
    length = std::max<size_t>(
        std::min(length, size > *e.offset ? size - *e.offset : 1), 1);
  }
  return error(locInScalar(node, *e.offset), length, e.message, e.help);
}

yaml::Node *Loader::nodeFor(llvm::StringRef section, llvm::StringRef key) {
  if (auto it = overridden.find((section + "." + key).str());
      it != overridden.end()) {
    overriddenFlag = it->second;
    overriddenKey = it->first;
    return nullptr;
  }
  auto it = valueNodes.find((section + "." + key).str());
  if (it != valueNodes.end())
    return it->second;
  auto sec = sectionNodes.find(section.str());
  if (sec != sectionNodes.end())
    return sec->second;
  return rootNode;
}

/// Where `text` (valid UTF-8) holds a character that is not printable
/// though its bytes are not ASCII controls: a C1 control (U+0080-U+009F) or
/// a bidirectional formatting character (U+061C, U+200E-U+200F,
/// U+202A-U+202E, U+2066-U+2069), which makes a path read as another.
std::optional<size_t> invisibleControl(llvm::StringRef text) {
  for (size_t i = 0; i + 1 < text.size(); ++i) {
    const auto b0 = static_cast<unsigned char>(text[i]);
    const auto b1 = static_cast<unsigned char>(text[i + 1]);
    if ((b0 == 0xC2 && b1 >= 0x80 && b1 <= 0x9F) || (b0 == 0xD8 && b1 == 0x9C))
      return i;
    if (b0 != 0xE2 || i + 2 >= text.size())
      continue;
    const auto b2 = static_cast<unsigned char>(text[i + 2]);
    if ((b1 == 0x80 &&
         (b2 == 0x8E || b2 == 0x8F || (b2 >= 0xAA && b2 <= 0xAE))) ||
        (b1 == 0x81 && b2 >= 0xA6 && b2 <= 0xA9))
      return i;
  }
  return std::nullopt;
}

llvm::Error Loader::checkText(const Section &section, const Field &field,
                              yaml::Node *value, llvm::StringRef v) {
  std::string where =
      fmt::format("{}.{}", section.name.str(), field.name.str());
  // The mock dataset's JSON may span lines; it is parsed, never emitted.
  // Patterns and layouts are data their parsers bound themselves (a
  // 10,000-layer pattern is 11 KB): 1 MiB, like the mock dataset's.
  const bool multiline = where == "data.mock";
  const bool language = where == "model.pattern" || where == "parallel.layout";
  const size_t limit = multiline || language ? size_t(1) << 20 : 4096;
  if (v.size() > limit)
    return error(value,
                 fmt::format("{} is {} bytes long; at most {} are accepted",
                             where, v.size(), limit),
                 "shorten it");
  const auto *begin = reinterpret_cast<const llvm::UTF8 *>(v.data());
  const llvm::UTF8 *cursor = begin;
  if (!llvm::isLegalUTF8String(&cursor, begin + v.size()))
    return error(
        locInScalar(value, size_t(cursor - begin)), 1,
        fmt::format("{} is not valid UTF-8 (byte {})", where, cursor - begin),
        "save the spec as UTF-8");
  for (size_t i = 0; i < v.size(); ++i) {
    unsigned char c = v[i];
    bool allowed = c >= 0x20 && c != 0x7f;
    if (multiline)
      allowed |= c == '\n' || c == '\r' || c == '\t';
    if (!allowed)
      return error(locInScalar(value, i), 1,
                   fmt::format("{} contains the control character {:#04x} "
                               "at byte {}",
                               where, c, i),
                   "names, paths and other text in a spec are one line of "
                   "printable characters; remove it");
  }
  if (std::optional<size_t> at = invisibleControl(v))
    return error(locInScalar(value, *at), 1,
                 fmt::format("{} contains an invisible control character "
                             "(a C1 control or a bidirectional override, "
                             "which reorders how a terminal shows it) at "
                             "byte {}",
                             where, *at),
                 "names, paths and other text in a spec are one line of "
                 "printable characters; remove it");
  if (where == "model.name") {
    // The name becomes a directory (runs/<name>), a symbol and a comment.
    auto ok = [](char c) {
      return llvm::isAlnum(c) || c == '_' || c == '-' || c == '.';
    };
    for (size_t i = 0; i < v.size(); ++i)
      if (!ok(v[i]) || (i == 0 && (v[i] == '.' || v[i] == '-')))
        return error(
            locInScalar(value, i), 1,
            fmt::format("model.name may hold letters, digits, '_', "
                        "'-' and '.' (not first), got {} at byte {}",
                        (unsigned char)v[i] < 0x80
                            ? fmt::format("'{}'", v[i])
                            : fmt::format("{:#04x}", (unsigned char)v[i]),
                        i),
            "name the model like a file, e.g. hybrid-tiny");
    if (v.empty() || v.size() > 128)
      return error(value, "model.name must be 1 to 128 characters long",
                   "name the model like a file, e.g. hybrid-tiny");
  }
  return llvm::Error::success();
}

/// YAML's null: an empty value, `~` or `null` (the core schema's spellings).
bool isYamlNull(yaml::Node *value) {
  if (llvm::isa<yaml::NullNode>(value))
    return true;
  auto *scalar = llvm::dyn_cast<yaml::ScalarNode>(value);
  if (!scalar)
    return false;
  llvm::SmallString<8> storage;
  llvm::StringRef v = scalar->getValue(storage);
  return v == "~" || v == "null" || v == "Null" || v == "NULL";
}

llvm::Error Loader::readField(const Section &section, const Field &field,
                              yaml::Node *key, yaml::Node *value) {
  if (auto *nested = std::get_if<const Section *>(&field.ref))
    return readSection(**nested, value);
  std::string where =
      fmt::format("{}.{}", section.name.str(), field.name.str());
  if (field.nullable && isYamlNull(value)) {
    if (auto *count =
            std::get_if<std::optional<int64_t> &(*)(Draft &)>(&field.ref))
      (*count)(draft).reset();
    else
      std::get<std::optional<double> &(*)(Draft &)>(field.ref)(draft).reset();
    return llvm::Error::success();
  }
  if (llvm::isa<yaml::NullNode>(value))
    return error(
        key, fmt::format("{} has no value", where),
        "give a value, or remove the key to use the default (docs/spec.md)");
  if (auto *words = std::get_if<std::vector<Word> &(*)(Draft &)>(&field.ref))
    return readWords(section, field, value, (*words)(draft));
  auto *scalar = llvm::dyn_cast<yaml::ScalarNode>(value);
  if (!scalar) {
    value->skip();
    if (!yamlError.empty())
      return yamlFailure();
    return error(
        value,
        fmt::format("{} must be a single value, not a list or mapping", where),
        "write it as `key: value` on one line");
  }
  llvm::SmallString<64> storage;
  llvm::StringRef v = scalar->getValue(storage);

  auto asInt = [&](int64_t &out) -> llvm::Error {
    if (v.getAsInteger(10, out))
      return error(value,
                   fmt::format("{} must be an integer, got '{}'", where, v),
                   "write a whole number such as 4");
    return llvm::Error::success();
  };
  auto asFloat = [&](double &out) -> llvm::Error {
    std::string s = v.str();
    char *end = nullptr;
    out = std::strtod(s.c_str(), &end);
    if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(out))
      return error(value,
                   fmt::format("{} must be a number, got '{}'", where, v),
                   "write a number such as 0.001 or 1e-3");
    return llvm::Error::success();
  };

  return std::visit(
      [&](auto ref) -> llvm::Error {
        using Ref = decltype(ref);
        // Read above: not one scalar.
        if constexpr (std::is_same_v<Ref, const Section *> ||
                      std::is_same_v<Ref, std::vector<Word> &(*)(Draft &)>) {
          return llvm::Error::success();
        } else {
          auto &slot = ref(draft);
          using T = std::decay_t<decltype(slot)>;
          if constexpr (std::is_same_v<T, int64_t>) {
            return asInt(slot);
          } else if constexpr (std::is_same_v<T, std::optional<int64_t>>) {
            int64_t x;
            if (auto err = asInt(x))
              return err;
            slot = x;
            return llvm::Error::success();
          } else if constexpr (std::is_same_v<T, double>) {
            return asFloat(slot);
          } else if constexpr (std::is_same_v<T, std::optional<double>>) {
            double x;
            if (auto err = asFloat(x))
              return err;
            slot = x;
            return llvm::Error::success();
          } else if constexpr (std::is_same_v<T, bool>) {
            if (v == "true" || v == "false") {
              slot = v == "true";
              return llvm::Error::success();
            }
            return error(
                value,
                fmt::format("{} must be true or false, got '{}'", where, v),
                "write true or false");
          } else {
            if (auto err = checkText(section, field, value, v))
              return err;
            slot = v.str();
            return llvm::Error::success();
          }
        }
      },
      field.ref);
}

llvm::Error Loader::readWords(const Section &section, const Field &field,
                              yaml::Node *value, std::vector<Word> &words) {
  std::string where =
      fmt::format("{}.{}", section.name.str(), field.name.str());
  const std::string help = fmt::format(
      "write the names as a list, {0}: [a, b], or as one string of names "
      "separated by spaces, {0}: \"a b\"",
      field.name.str());
  words.clear();
  if (auto *list = llvm::dyn_cast<yaml::SequenceNode>(value)) {
    for (yaml::Node &item : *list) {
      auto *scalar = llvm::dyn_cast<yaml::ScalarNode>(&item);
      if (!scalar) {
        item.skip();
        if (!yamlError.empty())
          return yamlFailure();
        return error(
            &item, fmt::format("each entry of {} must be a name", where), help);
      }
      llvm::SmallString<32> storage;
      llvm::StringRef v = scalar->getValue(storage);
      if (auto err = checkText(section, field, scalar, v))
        return err;
      words.push_back({v.str(), scalar, 0});
    }
    if (!yamlError.empty())
      return yamlFailure();
  } else if (auto *scalar = llvm::dyn_cast<yaml::ScalarNode>(value)) {
    llvm::SmallString<64> storage;
    llvm::StringRef v = scalar->getValue(storage);
    if (auto err = checkText(section, field, value, v))
      return err;
    for (size_t at = v.find_first_not_of(' '); at != llvm::StringRef::npos;
         at = v.find_first_not_of(' ', at)) {
      const size_t end = std::min(v.find(' ', at), v.size());
      words.push_back({v.slice(at, end).str(), scalar, at});
      at = end;
    }
  } else {
    value->skip();
    if (!yamlError.empty())
      return yamlFailure();
    return error(value, fmt::format("{} must be a list of names", where), help);
  }
  return llvm::Error::success();
}

llvm::Error Loader::readSection(const Section &section, yaml::Node *value) {
  if (llvm::isa<yaml::NullNode>(value))
    return llvm::Error::success(); // An empty section: every default.
  auto *map = llvm::dyn_cast<yaml::MappingNode>(value);
  if (!map) {
    value->skip();
    return error(value,
                 fmt::format("'{}' must be a mapping of keys to values",
                             section.name.str()),
                 fmt::format("write it as\n  {}:\n    key: value",
                             lastKey(section.name).str()));
  }
  llvm::SmallVector<llvm::StringRef> names;
  for (const Field &f : section.fields())
    names.push_back(f.name);

  for (yaml::KeyValueNode &kv : *map) {
    auto *keyNode = llvm::dyn_cast_or_null<yaml::ScalarNode>(kv.getKey());
    if (!keyNode) {
      if (kv.getKey())
        kv.getKey()->skip();
      if (kv.getValue())
        kv.getValue()->skip();
      if (!yamlError.empty())
        return yamlFailure();
      return error(kv.getKey() ? kv.getKey() : value,
                   "keys must be plain names", "write `key: value`");
    }
    llvm::SmallString<32> keyStorage;
    llvm::StringRef key = keyNode->getValue(keyStorage);
    std::string keyCopy = key.str();
    yaml::Node *fieldValue = kv.getValue();
    if (!yamlError.empty() || !fieldValue)
      return brokenYaml(keyNode);
    const Field *field = nullptr;
    for (const Field &f : section.fields())
      if (f.name == keyCopy)
        field = &f;
    if (!field) {
      fieldValue->skip();
      std::string help;
      if (auto guess = closest(keyCopy, names))
        help = fmt::format("did you mean '{}'?", *guess);
      else if (std::optional<std::string> other = sectionWithKey(keyCopy))
        help = fmt::format("'{}' belongs in the '{}' section", keyCopy, *other);
      if (help.empty())
        help = fmt::format("keys of '{}' are: {}", section.name.str(),
                           llvm::join(names, ", "));
      return error(keyNode,
                   fmt::format("unknown key '{}' in section '{}'", keyCopy,
                               section.name.str()),
                   help);
    }
    std::string path = fmt::format("{}.{}", section.name.str(), keyCopy);
    if (valueNodes.count(path))
      return error(
          keyNode, fmt::format("duplicate key '{}'", path),
          "give each key once; the earlier value is on line " +
              std::to_string(
                  sm.getLineAndColumn(valueNodes[path]->getSourceRange().Start)
                      .first));
    if (llvm::isa<yaml::AliasNode>(fieldValue))
      return error(
          keyNode,
          fmt::format(
              "the value of {} starts with '*', which YAML reads as an alias "
              "to an anchor, not as text",
              path),
          fmt::format("quote the value, e.g. {}: \"*M-M\"", keyCopy));
    valueNodes[path] = fieldValue;
    // A nested mapping's keys fall back to it, as a section's to its name.
    if (std::holds_alternative<const Section *>(field->ref))
      sectionNodes[path] = keyNode;
    if (auto err = readField(section, *field, keyNode, fieldValue))
      return err;
    if (!yamlError.empty())
      return yamlFailure();
  }
  return llvm::Error::success();
}

llvm::Expected<ModelSpec> Loader::load() {
  draft.spec.file = file;
  yaml::Stream stream(sm.getMemoryBuffer(1)->getMemBufferRef(), sm,
                      /*ShowColors=*/false);
  auto doc = stream.begin();
  if (doc == stream.end() || !doc->getRoot() ||
      llvm::isa<yaml::NullNode>(doc->getRoot())) {
    if (!yamlError.empty())
      return yamlFailure();
    return error(llvm::SMLoc::getFromPointer(text.data()), 1,
                 "the spec is empty",
                 "start from examples/hybrid-tiny.yaml; a spec needs at least "
                 "model.pattern");
  }
  rootNode = doc->getRoot();
  auto *root = llvm::dyn_cast<yaml::MappingNode>(rootNode);
  if (!root) {
    rootNode->skip();
    if (!yamlError.empty())
      return yamlFailure();
    return error(
        rootNode,
        "the spec must be a mapping with the sections model, parallel, "
        "training and data",
        "see examples/hybrid-tiny.yaml");
  }
  llvm::SmallVector<llvm::StringRef> sectionNames;
  for (const Section &s : kSections)
    sectionNames.push_back(s.name);

  for (yaml::KeyValueNode &kv : *root) {
    auto *keyNode = llvm::dyn_cast_or_null<yaml::ScalarNode>(kv.getKey());
    if (!yamlError.empty())
      return yamlFailure();
    if (!keyNode) {
      if (kv.getValue())
        kv.getValue()->skip();
      if (!yamlError.empty())
        return yamlFailure();
      return error(kv.getKey() ? kv.getKey() : rootNode,
                   "section names must be plain keys",
                   "the sections are model, parallel, training and data");
    }
    llvm::SmallString<32> storage;
    std::string key = keyNode->getValue(storage).str();
    const Section *section = nullptr;
    for (const Section &s : kSections)
      if (s.name == key)
        section = &s;
    yaml::Node *value = kv.getValue();
    if (!yamlError.empty() || !value)
      return brokenYaml(keyNode);
    if (!section) {
      value->skip();
      if (!yamlError.empty())
        return yamlFailure();
      std::string help;
      if (auto guess = closest(key, sectionNames))
        help = fmt::format("did you mean '{}'?", *guess);
      if (std::optional<std::string> owner = sectionWithKey(key))
        help = fmt::format(
            "'{}' is a key of the '{}' section: indent it under '{}:'", key,
            *owner, lastKey(*owner).str());
      if (help.empty())
        help = "the sections are model, parallel, training and data";
      return error(keyNode, fmt::format("unknown section '{}'", key), help);
    }
    if (sectionNodes.count(key))
      return error(keyNode, fmt::format("duplicate section '{}'", key),
                   "merge the two into one section");
    sectionNodes[key] = keyNode;
    if (auto err = readSection(*section, value))
      return std::move(err);
  }
  if (!yamlError.empty())
    return yamlFailure();
  if (auto err = applyOverrides())
    return std::move(err);
  // Check while the document's nodes are alive: advancing the document
  // iterator frees them.
  if (auto err = check())
    return std::move(err);
  ++doc;
  if (!yamlError.empty())
    return yamlFailure();
  if (doc != stream.end())
    return error(llvm::SMLoc::getFromPointer(text.data()), 1,
                 "the spec holds more than one YAML document",
                 "keep one document: remove the '---' separators");
  return std::move(draft.spec);
}

llvm::Error Loader::check() {
  for (llvm::Error (Loader::*section)() :
       {&Loader::checkSizes, &Loader::checkPattern, &Loader::checkModel,
        &Loader::checkParallel, &Loader::checkTraining, &Loader::checkTokenizer,
        &Loader::checkTensorParallel, &Loader::checkExpertParallel,
        &Loader::checkRecompute, &Loader::checkPartition, &Loader::checkMemory,
        &Loader::notePlannable})
    if (llvm::Error err = (this->*section)())
      return err;
  return llvm::Error::success();
}

/// Every size against its bound (SizeBounds.h), before anything is sized
/// from one; the model's widths are dims_c0 of checkModel.
llvm::Error Loader::checkSizes() {
  const ParallelSpec &par = draft.spec.parallel;
  const TrainingSpec &t = draft.spec.training;
  const DataSpec &d = draft.spec.data;
  RunSizes sizes;
  sizes.numLayers = draft.numLayers.value_or(0);
  sizes.pp = par.pp;
  sizes.vpp = draft.vpp.value_or(0);
  sizes.dp = par.dp;
  sizes.tp = par.tp;
  sizes.ep = par.ep;
  sizes.etp = draft.etp.value_or(0);
  sizes.microbatches = draft.microbatches.value_or(0);
  sizes.groupSize = draft.groupSize.value_or(0);
  sizes.firstStageLayers = par.firstStageLayers.value_or(0);
  sizes.lastStageLayers = par.lastStageLayers.value_or(0);
  sizes.seqLength = t.seqLength;
  sizes.microBatchSize = t.microBatchSize;
  sizes.steps = t.steps;
  sizes.warmupSteps = t.warmupSteps;
  sizes.lrDecaySteps = t.lrDecaySteps;
  sizes.packing = d.packing;
  sizes.maxTokensPerMicrobatch = d.maxTokensPerMicrobatch.value_or(0);
  sizes.globalBatchSize = d.globalBatchSize.value_or(0);
  sizes.minBinCount = d.minBinCount.value_or(0);
  sizes.binCountMultiple = d.binCountMultiple.value_or(0);
  if (std::optional<SizeProblem> problem = checkRunSizes(sizes))
    return error(nodeForField(problem->field), problem->message, problem->help);
  return llvm::Error::success();
}

llvm::Error Loader::checkPattern() {
  ModelSpec &spec = draft.spec;

  // The pattern: given, or allocated from ratios.
  bool fromRatios = draft.attentionRatio || draft.mlpRatio;
  if (valueNodes.count("model.pattern")) {
    patternNode = valueNodes["model.pattern"];
    if (fromRatios)
      return error(
          nodeFor("model",
                  draft.attentionRatio ? "attention_ratio" : "mlp_ratio"),
          "give either model.pattern or attention_ratio/mlp_ratio, not both",
          "remove the ratios; the pattern says exactly which layer is which");
  } else if (fromRatios || draft.numLayers) {
    yaml::Node *at = nodeFor("model", "num_layers");
    if (!draft.numLayers)
      return error(nodeFor("model", draft.attentionRatio ? "attention_ratio"
                                                         : "mlp_ratio"),
                   "attention_ratio/mlp_ratio need model.num_layers",
                   "add num_layers: N under model:");
    auto allocated =
        patternFromRatios(*draft.numLayers, draft.attentionRatio.value_or(0.0),
                          draft.mlpRatio.value_or(0.0));
    if (!allocated) {
      std::string message = toString(allocated.takeError());
      auto [first, help] = llvm::StringRef(message).split("\nhelp: ");
      if (first.starts_with("mlp_ratio"))
        at = nodeFor("model", "mlp_ratio");
      else if (!first.starts_with("num_layers"))
        at = nodeFor("model",
                     draft.attentionRatio ? "attention_ratio" : "mlp_ratio");
      return error(at, first, help);
    }
    draft.pattern = *allocated;
  } else {
    return error(nodeFor("model", "pattern"), "the model has no layers",
                 "set model.pattern, e.g. pattern: \"M*M-|M*M-\" (see "
                 "docs/languages.md)");
  }

  auto pattern = parseHybridPattern(draft.pattern);
  if (pattern && pattern->emptyMtpOffset)
    pattern = sourceError(
        *pattern->emptyMtpOffset,
        "the MTP part after '/' is empty, so no MTP would be trained",
        "write the MTP layers after '/' (e.g. \"M*M-/*-\" trains one "
        "depth of '*-'), or remove the '/' to train without MTP",
        draft.pattern.size() - *pattern->emptyMtpOffset);
  if (!pattern)
    return scalarError(patternNode, pattern.takeError());
  spec.pattern = std::move(*pattern);
  if (auto err = checkPatternLayers())
    return err;
  if (std::optional<llvm::StringRef> inner = verbatimScalar(patternNode);
      inner && !inner->contains('\n')) {
    auto [line, column] =
        sm.getLineAndColumn(llvm::SMLoc::getFromPointer(inner->data()));
    spec.patternLine = line;
    spec.patternColumn = column;
  }
  if (patternNode && draft.numLayers &&
      *draft.numLayers != spec.pattern.numLayers())
    return error(
        nodeFor("model", "num_layers"),
        fmt::format("model.num_layers is {} but the pattern has {} layers",
                    *draft.numLayers, spec.pattern.numLayers()),
        "remove num_layers (the pattern defines it) or fix the pattern");
  if (spec.pattern.numLayers() == 0)
    return error(patternNode ? patternNode : nodeFor("model", "pattern"),
                 "the pattern has no layers",
                 "give at least one layer symbol, e.g. pattern: \"M*M-\"");
  return llvm::Error::success();
}

/// The pattern's layers against model.num_layers' bound and its segments
/// (its stages, pp x vpp) against kMaxStages, which the runtime's manifest
/// check (checkRunSizes) holds a compiled model to: the caret is on the
/// first layer, or the '|' of the first segment, past the bound.
llvm::Error Loader::checkPatternLayers() {
  const HybridPattern &pattern = draft.spec.pattern;
  if (pattern.numSegments() > kMaxStages)
    return error(
        locInScalar(patternNode, pattern.segmentOffsets[kMaxStages] - 1), 1,
        tooLarge("the number of segments of model.pattern (its stages, pp x "
                 "vpp)",
                 pattern.numSegments(), kMaxStages),
        "use fewer segments; each stage holds a layer or more, and a model "
        "at most 4096");
  const SizeBound &bound = sizeBound("model.num_layers");
  if (pattern.numLayers() <= bound.max) {
    // The MTP depths' layers count too, in the last stage's program.
    if (programLayers(pattern) <= kMaxProgramLayers)
      return llvm::Error::success();
    return error(
        locInScalar(patternNode, pattern.mtpOffset), 1,
        tooLarge("the count of kernel layers of model.pattern (its layers, the "
                 "embedding, the head and each MTP depth's input, layers and "
                 "output)",
                 programLayers(pattern), kMaxProgramLayers),
        fmt::format("use fewer MTP depths: each '/' part is one (models train "
                    "with one to four); this pattern has {}",
                    pattern.mtpDepths));
  }
  size_t offset = 0;
  for (int64_t seen = 0; offset < pattern.text.size(); ++offset)
    if (pattern.text[offset] != '|' && ++seen > bound.max)
      break;
  return error(locInScalar(patternNode, offset), 1,
               tooLarge("the number of layers of model.pattern",
                        pattern.numLayers(), bound.max),
               bound.help);
}

/// Dimensions, then what each layer kind in use needs.
llvm::Error Loader::checkModel() {
  ModelSpec &spec = draft.spec;
  if (draft.qLoraRank && *draft.qLoraRank <= 0)
    return error(
        nodeFor("model", "q_lora_rank"),
        fmt::format("q_lora_rank must be positive, got {}", *draft.qLoraRank),
        "use null (Megatron's default) for queries without a "
        "down-projection, or a rank such as 1536 (DeepSeek-V3)");
  spec.dims.qLoraRank = draft.qLoraRank.value_or(0);
  for (auto [key, value] :
       {std::pair{"dsa_indexer_n_heads", draft.dsaIndexerNHeads},
        {"dsa_indexer_head_dim", draft.dsaIndexerHeadDim},
        {"dsa_indexer_topk", draft.dsaIndexerTopk}})
    if (value && *value <= 0)
      return error(nodeFor("model", key),
                   fmt::format("{} must be positive, got {}", key, *value),
                   "DeepSeek-V3.2 uses dsa_indexer_n_heads 64, "
                   "dsa_indexer_head_dim 128 and dsa_indexer_topk 2048; null "
                   "(Megatron's None) only for a model without D layers");
  spec.dims.dsaIndexerNHeads = draft.dsaIndexerNHeads.value_or(0);
  spec.dims.dsaIndexerHeadDim = draft.dsaIndexerHeadDim.value_or(0);
  spec.dims.dsaIndexerTopk = draft.dsaIndexerTopk.value_or(0);
  if (auto problem = checkModelDims(spec.dims)) {
    // The query groups' default that the spec's head count does not take
    // (an MLA model never names them): point at the heads it gives.
    std::string field = problem->field;
    if (field == "num_query_groups" &&
        !valueNodes.count("model.num_query_groups") &&
        valueNodes.count("model.num_attention_heads")) {
      field = "num_attention_heads";
      problem->message +=
          fmt::format(" (num_query_groups is not given: its default is {})",
                      ModelDims{}.numQueryGroups);
      problem->help = "set model.num_query_groups to a divisor of "
                      "num_attention_heads (num_attention_heads itself for "
                      "plain multi-head attention, and for a model whose "
                      "attention is MLA, which has no query groups)";
    }
    return error(nodeFor("model", field), problem->message, problem->help);
  }
  std::string used = spec.pattern.layers() + spec.pattern.mtp;
  for (char symbol : kLayerSymbols) {
    size_t at = used.find(symbol);
    if (at == std::string::npos)
      continue;
    if (auto problem = checkLayerKindDims(symbol, spec.dims)) {
      // An indexer size D needs that the spec leaves out (or null) is
      // missing rather than 0.
      if (symbol == 'D')
        for (auto [key, value] :
             {std::pair{"dsa_indexer_n_heads", draft.dsaIndexerNHeads},
              {"dsa_indexer_head_dim", draft.dsaIndexerHeadDim},
              {"dsa_indexer_topk", draft.dsaIndexerTopk}})
          if (problem->field == key && !value)
            problem->message = fmt::format(
                "sparse attention layers ('D') need model.{}, which is {}", key,
                valueNodes.count(std::string("model.") + key)
                    ? "null (Megatron's None)"
                    : "missing");
      // Point at the value that is wrong, or else at the layer that needs it.
      if (valueNodes.count("model." + problem->field) || !patternNode)
        return error(nodeFor("model", problem->field), problem->message,
                     problem->help);
      size_t offset = spec.pattern.text.find(symbol);
      return error(locInScalar(patternNode, offset), 1, problem->message,
                   problem->help);
    }
  }
  if (spec.positionEmbedding != "none" && spec.positionEmbedding != "rope")
    return error(
        nodeFor("model", "position_embedding"),
        fmt::format("unknown position_embedding '{}'", spec.positionEmbedding),
        "use none (the hybrid-model default) or rope");
  if (auto err = checkMlaRope())
    return err;
  if (spec.moeAuxLossCoeff < 0)
    return error(nodeFor("model", "moe_aux_loss_coeff"),
                 "moe_aux_loss_coeff cannot be negative",
                 "use 0 to switch the load-balancing loss off");
  if (auto err = checkMoeCapacity())
    return err;
  if (auto err = checkCrossEntropyFusion())
    return err;
  if (auto err = checkDsaLoss())
    return err;
  if (spec.mtpLossScalingFactor < 0)
    return error(nodeFor("model", "mtp_loss_scaling_factor"),
                 "mtp_loss_scaling_factor cannot be negative",
                 "use Megatron's default 0.1, or 0 to train the MTP depths "
                 "without their loss reaching the model");
  return llvm::Error::success();
}

/// The loss's fusion: Megatron-LM's native or linear implementation (its
/// Transformer Engine one is refused: hypipe has none), and the linear
/// one's chunk of rows, 1 to 2^20.
llvm::Error Loader::checkCrossEntropyFusion() {
  const ModelSpec &spec = draft.spec;
  const std::string &impl = spec.crossEntropyFusionImpl;
  if (impl == "te")
    return error(nodeForField("model.cross_entropy_fusion_impl"),
                 "hypipe has no Transformer Engine cross-entropy",
                 "use native (the same loss, the logits kept whole) or "
                 "linear (the output layer and the loss fused over chunks of "
                 "tokens, the logits never kept)");
  if (impl != "native" && impl != "linear")
    return error(nodeForField("model.cross_entropy_fusion_impl"),
                 fmt::format("unknown cross_entropy_fusion_impl '{}'", impl),
                 "use native (the default: a microbatch's logits kept for the "
                 "backward) or linear (made again a chunk of tokens at a "
                 "time: less memory, one more output-layer GEMM a "
                 "microbatch, in the input gradient)");
  const std::optional<int64_t> &chunk = spec.crossEntropyChunkTokens;
  if (chunk && impl != "linear")
    return error(nodeForField("model.cross_entropy_chunk_tokens"),
                 "cross_entropy_chunk_tokens sizes the linear cross-entropy's "
                 "chunks, and cross_entropy_fusion_impl is " +
                     impl,
                 "set cross_entropy_fusion_impl: linear "
                 "(--cross-entropy-fusion-impl linear), or remove "
                 "cross_entropy_chunk_tokens");
  constexpr int64_t kMostChunkTokens = int64_t(1) << 20;
  if (chunk && (*chunk < 1 || *chunk > kMostChunkTokens))
    return error(nodeForField("model.cross_entropy_chunk_tokens"),
                 fmt::format("cross_entropy_chunk_tokens must be 1 to {} "
                             "(got {})",
                             kMostChunkTokens, *chunk),
                 "use e.g. 1024, or leave it out: the chunk's logits then "
                 "take about the memory of the head's input (at least 256 "
                 "tokens)");
  return llvm::Error::success();
}

/// Megatron-LM's token dropping: a capacity factor above 0 (a negative one
/// means None there, dropless: here it is refused, to say so), a known
/// drop policy, and padding only with a capacity.
llvm::Error Loader::checkMoeCapacity() {
  const ModelSpec &spec = draft.spec;
  const std::optional<double> &factor = spec.moeExpertCapacityFactor;
  if (factor && !(*factor > 0 && std::isfinite(*factor)))
    return error(nodeForField("model.moe_expert_capacity_factor"),
                 fmt::format("moe_expert_capacity_factor must be a positive "
                             "number (got {})",
                             *factor),
                 "use e.g. 1.0 (each expert takes its even share of the "
                 "tokens), or leave it out for dropless MoE, Megatron-LM's "
                 "default");
  if (spec.moeTokenDropPolicy != "probs" &&
      spec.moeTokenDropPolicy != "position")
    return error(nodeForField("model.moe_token_drop_policy"),
                 fmt::format("unknown moe_token_drop_policy '{}'",
                             spec.moeTokenDropPolicy),
                 "use probs (Megatron-LM's default: an expert over capacity "
                 "keeps its highest-weighted tokens) or position (its "
                 "earliest)");
  if (spec.moePadExpertInputToCapacity && !factor)
    return error(nodeForField("model.moe_pad_expert_input_to_capacity"),
                 "moe_expert_capacity_factor must be set to use "
                 "moe_pad_expert_input_to_capacity",
                 "set model.moe_expert_capacity_factor "
                 "(--moe-expert-capacity-factor), or remove "
                 "moe_pad_expert_input_to_capacity");
  const std::string used = spec.pattern.layers() + spec.pattern.mtp;
  if (factor && used.find('E') == std::string::npos)
    return error(nodeForField("model.moe_expert_capacity_factor"),
                 "moe_expert_capacity_factor limits the tokens of MoE "
                 "layers' experts ('E'), and the model has none",
                 "remove moe_expert_capacity_factor, or add E layers to the "
                 "pattern");
  return llvm::Error::success();
}

/// The indexer's KL loss weight: a number from 0 (the indexer does not
/// train), which a model with D layers must give (Megatron's None has no
/// meaning there: its DSAttention multiplies the loss by it).
llvm::Error Loader::checkDsaLoss() {
  const std::optional<double> coeff = draft.dsaIndexerLossCoeff;
  if (coeff && !(std::isfinite(*coeff) && *coeff >= 0))
    return error(nodeFor("model", "dsa_indexer_loss_coeff"),
                 fmt::format("dsa_indexer_loss_coeff must be a non-negative "
                             "number, got {}",
                             *coeff),
                 "use 0 to leave the indexer untrained, or a small weight "
                 "such as 0.01");
  const size_t sparse = draft.spec.pattern.text.find('D');
  if (!coeff && sparse != std::string::npos && patternNode)
    return error(
        locInScalar(patternNode, sparse), 1,
        "sparse attention layers ('D') need model.dsa_indexer_loss_coeff",
        "Megatron-LM has no default for it; set it, e.g. 0.01, or 0 to "
        "leave the indexer untrained");
  draft.spec.dsaIndexerLossCoeff = coeff.value_or(0.0);
  return llvm::Error::success();
}

/// MLA's rotary embedding: Megatron's --rope-type (yarn, MLA's default, or
/// rope) and YaRN's scaling.
llvm::Error Loader::checkMlaRope() {
  MlaRopeSpec &rope = draft.spec.mlaRope;
  std::optional<MlaRopeType> type = parseMlaRopeType(draft.ropeType);
  if (!type)
    return error(nodeFor("model", "rope_type"),
                 fmt::format("unknown rope_type '{}'", draft.ropeType),
                 "use yarn (MLA's default) or rope");
  rope.type = *type;
  if (!(rope.rotaryScalingFactor > 0) ||
      !std::isfinite(rope.rotaryScalingFactor))
    return error(nodeFor("model", "rotary_scaling_factor"),
                 fmt::format("rotary_scaling_factor must be a positive "
                             "number, got {}",
                             rope.rotaryScalingFactor),
                 "use 1 (Megatron's default: no YaRN stretching) or the "
                 "context extension, e.g. 40 for DeepSeek-V3");
  for (auto [key, value] : {std::pair{"mscale", rope.mscale},
                            {"mscale_all_dim", rope.mscaleAllDim}})
    if (!std::isfinite(value) || value < 0)
      return error(
          nodeFor("model", key),
          fmt::format("{} must be a non-negative number, got {}", key, value),
          "Megatron's defaults are mscale 1 and mscale_all_dim 0");
  return llvm::Error::success();
}

/// The parallel layout: sizes, the placement of the layers, the schedule.
llvm::Error Loader::checkParallel() {
  ModelSpec &spec = draft.spec;
  ParallelSpec &par = spec.parallel;
  for (auto [key, value] :
       {std::pair{"pp", par.pp}, {"dp", par.dp}, {"tp", par.tp}})
    if (value < 1)
      return error(nodeFor("parallel", key),
                   fmt::format("parallel.{} must be at least 1", key),
                   "1 switches that kind of parallelism off");
  if (draft.vpp && *draft.vpp < 1)
    return error(nodeFor("parallel", "vpp"), "parallel.vpp must be at least 1",
                 "1 switches virtual pipelining off");
  std::optional<schedule::ScheduleKind> kind =
      schedule::parseScheduleKind(draft.schedule);
  if (!kind) {
    llvm::SmallVector<llvm::StringRef> names(schedule::scheduleNames().begin(),
                                             schedule::scheduleNames().end());
    auto guess = closest(draft.schedule, names);
    return error(nodeFor("parallel", "schedule"),
                 fmt::format("unknown schedule '{}'", draft.schedule),
                 guess ? fmt::format("did you mean '{}'?", *guess)
                       : "use one of " + schedule::scheduleNameList());
  }
  par.schedule = *kind;

  PlacementOptions options{par.pp, draft.vpp, par.firstStageLayers,
                           par.lastStageLayers, schedule::placementOf(*kind)};
  if (!par.layout.empty()) {
    if (llvm::Error err = placeByLayout())
      return err;
  } else if (!spec.pattern.hasPipes() && !par.firstStageLayers &&
             !par.lastStageLayers && par.pp * draft.vpp.value_or(1) > 1) {
    // The compiler balances the stages; done once the rest is checked.
    spec.autoPartitioned = true;
    spec.placement.pp = par.pp;
    spec.placement.vpp = draft.vpp.value_or(1);
  } else {
    auto placement = placeHybridPattern(spec.pattern, options);
    if (!placement) {
      // Errors about pp/vpp or the uneven split are about the whole pattern.
      return scalarError(patternNode ? patternNode
                                     : nodeFor("model", "num_layers"),
                         placement.takeError());
    }
    spec.placement = std::move(*placement);
  }
  par.vpp = spec.placement.vpp;
  // Which shapes a schedule runs (stages per rank, microbatch groups) is
  // the schedule library's to say; the spec points at the key to change.
  if (Error refused = schedule::checkScheduleShape(*kind, par.vpp))
    return error(nodeFor("parallel", "schedule"), refused.message(),
                 refused.problem().help);
  par.microbatches = draft.microbatches.value_or(par.pp);
  if (par.microbatches < 1)
    return error(
        nodeFor("parallel", "microbatches"),
        "parallel.microbatches must be at least 1",
        fmt::format("use at least pp = {} to keep every stage busy", par.pp));
  if (llvm::Error refused = checkGroupSize())
    return refused;
  if (!par.scheduleCsv.empty())
    return checkScheduleCsv();
  // The schedule must exist for this shape (Megatron's refusals among others).
  if (Error refused = schedule::checkSchedule(
          {par.schedule, par.pp, par.vpp, par.microbatches, par.groupSize}))
    return error(nodeFor("parallel", valueNodes.count("parallel.microbatches")
                                         ? "microbatches"
                                         : "schedule"),
                 refused.message(),
                 refused.problem().help.empty()
                     ? "see docs/schedules.md for what each schedule accepts"
                     : refused.problem().help);
  return llvm::Error::success();
}

/// The placement parallel.layout gives: parsed, checked against the
/// pattern, and within kMaxStages stages, the bound hypipe-run's manifest
/// check holds a compiled model to.
llvm::Error Loader::placeByLayout() {
  ModelSpec &spec = draft.spec;
  ParallelSpec &par = spec.parallel;
  yaml::Node *layoutNode = nodeFor("parallel", "layout");
  if (spec.pattern.hasPipes())
    return error(
        layoutNode,
        "parallel.layout cannot be combined with '|' in model.pattern",
        "place the layers one way: either '|' in the pattern or the layout "
        "string");
  auto layout = parsePipelineLayout(par.layout, par.pp);
  if (!layout)
    return scalarError(layoutNode, layout.takeError());
  std::optional<int64_t> mtpLayers;
  if (spec.pattern.hasMtp())
    mtpLayers = spec.pattern.mtpDepths;
  if (auto valid =
          validatePipelineLayout(*layout, spec.pattern.numLayers(), mtpLayers);
      !valid)
    return scalarError(layoutNode, valid.takeError());
  if (int64_t(layout->stages.size()) > kMaxStages)
    return error(layoutNode,
                 tooLarge("the number of stages of parallel.layout (pp x vpp)",
                          int64_t(layout->stages.size()), kMaxStages),
                 "use fewer stages; each holds a layer or more, and a model "
                 "at most 4096");
  if (draft.vpp && *draft.vpp != layout->vpp)
    return error(nodeFor("parallel", "vpp"),
                 fmt::format("parallel.vpp is {} but the layout has {} "
                             "stages = pp {} * vpp {}",
                             *draft.vpp, layout->stages.size(), layout->pp,
                             layout->vpp),
                 "remove vpp (the layout defines it) or fix the layout");
  auto placement = placementFromLayout(spec.pattern, *layout);
  if (!placement)
    return scalarError(layoutNode, placement.takeError());
  spec.placement = std::move(*placement);
  return llvm::Error::success();
}

/// microbatch_group_size_per_vp_stage is pp when left out (Megatron's
/// default); a given value, 0 included, is checked at its line: Megatron's
/// range for interleaved-1f1b, a count of at least 1 for the others (which
/// do not use it).
llvm::Error Loader::checkGroupSize() {
  ParallelSpec &par = draft.spec.parallel;
  par.groupSize = draft.groupSize.value_or(par.pp);
  if (!draft.groupSize)
    return llvm::Error::success();
  yaml::Node *node = nodeFor("parallel", "microbatch_group_size_per_vp_stage");
  const std::string help =
      fmt::format("leave it out to use pp = {} (Megatron's default)", par.pp);
  if (par.schedule == schedule::ScheduleKind::Interleaved1F1B) {
    if (Error refused =
            schedule::checkGroupSize(par.pp, par.microbatches, par.groupSize))
      return error(node, refused.message(), help);
  } else if (par.groupSize < 1) {
    return error(node,
                 fmt::format("microbatch_group_size_per_vp_stage is a number "
                             "of microbatches, at least 1; got {}",
                             par.groupSize),
                 help);
  }
  return llvm::Error::success();
}

std::string Loader::resolvePath(llvm::StringRef key,
                                llvm::StringRef value) const {
  llvm::SmallString<256> path(value);
  if (overridden.count(key.str())) {
    llvm::sys::fs::make_absolute(path);
  } else if (!llvm::sys::path::is_absolute(path)) {
    llvm::SmallString<256> base(file);
    llvm::sys::fs::make_absolute(base);
    llvm::sys::path::remove_filename(base);
    llvm::sys::path::append(base, value);
    path = base;
  }
  llvm::sys::path::remove_dots(path, /*remove_dot_dot=*/true);
  return path.str().str();
}

/// A schedule CSV replaces the generated order: it must read, fit the
/// model's shape and placement, and verify. Errors point at the key (or the
/// flag) and quote the file.
llvm::Error Loader::checkScheduleCsv() {
  ParallelSpec &par = draft.spec.parallel;
  if (draft.spec.data.packing)
    return error(nodeFor("data", "packing"),
                 "packing changes the number of microbatches from step to "
                 "step, and parallel.schedule_csv holds a program for a "
                 "fixed number",
                 "train unpacked with the CSV, or let hypipe generate the "
                 "schedule (remove parallel.schedule_csv)");
  par.scheduleCsv = resolvePath("parallel.schedule_csv", par.scheduleCsv);
  auto imported = schedule::readCsvForModel(par.scheduleCsv, par.schedule,
                                            par.pp, par.vpp, par.microbatches);
  if (!imported) {
    Problem p = imported.takeError().takeProblem();
    return error(nodeFor("parallel", "schedule_csv"), p.message,
                 p.help.empty()
                     ? fmt::format("the file must hold one row per pipeline "
                                   "rank (pp = {}) of actions on {} stages "
                                   "and {} microbatches (docs/schedules.md)",
                                   par.pp, par.pp * par.vpp, par.microbatches)
                     : p.help);
  }
  par.csvPrograms = std::move(imported->schedule);
  return llvm::Error::success();
}

/// data.tokenizer: every id the tokenizer makes needs a row of the
/// embedding, so model.vocab_size must cover its vocabulary (docs/data.md).
llvm::Error Loader::checkTokenizer() {
  DataSpec &d = draft.spec.data;
  if (d.tokenizer.empty())
    return llvm::Error::success();
  if (d.tokenizer != kBytesTokenizer)
    d.tokenizer = resolvePath("data.tokenizer", d.tokenizer);
  Expected<std::unique_ptr<Tokenizer>> tokenizer = openTokenizer(d.tokenizer);
  if (!tokenizer)
    return error(nodeFor("data", "tokenizer"), tokenizer.problem().message,
                 tokenizer.problem().help);
  const int64_t ids = (*tokenizer)->vocabSize();
  if (draft.spec.dims.vocab < ids)
    return error(nodeFor("model", "vocab_size"),
                 fmt::format("model.vocab_size ({}) is smaller than the "
                             "vocabulary of the tokenizer, {}",
                             draft.spec.dims.vocab,
                             (*tokenizer)->description()),
                 fmt::format("set model.vocab_size to {} or more: every id "
                             "the tokenizer makes needs a row of the "
                             "embedding",
                             ids));
  return llvm::Error::success();
}

/// Megatron's --lr-decay-style and what it needs, refused where Megatron's
/// OptimizerParamScheduler asserts (or would silently ignore a setting).
llvm::Error Loader::checkLrSchedule() {
  TrainingSpec &t = draft.spec.training;
  std::optional<LrDecayStyle> style = parseLrDecayStyle(draft.lrDecayStyle);
  if (!style)
    return error(
        nodeFor("training", "lr_decay_style"),
        fmt::format("unknown lr_decay_style '{}'", draft.lrDecayStyle),
        spellingHelp(draft.lrDecayStyle, kLrDecayStyles, lrDecayStyleName));
  t.lrDecayStyle = *style;
  std::optional<WsdDecayStyle> wsdStyle =
      parseWsdDecayStyle(draft.lrWsdDecayStyle);
  if (!wsdStyle)
    return error(
        nodeFor("training", "lr_wsd_decay_style"),
        fmt::format("unknown lr_wsd_decay_style '{}'", draft.lrWsdDecayStyle),
        spellingHelp(draft.lrWsdDecayStyle, kWsdDecayStyles,
                     wsdDecayStyleName));
  t.lrWsdDecayStyle = *wsdStyle;
  if (t.lrWarmupFraction) {
    if (given("training.warmup_steps"))
      return error(nodeFor("training", "lr_warmup_fraction"),
                   "training.lr_warmup_fraction and warmup_steps both set "
                   "the warm-up",
                   "give one of them (Megatron's --lr-warmup-fraction or "
                   "--lr-warmup-iters)");
    if (!(*t.lrWarmupFraction >= 0 && *t.lrWarmupFraction < 1))
      return error(nodeFor("training", "lr_warmup_fraction"),
                   "training.lr_warmup_fraction must be at least 0 and "
                   "below 1",
                   "it is the share of the decay steps spent warming up");
  }
  if (given("training.warmup_steps") && t.lrDecaySteps > 0 &&
      t.warmupSteps >= t.lrDecaySteps)
    return error(nodeFor("training", "warmup_steps"),
                 fmt::format("training.warmup_steps ({}) must be below "
                             "lr_decay_steps ({})",
                             t.warmupSteps, t.lrDecaySteps),
                 "the warm-up ends before the decay does: lower warmup_steps "
                 "or raise lr_decay_steps");
  const bool wsd = t.lrDecayStyle == LrDecayStyle::Wsd;
  if (!wsd) {
    for (const char *key : {"lr_wsd_decay_iters", "lr_wsd_decay_style"})
      if (given(fmt::format("training.{}", key)))
        return error(nodeFor("training", key),
                     fmt::format("training.{} is set, but lr_decay_style is "
                                 "{}",
                                 key, lrDecayStyleName(t.lrDecayStyle)),
                     "set lr_decay_style: WSD, or remove it");
    return llvm::Error::success();
  }
  const int64_t decayEnd = t.lrDecaySteps > 0 ? t.lrDecaySteps : t.steps;
  if (t.lrWsdDecaySteps < 1 || t.lrWsdDecaySteps > decayEnd)
    return error(nodeFor("training", "lr_wsd_decay_iters"),
                 given("training.lr_wsd_decay_iters")
                     ? fmt::format("training.lr_wsd_decay_iters must be from "
                                   "1 to the decay steps ({})",
                                   decayEnd)
                     : std::string("lr_decay_style WSD needs "
                                   "training.lr_wsd_decay_iters"),
                 "give the steps of the final decay to min_lr, e.g. a tenth "
                 "of the decay steps (Megatron's --lr-wsd-decay-iters)");
  return llvm::Error::success();
}

/// AdamW's betas and epsilon, in the ranges torch.optim.AdamW accepts
/// (epsilon also positive, or an update could divide by zero).
llvm::Error Loader::checkAdam() {
  const TrainingSpec &t = draft.spec.training;
  for (auto [key, value] :
       {std::pair{"adam_beta1", t.adamBeta1}, {"adam_beta2", t.adamBeta2}})
    if (!(value >= 0 && value < 1))
      return error(
          nodeFor("training", key),
          fmt::format("training.{} must be at least 0 and below 1", key),
          "Megatron's defaults are 0.9 and 0.999 (0.95 is common "
          "for beta2)");
  if (!(t.adamEps > 0))
    return error(nodeFor("training", "adam_eps"),
                 "training.adam_eps must be positive",
                 "Megatron's default is 1e-8");
  return llvm::Error::success();
}

/// Training and data.
llvm::Error Loader::checkTraining() {
  ModelSpec &spec = draft.spec;
  TrainingSpec &t = spec.training;
  for (auto [key, value] : {std::pair{"seq_length", t.seqLength},
                            {"micro_batch_size", t.microBatchSize},
                            {"steps", t.steps}})
    if (value < 1)
      return error(nodeFor("training", key),
                   fmt::format("training.{} must be at least 1", key),
                   "give a positive count");
  if (t.lrDecaySteps < 0)
    return error(nodeFor("training", "lr_decay_steps"),
                 "training.lr_decay_steps cannot be negative",
                 "use 0 to decay over training.steps");
  if (t.warmupSteps < 0)
    return error(nodeFor("training", "warmup_steps"),
                 "training.warmup_steps cannot be negative",
                 "use 0 for no warm-up");
  if (!(t.lr > 0))
    return error(nodeFor("training", "lr"), "training.lr must be positive",
                 "1e-3 is a reasonable start for small models");
  if (t.minLr < 0 || t.minLr > t.lr)
    return error(
        nodeFor("training", "min_lr"),
        fmt::format("training.min_lr must be between 0 and lr ({})", t.lr),
        "the learning rate decays from lr to min_lr");
  if (t.weightDecay < 0)
    return error(nodeFor("training", "weight_decay"),
                 "training.weight_decay cannot be negative",
                 "use 0 for no weight decay");
  if (!(t.gradClip >= 0))
    return error(nodeFor("training", "grad_clip"),
                 "training.grad_clip cannot be negative",
                 "use 0 to switch clipping off");
  if (llvm::Error err = checkLrSchedule())
    return err;
  if (llvm::Error err = checkAdam())
    return err;
  std::optional<TrainingPrecision> dtype = parsePrecision(draft.dtype);
  if (!dtype)
    return error(nodeFor("training", "dtype"),
                 fmt::format("unknown dtype '{}'", draft.dtype),
                 "use fp32 or bf16");
  t.dtype = *dtype;
  std::optional<rt::Target> target = rt::parseTarget(draft.target);
  if (!target)
    return error(nodeFor("training", "target"),
                 fmt::format("unknown target '{}'", draft.target),
                 "use cpu (C++ over OpenBLAS) or cuda (CUDA C++ over cuBLAS)");
  t.target = *target;
  std::optional<DataFormat> format = parseDataFormat(draft.format);
  if (!format)
    return error(nodeFor("data", "format"),
                 fmt::format("unknown data format '{}'", draft.format),
                 "use text (raw bytes), indexed (Megatron .bin/.idx), jsonl "
                 "(one sample per line) or mock (Megatron's mock SFT data)");
  spec.data.format = *format;
  if (auto err = checkSplit())
    return err;
  return checkPacking();
}

/// data.split (Megatron's --split, docs/data.md): parts of a data set's
/// documents, so only data made of documents splits.
llvm::Error Loader::checkSplit() {
  const DataSpec &d = draft.spec.data;
  if (d.split.empty())
    return llvm::Error::success();
  yaml::Node *node = nodeFor("data", "split");
  if (auto split = parseSplit(d.split); !split)
    return node ? scalarError(node, split.takeError())
                : error(
                      node,
                      fmt::format("'{}': {}", d.split, split.problem().message),
                      split.problem().help);
  if (d.format == DataFormat::Text || d.format == DataFormat::Mock)
    return error(node,
                 fmt::format("{} data has no documents to split into train, "
                             "validation and test parts",
                             dataFormatName(d.format)),
                 "split Megatron's indexed data (data.format: indexed; `hypipe "
                 "data prepare` makes it from JSON Lines) or JSON Lines "
                 "(data.format: jsonl), or remove data.split");
  return llvm::Error::success();
}

/// Sequence packing (docs/data.md).
llvm::Error Loader::checkPacking() {
  ModelSpec &spec = draft.spec;
  DataSpec &d = spec.data;
  const int64_t ranks = spec.parallel.dp * spec.parallel.pp;
  if (!d.packing) {
    for (const char *key :
         {"max_tokens_per_microbatch", "scheduler", "global_batch_size",
          "min_bin_count", "bin_count_multiple", "truncate"})
      if (valueNodes.count(std::string("data.") + key))
        return error(nodeFor("data", key),
                     fmt::format("data.{} is a packing option, and packing "
                                 "is off",
                                 key),
                     "set data.packing: true");
    if (d.format == DataFormat::Jsonl || d.format == DataFormat::Mock)
      return error(nodeFor("data", "format"),
                   fmt::format("{} data has samples of many lengths, which "
                               "hypipe trains packed",
                               dataFormatName(d.format)),
                   "set data.packing: true");
    if (!d.mock.empty())
      return error(nodeFor("data", "mock"),
                   "data.mock configures the mock dataset of data.format: "
                   "mock",
                   "set data.format: mock and data.packing: true");
    return llvm::Error::success();
  }
  if (d.format == DataFormat::Text)
    return error(nodeFor("data", "format"),
                 "text data is one stream of bytes without samples to pack",
                 "use jsonl, indexed (one sample per document) or mock data, "
                 "or set data.packing: false");
  if (spec.training.microBatchSize != 1)
    return error(nodeFor("training", "micro_batch_size"),
                 "a packed microbatch is one row of samples (THD), so "
                 "training.micro_batch_size must be 1",
                 "size microbatches with data.max_tokens_per_microbatch");
  int64_t budget = d.maxTokensPerMicrobatch.value_or(spec.training.seqLength);
  if (budget < 1)
    return error(nodeFor("data", "max_tokens_per_microbatch"),
                 "data.max_tokens_per_microbatch must be at least 1",
                 "give the tokens one microbatch holds, e.g. 4096");
  // The compiled shapes are [budget, hidden]: a microbatch holds up to
  // `budget` tokens of any number of samples.
  spec.training.seqLength = budget;
  d.maxTokensPerMicrobatch = budget;
  if (!packing::parseScheduler(d.scheduler))
    return error(nodeFor("data", "scheduler"),
                 fmt::format("unknown packing scheduler '{}'", d.scheduler),
                 fmt::format("use {}", packing::schedulerNames()));
  for (auto [key, value] : {std::pair{"global_batch_size", d.globalBatchSize},
                            {"min_bin_count", d.minBinCount},
                            {"bin_count_multiple", d.binCountMultiple}})
    if (value && *value < 1)
      return error(nodeFor("data", key),
                   fmt::format("data.{} must be at least 1", key),
                   "give a positive count");
  if (!d.minBinCount)
    d.minBinCount = ranks;
  if (!d.binCountMultiple)
    d.binCountMultiple = ranks;
  if (*d.binCountMultiple % spec.parallel.dp != 0)
    return error(nodeFor("data", "bin_count_multiple"),
                 fmt::format("data.bin_count_multiple ({}) must be a multiple "
                             "of dp ({}) so that every data-parallel rank "
                             "gets as many microbatches",
                             *d.binCountMultiple, spec.parallel.dp),
                 fmt::format("use {} (dp x pp) or another multiple of {}",
                             ranks, spec.parallel.dp));
  // The global batch as the spec or --global-batch-size gave it (nodeFor
  // names the flag), else the packing switch its default follows.
  const bool batchGiven = valueNodes.count("data.global_batch_size") ||
                          overridden.count("data.global_batch_size");
  auto batchNode = [&] {
    return batchGiven ? nodeFor("data", "global_batch_size")
                      : nodeFor("data", "packing");
  };
  if (!d.globalBatchSize)
    d.globalBatchSize = spec.parallel.dp * spec.parallel.microbatches *
                        spec.training.microBatchSize;
  if (*d.globalBatchSize < *d.minBinCount)
    return error(batchNode(),
                 fmt::format("a step of {} samples cannot fill {} "
                             "microbatches (each holds at least one sample)",
                             *d.globalBatchSize, *d.minBinCount),
                 "raise data.global_batch_size");
  // The bin count is a multiple of bin_count_multiple: at least that many.
  if (*d.globalBatchSize < *d.binCountMultiple)
    return error(
        valueNodes.count("data.bin_count_multiple")
            ? nodeFor("data", "bin_count_multiple")
            : batchNode(),
        fmt::format("a step of {} samples cannot fill {} microbatches (the "
                    "microbatch count is a multiple of "
                    "data.bin_count_multiple, {}; each holds at least one "
                    "sample)",
                    *d.globalBatchSize, *d.binCountMultiple,
                    *d.binCountMultiple),
        "raise data.global_batch_size or lower data.bin_count_multiple");
  if (d.format == DataFormat::Mock) {
    if (d.mock.empty())
      return error(nodeFor("data", "format"),
                   "mock data needs its configuration in data.mock",
                   "data.mock: '{\"mode\": \"distribution\", \"type\": "
                   "\"lognormal\", \"min_seq_len\": 16, \"max_seq_len\": "
                   "512, \"mean_seq_len\": 128, \"lognormal_sigma\": 1.0}'");
    auto mock = packing::parseMockSftConfig(d.mock, budget);
    if (!mock) {
      const Problem &p = mock.problem();
      return error(nodeFor("data", "mock"), "data.mock: " + p.message, p.help);
    }
  } else if (!d.mock.empty()) {
    return error(nodeFor("data", "mock"),
                 "data.mock configures the mock dataset of data.format: mock",
                 "set data.format: mock");
  }
  return llvm::Error::success();
}

/// "attention layers ('*')", "attention, MLP or MoE layers ('*', '-' or
/// 'E')": the layers of `symbols`.
std::string layersOf(std::string_view symbols) {
  std::vector<std::string> names, quoted;
  for (char c : symbols) {
    names.push_back(std::string(layerSymbolName(c)));
    quoted.push_back(fmt::format("'{}'", c));
  }
  return fmt::format("{} layers ({})", orList(names), orList(quoted));
}

llvm::Error Loader::moduleError(const Word &word, llvm::StringRef message,
                                llvm::StringRef help) {
  yaml::Node *at = nodeFor("training.recompute", "modules");
  if (!at || !word.node)
    return error(at, message, help);
  return error(locInScalar(word.node, word.offset),
               std::max<size_t>(word.text.size(), 1), message, help);
}

namespace {

/// A part of a model that cannot split over tp ranks: a layer symbol of the
/// main pattern, '/' for the MTP depths or 'V' for the vocabulary (the
/// embedding and the output layer), and tensorParallelProblem's reason.
struct TensorParallelRefusal {
  char part;
  std::string why;
};

/// The first part of `spec` that cannot split over `tp` ranks: the main
/// layer kinds in pattern order, the vocabulary, then the MTP depths.
std::optional<TensorParallelRefusal>
tensorParallelRefusal(const ModelSpec &spec, int64_t tp) {
  std::string seen;
  for (char symbol : spec.pattern.layers()) {
    if (seen.find(symbol) != std::string::npos)
      continue;
    seen += symbol;
    std::optional<rt::LayerShape> shape = patternLayerShape(spec, symbol);
    std::string why = shape ? rt::tensorParallelProblem(*shape, tp)
                      : tp == 1
                          ? ""
                          : fmt::format("{} layers ('{}') do not split over "
                                        "tensor-parallel ranks yet",
                                        layerSymbolName(symbol), symbol);
    if (!why.empty())
      return TensorParallelRefusal{symbol, why};
  }
  for (const rt::LayerShape &shape :
       {rt::LayerShape(rt::embeddingShape(spec.dims)),
        rt::LayerShape(rt::headShape(spec.dims))})
    if (std::string why = rt::tensorParallelProblem(shape, tp); !why.empty())
      return TensorParallelRefusal{'V', why};
  if (spec.pattern.hasMtp())
    if (std::string why = rt::tensorParallelProblem(
            rt::MtpInputShape{spec.dims.vocab, spec.dims.hidden, 1, false}, tp);
        !why.empty())
      return TensorParallelRefusal{'/', why};
  return std::nullopt;
}

} // namespace

/// Megatron-LM's vocabulary padding: the embedding's and the output
/// layer's rows are model.vocab_size rounded up to a multiple of
/// make_vocab_size_divisible_by x tp (docs/spec.md).
llvm::Error Loader::padVocabulary() {
  ModelSpec &spec = draft.spec;
  // Bounded so that the padded size stays a size the rest of the checks
  // take (SizeBounds.h bounds vocab_size itself).
  constexpr int64_t kMaxDivisor = int64_t(1) << 20;
  if (spec.vocabDivisor < 1 || spec.vocabDivisor > kMaxDivisor)
    return error(nodeForField("model.make_vocab_size_divisible_by"),
                 fmt::format("make_vocab_size_divisible_by ({}) must be "
                             "between 1 and {}",
                             spec.vocabDivisor, kMaxDivisor),
                 "use Megatron-LM's default, 128, or 1 for no padding beyond "
                 "a multiple of tp");
  spec.vocabSize = spec.dims.vocab;
  spec.dims.vocab =
      paddedVocabSize(spec.vocabSize, spec.vocabDivisor, spec.parallel.tp);
  return llvm::Error::success();
}

/// The values in 1..n that divide n (at most `most`), for help texts.
static std::vector<int64_t> divisorsOf(int64_t n, size_t most = 8) {
  std::vector<int64_t> out;
  for (int64_t d = 1; d <= n && out.size() < most; ++d)
    if (n % d == 0)
      out.push_back(d);
  return out;
}

static std::string orList(const std::vector<int64_t> &values) {
  if (values.size() == 1)
    return std::to_string(values.front());
  return fmt::format("{} or {}",
                     fmt::join(values.begin(), values.end() - 1, ", "),
                     values.back());
}

/// Megatron-LM's tensor-parallel rules: every layer kind the pattern uses
/// and the vocabulary split over tp ranks (docs/spec.md), then sequence
/// parallelism's.
llvm::Error Loader::checkTensorParallel() {
  const int64_t tp = draft.spec.parallel.tp;
  if (llvm::Error err = padVocabulary())
    return err;
  if (std::optional<TensorParallelRefusal> refused =
          tensorParallelRefusal(draft.spec, tp))
    return tensorParallelError(refused->part, refused->why);
  return checkSequenceParallel();
}

llvm::Error Loader::tensorParallelError(char part, const std::string &why) {
  const ModelSpec &spec = draft.spec;
  const int64_t tp = spec.parallel.tp;
  const std::string tpText =
      overridden.count("parallel.tp")
          ? fmt::format("--tensor-model-parallel-size is {}", tp)
          : fmt::format("parallel.tp is {}", tp);
  const llvm::StringRef field =
      llvm::StringRef(why).take_until([](char c) { return c == ' '; });
  const bool isWidth = llvm::any_of(
      modelFields(), [&](const Field &f) { return f.name == field; });
  if (isWidth) {
    // A width tp does not divide: point at it where the spec gives it.
    std::vector<int64_t> working;
    for (int64_t candidate = 1; candidate < tp && working.size() < 8;
         ++candidate)
      if (!tensorParallelRefusal(spec, candidate))
        working.push_back(candidate);
    // Usually tp 1 works, and any other below tp is worth naming; an
    // expert grid (parallel.ep) may rule out every smaller tp.
    std::string help = fmt::format("give {} a multiple of {}", field.str(), tp);
    if (working.size() == 1)
      help += fmt::format(", or use tp {}", working.front());
    else if (!working.empty())
      help +=
          fmt::format(", or use tp {}, which split every layer of this model",
                      orList(working));
    yaml::Node *at = valueNodes.count(("model." + field).str())
                         ? nodeFor("model", field)
                         : nodeFor("parallel", "tp");
    return error(at, why, help);
  }
  const std::string message = fmt::format("{}, and {}", why, tpText);
  // A layer kind hypipe does not split (the MTP depths and the vocabulary
  // only ever fail on a width, above).
  const std::string help =
      fmt::format("use tp 1 for a model with {} layers ('{}'); "
                  "tensor parallelism splits the M, *, -, E, G, + and D layers",
                  layerSymbolName(part), part);
  if (!patternNode) // a pattern from ratios: tp is what to change
    return error(nodeFor("parallel", "tp"), message, help);
  // The caret under the first such layer.
  return error(locInScalar(patternNode, spec.pattern.text.find(part)), 1,
               message, help);
}

/// Megatron-LM's sequence parallelism: the tensor-parallel ranks each hold
/// a tp-th of a microbatch's tokens outside the layers' split parts.
llvm::Error Loader::checkSequenceParallel() {
  const ModelSpec &spec = draft.spec;
  const int64_t tp = spec.parallel.tp;
  if (!spec.parallel.sequenceParallel)
    return checkMoeNeedsSequenceParallel();
  if (tp == 1)
    return error(nodeFor("parallel", "sequence_parallel"),
                 "sequence_parallel splits the tokens over the "
                 "tensor-parallel ranks, and parallel.tp is 1",
                 "set parallel.tp above 1 (--tensor-model-parallel-size), "
                 "or remove sequence_parallel");
  // seq_length is the packed budget when packing (checkPacking).
  const int64_t tokens = spec.training.seqLength;
  if (tokens % tp == 0)
    return llvm::Error::success();
  const bool budget =
      spec.data.packing && given("data.max_tokens_per_microbatch");
  const std::string key =
      budget ? "data.max_tokens_per_microbatch" : "training.seq_length";
  const int64_t below = tokens / tp * tp, above = below + tp;
  return error(
      nodeForField(key),
      fmt::format("with sequence_parallel, {} ({}) must be a multiple of tp "
                  "({}): each tensor-parallel rank holds a tp-th of a "
                  "microbatch's tokens",
                  key, tokens, tp),
      below > 0 ? fmt::format("use {} or {}, or remove sequence_parallel",
                              below, above)
                : fmt::format("use {}, or remove sequence_parallel", above));
}

/// What hypipe plan cannot write back yet, at its key: plan replaces the
/// parallel section, so a spec that pins more than plan searches, or packs,
/// is refused by plan (and runs everywhere else).
llvm::Error Loader::notePlannable() {
  const ParallelSpec &par = draft.spec.parallel;
  if (const char *pinned = !par.layout.empty()        ? "parallel.layout"
                           : !par.scheduleCsv.empty() ? "parallel.schedule_csv"
                           : par.firstStageLayers
                               ? "parallel.first_stage_layers"
                           : par.lastStageLayers ? "parallel.last_stage_layers"
                           : draft.spec.data.packing ? "data.packing"
                                                     : nullptr)
    draft.spec.unplannable = llvm::toString(error(
        nodeForField(pinned),
        fmt::format("hypipe plan does not plan a spec with {} yet", pinned),
        pinned == std::string("data.packing")
            ? "plan the spec's unpacked twin (without data.packing): a "
              "packed step's microbatch count depends on the data"
            : fmt::format("remove {} to let plan choose the layout", pinned)));
  return llvm::Error::success();
}

/// Megatron-LM's expert grid (parallel_state.initialize_model_parallel, MoE
/// parallel folding): the MoE layers' experts over ep ranks, each expert's
/// width over etp (tp when left out), on the ranks of each pipeline stage
/// (tp x dp of them, the rest the expert-data-parallel size); and the token
/// dispatcher (docs/expert-parallel.md).
llvm::Error Loader::checkExpertParallel() {
  ModelSpec &spec = draft.spec;
  ParallelSpec &par = spec.parallel;
  std::optional<MoeDispatcher> dispatcher =
      parseMoeDispatcher(draft.moeDispatcher);
  if (!dispatcher)
    return error(nodeForField("model.moe_token_dispatcher_type"),
                 fmt::format("unknown moe_token_dispatcher_type '{}'",
                             draft.moeDispatcher),
                 draft.moeDispatcher == "flex"
                     ? "hypipe has no DeepEP: use allgather (Megatron-LM's "
                       "default) or alltoall"
                     : "use allgather (Megatron-LM's default) or alltoall");
  spec.moeDispatcher = *dispatcher;
  for (auto [key, value] :
       {std::pair{"ep", std::optional<int64_t>(par.ep)}, {"etp", draft.etp}})
    if (value && *value < 1)
      return error(nodeForField(fmt::format("parallel.{}", key)),
                   fmt::format("parallel.{} must be at least 1", key),
                   "1 switches that kind of parallelism off");
  par.etp = draft.etp.value_or(par.tp);
  const std::string used = spec.pattern.layers() + spec.pattern.mtp;
  const bool hasMoe = used.find('E') != std::string::npos;
  if (!hasMoe) {
    if (par.ep > 1)
      return error(nodeForField("parallel.ep"),
                   fmt::format("parallel.ep ({}) spreads the experts of MoE "
                               "layers ('E') over ranks, and the model has "
                               "none",
                               par.ep),
                   "remove parallel.ep (--expert-model-parallel-size), or "
                   "add E layers to the pattern");
    return llvm::Error::success();
  }
  const int64_t experts = spec.dims.numExperts;
  if (experts % par.ep != 0)
    return error(
        nodeForField("parallel.ep"),
        fmt::format("num_moe_experts ({}) must be a multiple of parallel.ep "
                    "({}): each expert-parallel rank holds num_moe_experts / "
                    "ep experts",
                    experts, par.ep),
        fmt::format("use ep {}, which divide the experts",
                    orList(divisorsOf(experts))));
  const int64_t ffn = spec.dims.moeFfnHidden;
  if (ffn % par.etp != 0)
    return error(
        nodeForField(draft.etp ? "parallel.etp" : "parallel.tp"),
        fmt::format("moe_ffn_hidden_size ({}) must be a multiple of the "
                    "expert tensor-parallel size, parallel.etp ({}{})",
                    ffn, par.etp,
                    draft.etp ? "" : ": parallel.tp, as etp is left out"),
        fmt::format("set parallel.etp to {}", orList(divisorsOf(ffn))));
  const int64_t stageRanks = par.tp * par.dp, expertRanks = par.etp * par.ep;
  if (stageRanks % expertRanks != 0) {
    std::vector<int64_t> fits;
    for (int64_t ep : divisorsOf(experts, 64))
      if (ep > 1 && stageRanks % (par.etp * ep) == 0)
        fits.push_back(ep);
    const std::string help =
        fits.empty()
            ? fmt::format("use more data-parallel ranks (dp), a smaller "
                          "etp, or ep 1 (every expert on every rank)")
            : fmt::format("use ep {} with etp {}, or more data-parallel "
                          "ranks (dp)",
                          orList(fits), par.etp);
    return error(
        nodeForField("parallel.ep"),
        fmt::format("etp x ep ({} x {} = {}) must divide tp x dp ({} x {} = "
                    "{}), the ranks of each pipeline stage: Megatron-LM's "
                    "expert grid lays the experts over those ranks",
                    par.etp, par.ep, expertRanks, par.tp, par.dp, stageRanks),
        help);
  }
  if (!rt::runsExpertGrid(par.tp, par.etp, par.ep))
    draft.spec.unrunnable = llvm::toString(error(
        nodeForField(draft.etp ? "parallel.etp" : "parallel.ep"),
        fmt::format("hypipe-run runs an expert grid of etp x ep = m x tp "
                    "ranks with ep > 1 when m > 1, and this one is ep {}, "
                    "etp {} with tp {} (explain and plan cost it as "
                    "Megatron-LM lays it out)",
                    par.ep, par.etp, par.tp),
        fmt::format("for hypipe-run use etp {} (tp / ep), or leave out "
                    "parallel.ep and parallel.etp; hypipe plan lays out "
                    "the grids it runs",
                    std::max<int64_t>(1, par.tp / par.ep))));
  return llvm::Error::success();
}

/// Megatron-LM splits MoE layers over tensor-parallel ranks only with
/// sequence parallelism (megatron/training/arguments.py refuses the rest).
llvm::Error Loader::checkMoeNeedsSequenceParallel() {
  const ModelSpec &spec = draft.spec;
  const int64_t tp = spec.parallel.tp;
  const std::string used = spec.pattern.layers() + spec.pattern.mtp;
  if (tp == 1 || used.find('E') == std::string::npos)
    return llvm::Error::success();
  const std::string tpText =
      overridden.count("parallel.tp")
          ? fmt::format("--tensor-model-parallel-size is {}", tp)
          : fmt::format("parallel.tp is {}", tp);
  const std::string message = fmt::format(
      "MoE layers ('E') split over tensor-parallel ranks only with sequence "
      "parallelism, as Megatron-LM requires, and {} without it",
      tpText);
  const std::string help =
      "set parallel.sequence_parallel: true (--sequence-parallel), or use "
      "tp 1";
  if (!patternNode || spec.pattern.text.find('E') == std::string::npos)
    return error(nodeFor("parallel", "tp"), message, help);
  return error(locInScalar(patternNode, spec.pattern.text.find('E')), 1,
               message, help);
}

/// training.recompute by Megatron-LM's rules for its --recompute-* flags
/// (megatron/training/arguments.py, transformer_config.py), and each module
/// of selective recompute against the layers of the model (MTP's included).
llvm::Error Loader::checkRecompute() {
  const llvm::StringRef section = "training.recompute";
  RecomputeSpec &r = draft.spec.training.recompute;
  auto isGiven = [&](llvm::StringRef key) {
    return given((section + "." + key).str());
  };
  auto unknown = [&](llvm::StringRef key, llvm::StringRef value,
                     std::string help) {
    return error(nodeFor(section, key),
                 fmt::format("unknown recompute {} '{}'", key.str(), value),
                 help);
  };

  std::optional<RecomputeGranularity> granularity =
      parseRecomputeGranularity(draft.recomputeGranularity);
  if (!granularity)
    return unknown("granularity", draft.recomputeGranularity,
                   spellingHelp(draft.recomputeGranularity,
                                kRecomputeGranularities,
                                recomputeGranularityName));
  r.granularity = *granularity;
  if (r.granularity == RecomputeGranularity::None) {
    for (const char *key : {"method", "num_layers", "modules"})
      if (isGiven(key)) {
        const char *needed =
            llvm::StringRef(key) == "modules" ? "selective" : "full";
        return error(
            nodeFor(section, key),
            fmt::format("training.recompute.{} is set, but "
                        "training.recompute.granularity is none",
                        key),
            fmt::format("add granularity: {0} (--recompute-granularity {0}), "
                        "or remove {1}",
                        needed, key));
      }
    return llvm::Error::success();
  }

  if (r.granularity == RecomputeGranularity::Selective) {
    for (const char *key : {"method", "num_layers"})
      if (isGiven(key))
        return error(nodeFor(section, key),
                     fmt::format("granularity: selective takes no {}: it "
                                 "says which layers full recompute "
                                 "recomputes whole",
                                 key),
                     fmt::format("remove {}, or set granularity: full", key));
    return checkRecomputeModules();
  }

  // Full recompute.
  if (isGiven("modules"))
    return error(nodeFor(section, "modules"),
                 "training.recompute.modules are selective recompute's, and "
                 "granularity: full recomputes whole layers",
                 "remove modules (method and num_layers say which layers "
                 "full recompute recomputes), or set granularity: selective");
  if (!isGiven("method"))
    return error(nodeFor(section, "granularity"),
                 "granularity: full needs training.recompute.method",
                 "add method: uniform (the stage's layers in chunks of "
                 "num_layers, only each chunk's input kept) or method: block "
                 "(the first num_layers layers of each stage recomputed, the "
                 "others kept)");
  std::optional<RecomputeMethod> method =
      parseRecomputeMethod(draft.recomputeMethod);
  if (!method)
    return unknown("method", draft.recomputeMethod,
                   spellingHelp(draft.recomputeMethod, kRecomputeMethods,
                                recomputeMethodName));
  r.method = *method;
  const std::string layersHelp =
      "give num_layers: N, at least 1: the layers of a chunk (uniform), or "
      "of each stage recomputed (block; more than a stage has recomputes "
      "them all)";
  if (!draft.recomputeNumLayers)
    return error(nodeFor(section, "granularity"),
                 "granularity: full needs training.recompute.num_layers",
                 layersHelp);
  if (*draft.recomputeNumLayers < 1)
    return error(nodeFor(section, "num_layers"),
                 fmt::format("training.recompute.num_layers must be at least "
                             "1, got {}",
                             *draft.recomputeNumLayers),
                 layersHelp);
  // Past a model's most layers it can only be a slip (Megatron recomputes
  // every layer of a stage at any count above the stage's).
  if (*draft.recomputeNumLayers > kMaxLayers)
    return error(nodeFor(section, "num_layers"),
                 tooLarge("training.recompute.num_layers",
                          *draft.recomputeNumLayers, kMaxLayers),
                 "give at most the layers of a stage: as many recompute all "
                 "of them");
  r.numLayers = *draft.recomputeNumLayers;
  return llvm::Error::success();
}

/// Selective recompute's modules: Megatron's names, each once, each in a
/// layer of the model; none given is Megatron's default, core_attn.
llvm::Error Loader::checkRecomputeModules() {
  RecomputeSpec &r = draft.spec.training.recompute;
  const std::string layers =
      draft.spec.pattern.layers() + draft.spec.pattern.mtp;
  auto inModel = [&](RecomputeModule m) {
    return layers.find_first_of(recomputeModuleLayers(m)) != std::string::npos;
  };
  std::vector<std::string> held;
  for (RecomputeModule m : kRecomputeModules)
    if (inModel(m))
      held.push_back(recomputeModuleName(m));
  // What to recompute instead, in this model.
  std::string help =
      held.empty()
          ? "no module selective recompute knows is in this model's layers: "
            "use granularity: full"
          : fmt::format("recompute what this model's layers hold ({}), or use "
                        "granularity: full",
                        orList(held));
  if (layers.find('M') != std::string::npos)
    help += "; Mamba layers ('M') hold no such module, and only full "
            "recompute recomputes them";

  if (given("training.recompute.modules") && draft.recomputeModules.empty())
    return error(nodeFor("training.recompute", "modules"),
                 "training.recompute.modules is empty",
                 "name the modules to recompute, e.g. [core_attn, mlp], or "
                 "remove the key for Megatron's default, core_attn");
  if (draft.recomputeModules.empty()) {
    r.modules = {RecomputeModule::CoreAttn};
    if (!inModel(RecomputeModule::CoreAttn))
      return error(
          nodeFor("training.recompute", "granularity"),
          fmt::format(
              "granularity: selective without modules recomputes "
              "core_attn (Megatron's default), which {} hold, and "
              "the model has none",
              layersOf(recomputeModuleLayers(RecomputeModule::CoreAttn))),
          "give training.recompute.modules: " + help);
    return llvm::Error::success();
  }
  for (const Word &word : draft.recomputeModules) {
    std::optional<RecomputeModule> m = parseRecomputeModule(word.text);
    if (!m)
      return moduleError(
          word, fmt::format("unknown recompute module '{}'", word.text),
          spellingHelp(word.text, kRecomputeModules, recomputeModuleName));
    if (llvm::is_contained(r.modules, *m))
      return moduleError(
          word,
          fmt::format("training.recompute.modules names {} twice", word.text),
          "give each module once");
    if (*m == RecomputeModule::SharedExperts)
      return moduleError(word,
                         "training.recompute.modules names shared_experts, "
                         "but hypipe's MoE layers ('E') have no shared "
                         "experts",
                         "remove shared_experts; " + help);
    if (!inModel(*m))
      return moduleError(
          word,
          fmt::format("training.recompute.modules names {}, which {} hold, "
                      "and the model has none",
                      word.text, layersOf(recomputeModuleLayers(*m))),
          help);
    r.modules.push_back(*m);
  }
  return llvm::Error::success();
}

/// The automatic split, for a pattern without `|`.
llvm::Error Loader::checkPartition() {
  ModelSpec &spec = draft.spec;
  ParallelSpec &par = spec.parallel;
  std::optional<schedule::CommKind> comm = schedule::parseCommKind(draft.comm);
  if (!comm)
    return error(nodeFor("parallel", "comm"),
                 fmt::format("unknown transport '{}'", draft.comm),
                 fmt::format("parallel.comm is one of {} (docs/runtime.md)",
                             schedule::kCommKindList));
  par.comm = *comm;
  std::optional<PartitionObjective> objective = parseObjective(draft.objective);
  if (!objective)
    return error(
        nodeFor("parallel", "objective"),
        fmt::format("unknown partition objective '{}'", draft.objective),
        "use time (balance FLOPs) or params (balance parameters)");
  par.objective = *objective;
  if (par.maxMemoryGiB && !(*par.maxMemoryGiB > 0))
    return error(nodeFor("parallel", "max_memory_gib"),
                 "parallel.max_memory_gib must be positive",
                 "give the memory of one device in GiB, e.g. 80");
  if (spec.autoPartitioned) {
    auto balanced = autoPartition(spec.partitionRequest());
    if (!balanced) {
      yaml::Node *at =
          par.maxMemoryGiB
              ? nodeFor("parallel", "max_memory_gib")
              : (patternNode ? patternNode : nodeFor("model", "pattern"));
      std::string message = toString(balanced.takeError());
      auto [first, help] = llvm::StringRef(message).split("; ");
      return error(at, first, help);
    }
    spec.placement = std::move(balanced->placement);
  } else if (par.maxMemoryGiB || valueNodes.count("parallel.objective")) {
    return error(
        nodeFor("parallel", par.maxMemoryGiB ? "max_memory_gib" : "objective"),
        "objective and max_memory_gib steer the automatic split, but this spec "
        "places its layers itself",
        "remove them, or remove the '|' (or layout / first/last stage layers) "
        "to let "
        "hypipe split the pattern");
  }
  return llvm::Error::success();
}

/// "pipeline rank R would hold X GiB, more than ...: P GiB of parameters
/// ..., A GiB of activations (N microbatches in flight)".
std::string rankMemoryTooLarge(int64_t rank, const RankMemory &memory,
                               double inFlight) {
  auto gib = [](int64_t bytes) { return double(bytes) / double(1 << 30); };
  return fmt::format(
      "pipeline rank {} would hold {:.1f} GiB, more than the {:.0f} GiB one "
      "rank may hold: {:.1f} GiB of parameters with their gradients and "
      "optimizer state, {:.1f} GiB of activations ({:g} microbatch{} in "
      "flight)",
      rank, gib(memory.total()), gib(kMaxRankBytes), gib(memory.parameters),
      gib(memory.activations), inFlight, inFlight == 1 ? "" : "es");
}

/// Each rank's memory estimate (docs/cost-model.md) within the most one
/// rank may hold; past it, the error points at what drives it: the tokens
/// of a microbatch for activations, the width for parameters.
llvm::Error Loader::checkMemory() {
  const AutoPartitionRequest request = draft.spec.partitionRequest();
  std::vector<RankMemory> ranks =
      rankMemories(modelItems(request.dims, request.settings, request.layers,
                              request.mtpLayers, request.mtpDepths),
                   draft.spec.placement, request);
  auto worst = std::max_element(ranks.begin(), ranks.end(),
                                [](const RankMemory &a, const RankMemory &b) {
                                  return a.total() < b.total();
                                });
  if (worst == ranks.end() || worst->total() <= kMaxRankBytes)
    return llvm::Error::success();
  const int64_t rank = worst - ranks.begin();
  std::string message = rankMemoryTooLarge(
      rank, *worst,
      peakMicrobatchesInFlight(request.schedule, request.pp, request.vpp,
                               request.microbatches, rank));
  if (worst->activations <= worst->parameters)
    return error(nodeFor("model", "hidden_size"), message,
                 "spread the layers over more pipeline ranks (parallel.pp), "
                 "shard the optimizer state (parallel.distributed_optimizer "
                 "with dp > 1), or use a narrower model");
  // Packed, the tokens of a microbatch are data.max_tokens_per_microbatch
  // where the spec gives it.
  return error(valueNodes.count("data.max_tokens_per_microbatch")
                   ? nodeFor("data", "max_tokens_per_microbatch")
                   : nodeFor("training", "seq_length"),
               message,
               "use fewer tokens a microbatch (seq_length, micro_batch_size) "
               "or more pipeline ranks (parallel.pp) for the layers; every "
               "microbatch in flight keeps its activations, a row per token");
}

} // namespace

int64_t ModelSpec::lossChunkRows(int64_t tokens) const {
  if (crossEntropyFusionImpl != "linear")
    return 0;
  return rt::lossChunkRows(tokens, dims.vocab / parallel.tp, dims.hidden,
                           crossEntropyChunkTokens.value_or(0));
}

AutoPartitionRequest ModelSpec::partitionRequest() const {
  AutoPartitionRequest r;
  r.dims = dims;
  r.settings.seqLength = training.seqLength;
  r.settings.microBatchSize = training.microBatchSize;
  r.settings.bf16 = training.dtype == TrainingPrecision::Bf16;
  r.settings.optimizerShards = parallel.distributedOptimizer ? parallel.dp : 1;
  r.settings.tp = parallel.tp;
  r.settings.sequenceParallel = parallel.sequenceParallel;
  r.settings.ep = parallel.ep;
  r.settings.etp = parallel.etp;
  r.settings.capacityFactor = moeExpertCapacityFactor.value_or(0.0);
  r.settings.linearCrossEntropy = crossEntropyFusionImpl == "linear";
  r.layers = pattern.layers();
  r.mtpLayers = pattern.mtp;
  r.mtpDepths = pattern.mtpDepths;
  r.pp = placement.pp;
  r.vpp = placement.vpp;
  r.schedule = parallel.schedule;
  r.microbatches = parallel.microbatches;
  r.objective = parallel.objective;
  r.maxMemoryGiB = parallel.maxMemoryGiB;
  r.recompute = training.recompute;
  return r;
}

llvm::Expected<ModelSpec> parseSpec(llvm::StringRef text,
                                    llvm::StringRef bufferName,
                                    const SpecOverrides &overrides) {
  Loader loader(llvm::MemoryBuffer::getMemBufferCopy(text, bufferName),
                overrides);
  return loader.load();
}

std::vector<std::string> specInputs(const ModelSpec &spec) {
  std::vector<std::string> inputs = {spec.file};
  // The mock dataset's lengths file (data.mock's mode "file").
  const std::string mockLengths = packing::mockLengthsFile(spec.data.mock);
  for (const std::string &p :
       {spec.data.path, spec.parallel.scheduleCsv, spec.training.initFrom,
        spec.data.tokenizer == kBytesTokenizer ? std::string()
                                               : spec.data.tokenizer,
        mockLengths}) {
    if (p.empty())
      continue;
    llvm::SmallString<256> resolved(p);
    if (!llvm::sys::path::is_absolute(resolved)) {
      resolved = llvm::sys::path::parent_path(spec.file);
      llvm::sys::path::append(resolved, p);
    }
    inputs.push_back(resolved.str().str());
  }
  return inputs;
}

llvm::Expected<ModelSpec> loadSpec(llvm::StringRef path,
                                   const SpecOverrides &overrides) {
  Expected<std::string> text = files::readBounded(path.str(), files::kSpec);
  if (!text) {
    Problem p = text.takeError().takeProblem();
    if (p.help == files::kReadHelp)
      p.help = "check the path; bundled examples are in examples/";
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "error: " + p.message + "\nhelp: " + p.help +
                                       "\n");
  }
  return parseSpec(*text, path, overrides);
}

} // namespace hypipe
