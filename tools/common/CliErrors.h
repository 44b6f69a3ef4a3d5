//===- CliErrors.h - usage errors that say what was meant -----------------===//
//
// CLI11 answers a mistyped or foreign option with "The following arguments
// were not expected: 2 --ppp". These say which option was not understood
// and what to write instead: the nearest option of the command ("did you
// mean --pp?"), or, for a Megatron-LM flag whose meaning hypipe has under
// another name or not at all, what hypipe does instead. Shared by hypipe
// and hypipe-run.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_TOOLS_COMMON_CLIERRORS_H
#define HYPIPE_TOOLS_COMMON_CLIERRORS_H

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace hypipe::cli {

/// Megatron-LM flags that hypipe does not take under that name, and what to
/// do instead. (Those with the same meaning are aliases of hypipe's
/// options, e.g. --pipeline-model-parallel-size for --pp.)
struct ForeignFlag {
  std::string_view flag, instead;
};

inline constexpr ForeignFlag kMegatronFlags[] = {
    {"--num-layers-per-virtual-pipeline-stage",
     "Megatron counts layers per virtual stage; hypipe's --vpp counts "
     "virtual stages per rank (--virtual-pipeline-model-parallel-size), and "
     "the layers of each stage come from the pattern's '|' (or the "
     "partitioner)"},
    {"--num-virtual-stages-per-pipeline-rank",
     "hypipe's --vpp is the number of virtual stages per rank"},
    {"--context-parallel-size", "context parallelism is not built yet"},
    {"--fp16", "hypipe trains in fp32 or bf16: --bf16 (or --dtype bf16)"},
    {"--num-layers",
     "the layers are the spec's model.pattern, one symbol a layer"},
    {"--hybrid-override-pattern", "the pattern is the spec's model.pattern"},
    {"--hidden-size", "the model's sizes are the spec's model section "
                      "(model.hidden_size)"},
    {"--ffn-hidden-size", "the spec's model.ffn_hidden_size"},
    {"--num-attention-heads", "the spec's model.num_attention_heads"},
    {"--seq-length", "the spec's training.seq_length"},
    {"--data-path", "--data FILE, or the spec's data.path"},
    {"--tokenizer-type",
     "hypipe data prepare takes --tokenizer MODEL (a SentencePiece model, as "
     "Megatron's GPTSentencePieceTokenizer) or --tokenizer bytes; training "
     "reads the token ids of the spec's data.format"},
    {"--recompute-granularity",
     "activation recompute is the spec's training.recompute: hypipe "
     "compile, explain and train take --recompute-granularity"},
    {"--save", "hypipe train saves in RUN/ckpt: give the run directory "
               "with --run-dir (hypipe-run takes --save DIR)"},
};

/// Edit distance between two option names (insertions, deletions,
/// substitutions), for the "did you mean" of a mistyped one.
inline size_t editDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1,
                         diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

/// The command the user named (the deepest subcommand parsed) and its
/// name as typed, for "hypipe train --help".
inline std::pair<const CLI::App *, std::string>
namedCommand(const CLI::App &app) {
  std::string path = app.get_name();
  path = path.substr(path.find_last_of('/') + 1); // argv[0]'s base name
  const CLI::App *command = &app;
  for (bool deeper = true; deeper;) {
    deeper = false;
    for (const CLI::App *sub : command->get_subcommands())
      if (sub->parsed()) {
        command = sub;
        path += " " + sub->get_name();
        deeper = true;
        break;
      }
  }
  return {command, path};
}

/// The long options of the command the user named, with their dashes.
inline std::vector<std::string> optionNames(const CLI::App &app) {
  std::vector<std::string> names;
  for (const CLI::Option *opt : namedCommand(app).first->get_options())
    for (const std::string &name : opt->get_lnames())
      names.push_back("--" + name);
  return names;
}

/// "error: ... help: ..." for one option the command does not take.
inline std::string unknownOptionMessage(const CLI::App &app,
                                        const std::string &arg) {
  const std::string flag = arg.substr(0, arg.find('='));
  const std::string help =
      fmt::format("`{} --help` lists the options", namedCommand(app).second);
  for (const ForeignFlag &f : kMegatronFlags)
    if (flag == f.flag)
      return fmt::format("error: {} is Megatron-LM's, and hypipe takes no "
                         "option of that meaning\nhelp: {}; {}\n",
                         flag, f.instead, help);
  std::string best;
  size_t bestDistance = std::string::npos;
  for (const std::string &name : optionNames(app)) {
    size_t d = editDistance(flag, name);
    if (d < bestDistance) {
      bestDistance = d;
      best = name;
    }
  }
  // Close enough to be a slip: a third of the name at most.
  if (!best.empty() && bestDistance <= std::max<size_t>(2, flag.size() / 3))
    return fmt::format("error: unknown option {}\nhelp: did you mean {}? {}\n",
                       flag, best, help);
  return fmt::format("error: unknown option {}\nhelp: {}\n", flag, help);
}

/// Prints a usage error of `app` and returns the exit status: 0 for --help
/// and --version, 2 for a usage error. Unknown options are named one by one
/// with what was meant; other errors keep CLI11's words.
inline int reportParseError(CLI::App &app, const CLI::ParseError &e) {
  if (e.get_exit_code() == 0)
    return app.exit(e);
  if (dynamic_cast<const CLI::ExtrasError *>(&e)) {
    // "The following arguments were not expected: a b": the options among
    // them (the rest are their values, taken for positionals).
    std::string text = e.what();
    std::istringstream words(text.substr(text.find(':') + 1));
    std::vector<std::string> options;
    for (std::string w; words >> w;)
      if (w.size() > 1 && w[0] == '-' && !std::isdigit((unsigned char)w[1]))
        options.push_back(w);
    if (!options.empty()) {
      // CLI11 lists them last first.
      for (auto it = options.rbegin(); it != options.rend(); ++it)
        std::cerr << unknownOptionMessage(app, *it);
      return 2;
    }
  }
  // CLI11's "bf16 was given a disallowed flag override": a store_true flag
  // given a value (--bf16=false), which Megatron-LM's argparse refuses too.
  const std::string text = e.what();
  const std::string override = " was given a disallowed flag override";
  if (const size_t at = text.find(override);
      dynamic_cast<const CLI::ArgumentMismatch *>(&e) &&
      at != std::string::npos) {
    std::string name = text.substr(0, at);
    name = (name.size() == 1 ? "-" : "--") + name;
    std::cerr << "error: " << name
              << " is a flag and takes no value\nhelp: give " << name
              << " alone to set it, and leave it out not to\n";
    return 2;
  }
  app.exit(e);
  return 2;
}

} // namespace hypipe::cli

#endif
