//===- DataCommand.cpp - hypipe data prepare: JSON Lines to tokens --------===//
//
// Megatron-LM's tools/preprocess_data.py in C++ (docs/data.md): each line of
// a JSON Lines file is a document, its text field (a string, or a list of
// strings: one sequence each) tokenised by a SentencePiece model or as
// bytes, and written as Megatron's indexed dataset, PREFIX.bin and
// PREFIX.idx. Worker threads tokenise a chunk of lines at a time; the main
// thread writes each chunk in input order, so the output does not depend on
// the number of workers.
//
//===----------------------------------------------------------------------===//
#include "core/data/Tokenizer.h"
#include "core/io/Files.h"
#include "core/io/LineError.h"
#include "runtime/formats/MegatronDatasetWriter.h"
#include "tools/common/CliChecks.h"
#include "tools/hypipe/Commands.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <thread>

namespace hypipe::cli {

namespace {

struct PrepareOptions {
  std::string input, tokenizer, prefix;
  std::string jsonKey = "text";
  bool appendEod = false;
  int workers = 1;
  int64_t logInterval = 1000;
};

/// One line, tokenised: a document of zero or more sequences, a blank line
/// (skipped), or what is wrong with it (its offset: the column at fault).
struct EncodedLine {
  bool blank = false;
  std::vector<int32_t> tokens, sequenceLengths;
  std::optional<Problem> problem;
};

EncodedLine lineProblem(std::string message, std::string help, size_t column) {
  EncodedLine encoded;
  encoded.problem = Problem{std::move(message), std::move(help), column, 1};
  return encoded;
}

/// What Megatron's Encoder.encode does with one line: the key's string is
/// one sequence, a list's strings one sequence each; a sequence that
/// tokenises to nothing is dropped; with an end-of-document id the last
/// sequence of a non-empty document gains it.
EncodedLine encodeLine(const std::string &line, const std::string &key,
                       const Tokenizer &tokenizer, std::optional<int32_t> eod) {
  EncodedLine encoded;
  if (line.find_first_not_of(" \t\r") == std::string::npos) {
    encoded.blank = true;
    return encoded;
  }
  const std::string lineHelp = fmt::format(
      "each line is one JSON object with the document in \"{}\", e.g. "
      "{{\"{}\": \"...\"}}",
      key, key);
  // nlohmann's parser takes a NUL for the end of its input: what follows
  // one would be dropped without a word.
  if (const size_t nul = line.find('\0'); nul != std::string::npos)
    return lineProblem("this line holds a NUL byte, which no JSON text holds",
                       "remove it (a string holds one as \\u0000)", nul);
  nlohmann::json object;
  try {
    object = nlohmann::json::parse(line);
  } catch (const nlohmann::json::parse_error &e) {
    return lineProblem("this line is not valid JSON", lineHelp,
                       e.byte > 0 ? std::min(e.byte - 1, line.size()) : 0);
  }
  if (!object.is_object())
    return lineProblem(fmt::format("this line is a JSON {}, not an object",
                                   object.type_name()),
                       lineHelp, 0);
  auto field = object.find(key);
  if (field == object.end())
    return lineProblem(
        fmt::format("this line has no \"{}\" field", key),
        fmt::format("give every line a \"{}\" string, or name the field "
                    "that holds the text with --json-keys",
                    key),
        0);
  const size_t keyColumn = std::min(line.find('"' + key + '"'), line.size());
  std::vector<const nlohmann::json *> sequences;
  if (field->is_array()) {
    for (const nlohmann::json &sequence : *field)
      sequences.push_back(&sequence);
  } else {
    sequences.push_back(&*field);
  }
  for (size_t s = 0; s < sequences.size(); ++s) {
    if (!sequences[s]->is_string())
      return lineProblem(
          field->is_array()
              ? fmt::format("element {} of \"{}\" is a JSON {}, not a string",
                            s, key, sequences[s]->type_name())
              : fmt::format("\"{}\" is a JSON {}, not a string", key,
                            field->type_name()),
          fmt::format("\"{}\" holds the document's text: a string, or a list "
                      "of strings (one sequence each, as Megatron's "
                      "preprocess_data.py takes them)",
                      key),
          keyColumn);
    const size_t before = encoded.tokens.size();
    if (auto err = tokenizer.encode(
            sequences[s]->get_ref<const std::string &>(), encoded.tokens)) {
      Problem p = err.takeProblem();
      return lineProblem(p.message, "check the text's encoding (UTF-8)",
                         keyColumn);
    }
    if (encoded.tokens.size() > before)
      encoded.sequenceLengths.push_back(
          int32_t(encoded.tokens.size() - before));
  }
  if (eod && !encoded.tokens.empty()) {
    encoded.tokens.push_back(*eod);
    ++encoded.sequenceLengths.back();
  }
  return encoded;
}

/// Tokenises `lines` on `workers` threads (the calling one among them);
/// result `i` belongs to line `i`.
std::vector<EncodedLine> encodeChunk(const std::vector<std::string> &lines,
                                     const PrepareOptions &o,
                                     const Tokenizer &tokenizer,
                                     std::optional<int32_t> eod) {
  std::vector<EncodedLine> encoded(lines.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next++) < lines.size();)
      encoded[i] = encodeLine(lines[i], o.jsonKey, tokenizer, eod);
  };
  std::vector<std::thread> helpers;
  const size_t count = std::min<size_t>(size_t(o.workers), lines.size());
  for (size_t w = 1; w < count; ++w)
    helpers.emplace_back(work);
  work();
  for (std::thread &helper : helpers)
    helper.join();
  return encoded;
}

/// How far the run is: a bar redrawn on a terminal, a line every
/// --log-interval documents otherwise (Megatron's "Processed N documents").
class Progress {
public:
  Progress(uint64_t inputBytes, int64_t logInterval)
      : inputBytes(inputBytes), logInterval(logInterval),
        terminal(::isatty(STDERR_FILENO)), start(Clock::now()) {}

  double seconds() const {
    return std::chrono::duration<double>(Clock::now() - start).count();
  }
  double tokensPerSecond(int64_t tokens) const {
    return double(tokens) / std::max(seconds(), 1e-9);
  }

  void document(int64_t documents, int64_t tokens, uint64_t bytesRead) {
    latest = {documents, tokens, bytesRead};
    if (!terminal) {
      if (documents % logInterval == 0)
        std::cerr << fmt::format("processed {} documents, {} tokens ({:.0f} "
                                 "tokens/s, {} of {})\n",
                                 documents, tokens, tokensPerSecond(tokens),
                                 files::humanBytes(bytesRead),
                                 files::humanBytes(inputBytes));
      return;
    }
    if (Clock::now() - lastDrawn >= std::chrono::milliseconds(100))
      draw();
  }

  /// On a terminal, the bar as it ends and a newline, so that what
  /// follows starts on its own line.
  void end() {
    if (!terminal || ended)
      return;
    draw();
    std::cerr << "\n";
    ended = true;
  }

private:
  using Clock = std::chrono::steady_clock;
  struct Counts {
    int64_t documents = 0, tokens = 0;
    uint64_t bytesRead = 0;
  };

  void draw() {
    lastDrawn = Clock::now();
    const double done =
        inputBytes
            ? std::min(1.0, double(latest.bytesRead) / double(inputBytes))
            : 1;
    const int width = 30, filled = int(done * width);
    std::cerr << fmt::format("\r[{}{}] {:3.0f}%  {} documents  {} tokens  "
                             "{:.0f} tokens/s ",
                             std::string(size_t(filled), '#'),
                             std::string(size_t(width - filled), '.'),
                             done * 100, latest.documents, latest.tokens,
                             tokensPerSecond(latest.tokens))
              << std::flush;
  }

  uint64_t inputBytes;
  int64_t logInterval;
  bool terminal, ended = false;
  Clock::time_point start, lastDrawn;
  Counts latest;
};

int fail(const Problem &p) {
  std::cerr << "error: " << p.message << "\n";
  if (!p.help.empty())
    std::cerr << "help: " << p.help << "\n";
  return 1;
}

int fail(std::string message, std::string help) {
  return fail(Problem{std::move(message), std::move(help), std::nullopt, 1});
}

int runPrepare(const PrepareOptions &o) {
  const std::string inputHelp =
      "give a JSON Lines file: one JSON object a line";
  struct stat st {};
  if (::stat(o.input.c_str(), &st) != 0)
    return fail(fmt::format("cannot read the input '{}': {}", o.input,
                            std::strerror(errno)),
                inputHelp);
  if (!S_ISREG(st.st_mode))
    return fail(fmt::format("the input '{}' is not a regular file", o.input),
                inputHelp);
  std::ifstream in(o.input, std::ios::binary);
  if (!in)
    return fail(fmt::format("cannot read the input '{}': {}", o.input,
                            std::strerror(errno)),
                "check its permissions");
  Expected<std::unique_ptr<Tokenizer>> tokenizer = openTokenizer(o.tokenizer);
  if (!tokenizer)
    return fail(tokenizer.problem());
  std::optional<int32_t> eod;
  if (o.appendEod) {
    eod = (*tokenizer)->eod();
    if (!eod)
      return fail(fmt::format("--append-eod: the tokenizer {} has no "
                              "end-of-document id",
                              (*tokenizer)->description()),
                  "train the model with an end-of-sentence piece "
                  "(spm_train's default --eos_id=2), or leave --append-eod "
                  "out");
  }
  for (const std::string suffix : {".bin", ".idx"})
    if (auto err = files::checkNotAnInput(
            o.prefix + suffix, "the output " + suffix, {o.input, o.tokenizer}))
      return fail(err.problem());
  const int dtypeCode = rt::megatronDtypeCodeFor((*tokenizer)->vocabSize());
  auto writer = rt::MegatronDatasetWriter::create(o.prefix, dtypeCode);
  if (!writer)
    return fail(writer.problem());

  // A chunk is tokenised in parallel, then written in order; its size
  // bounds the lines held in memory.
  constexpr size_t kChunkLines = 4096;
  Progress progress(uint64_t(st.st_size), o.logInterval);
  int64_t lineNumber = 0, documents = 0, tokens = 0;
  uint64_t bytesRead = 0;
  std::vector<std::string> lines;
  std::string line;
  while (in) {
    lines.clear();
    while (lines.size() < kChunkLines && std::getline(in, line))
      lines.push_back(std::move(line));
    std::vector<EncodedLine> encoded = encodeChunk(lines, o, **tokenizer, eod);
    for (size_t i = 0; i < lines.size(); ++i) {
      ++lineNumber;
      bytesRead += lines[i].size() + 1;
      if (encoded[i].problem) {
        progress.end();
        const Problem &p = *encoded[i].problem;
        std::cerr << files::lineError(o.input, lineNumber, lines[i], *p.offset,
                                      p.message, p.help)
                  << fmt::format("\nnote: nothing was written: '{}' and '{}' "
                                 "are as they were\n",
                                 (*writer)->binPath(), (*writer)->idxPath());
        return 1;
      }
      if (encoded[i].blank)
        continue;
      if (auto err = (*writer)->addDocument(encoded[i].tokens,
                                            encoded[i].sequenceLengths)) {
        progress.end();
        return fail(err.problem());
      }
      ++documents;
      tokens += int64_t(encoded[i].tokens.size());
      progress.document(documents, tokens, bytesRead);
    }
  }
  progress.end();
  if (in.bad())
    return fail(fmt::format("cannot read the input '{}' to its end: {}",
                            o.input, std::strerror(errno)),
                "nothing was written; check the file");
  if (auto err = (*writer)->commit())
    return fail(err.problem());
  const rt::MegatronIndex &index = (*writer)->index();
  std::cout << fmt::format(
      "prepared {} documents ({} sequences, {} tokens) of '{}' with {}, {} "
      "worker{}\n",
      documents, index.lengths.size(), tokens, o.input,
      (*tokenizer)->description(), o.workers, o.workers == 1 ? "" : "s");
  std::cout << fmt::format("{:.2f} s, {:.0f} tokens/s\n", progress.seconds(),
                           progress.tokensPerSecond(tokens));
  std::cout << fmt::format("wrote {} ({} bytes, {}) and {}\n",
                           (*writer)->binPath(), (*writer)->binBytes(),
                           rt::megatronDtypeName(dtypeCode),
                           (*writer)->idxPath());
  return 0;
}

} // namespace

void addDataCommand(CLI::App &app, Runner &run) {
  CLI::App *data = app.add_subcommand(
      "data", "Prepare training data (Megatron-LM's preprocess_data.py)");
  data->require_subcommand(1);
  auto o = std::make_shared<PrepareOptions>();
  o->workers = int(std::max(1u, std::thread::hardware_concurrency()));
  CLI::App *prepare = data->add_subcommand(
      "prepare", "Tokenise a JSON Lines file into Megatron's indexed dataset "
                 "(PREFIX.bin and PREFIX.idx)");
  prepare->add_option("input,--input", o->input, "the JSON Lines file")
      ->required();
  prepare
      ->add_option("--tokenizer,--tokenizer-model", o->tokenizer,
                   "a SentencePiece model file, or 'bytes' (each byte a "
                   "token)")
      ->required();
  prepare
      ->add_option("-o,--output-prefix", o->prefix,
                   "writes PREFIX.bin and PREFIX.idx")
      ->required();
  prepare
      ->add_option("--json-keys,--json-key", o->jsonKey,
                   "the field that holds each line's text: a string, or a "
                   "list of strings (one sequence each)")
      ->default_val("text");
  prepare->add_flag("--append-eod", o->appendEod,
                    "end every document with the tokenizer's end-of-document "
                    "id (a SentencePiece model's </s>; 0 for bytes, as "
                    "megatron-core's ByteLevelTokenizer)");
  prepare
      ->add_option("--workers", o->workers,
                   "tokenising threads (default: the machine's hardware "
                   "threads)")
      ->check(wholeBetween(1, 1024));
  prepare
      ->add_option("--log-interval", o->logInterval,
                   "without a terminal, a progress line every this many "
                   "documents")
      ->check(wholeBetween(1, std::nullopt))
      ->default_val(1000);
  prepare->callback([o, &run] { run = [o] { return runPrepare(*o); }; });
}

} // namespace hypipe::cli
