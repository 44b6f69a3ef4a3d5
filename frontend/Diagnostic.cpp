//===- Diagnostic.cpp -----------------------------------------------------===//
#include "frontend/Diagnostic.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

namespace hypipe {

namespace {

/// Lines longer than this (a 10,000-layer pattern) are shown as a window
/// of it around the caret.
constexpr size_t kShownColumns = 120;

/// Whether `line` holds a byte past ASCII (SMDiagnostic prints such a line
/// without its caret).
bool hasNonAscii(llvm::StringRef line) {
  return llvm::any_of(line, [](char c) { return (unsigned char)c >= 0x80; });
}

/// `d` with its source line cut to kShownColumns around the caret ("..."
/// where cut) and the underline cut with it, in SMDiagnostic's format. The
/// underline takes a column per character, not per byte (a UTF-8
/// character's continuation bytes take none), and a tab where the line has
/// one, so that the caret stays under its character.
void printWindow(llvm::raw_ostream &os, const llvm::SMDiagnostic &d) {
  const std::string line = d.getLineContents().str();
  const size_t column = size_t(std::max(d.getColumnNo(), 0));
  auto continuation = [&](size_t c) {
    return c < line.size() && ((unsigned char)line[c] & 0xC0) == 0x80;
  };
  // The window's ends on whole characters.
  size_t from = column > kShownColumns / 2 ? column - kShownColumns / 2 : 0;
  while (continuation(from))
    ++from;
  size_t to = std::min(line.size(), from + kShownColumns);
  while (continuation(to))
    --to;
  const std::string before = from > 0 ? "..." : "";
  std::string marks(before.size(), ' ');
  // One past the line's end too: an error at the end of the line.
  const size_t end = to == line.size() ? to + 1 : to;
  for (size_t c = from; c < end; ++c) {
    if (continuation(c))
      continue;
    char mark = c < to && line[c] == '\t' ? '\t' : ' ';
    for (auto [s, e] : d.getRanges())
      if (c >= size_t(s) && c < size_t(e))
        mark = '~';
    marks += c == column ? '^' : mark;
  }
  marks.erase(marks.find_last_not_of(" \t") + 1);
  os << d.getFilename() << ":" << d.getLineNo() << ":" << column + 1
     << ": error: " << d.getMessage() << "\n"
     << before << line.substr(from, to - from)
     << (to < line.size() ? "..." : "") << "\n"
     << marks << "\n";
}

} // namespace

void printError(llvm::raw_ostream &os, const llvm::SourceMgr &sm,
                llvm::SMLoc loc, size_t length, llvm::StringRef message,
                llvm::StringRef help) {
  llvm::SmallVector<llvm::SMRange, 1> ranges;
  if (length > 1)
    ranges.push_back(llvm::SMRange(
        loc, llvm::SMLoc::getFromPointer(loc.getPointer() + length)));
  // Print the diagnostic directly: a handler installed on `sm` (the YAML
  // parser's) must not swallow it.
  llvm::SMDiagnostic d =
      sm.GetMessage(loc, llvm::SourceMgr::DK_Error, message, ranges);
  if (d.getLineContents().size() > kShownColumns ||
      hasNonAscii(d.getLineContents()))
    printWindow(os, d);
  else
    d.print(/*ProgName=*/nullptr, os, /*ShowColors=*/false);
  if (!help.empty())
    os << "help: " << help << "\n";
}

void printTextError(llvm::raw_ostream &os, llvm::StringRef what,
                    llvm::StringRef text, const Error &err) {
  const Problem &p = err.problem();
  if (!p.offset) {
    os << "error: " << p.message << "\n";
    if (!p.help.empty())
      os << "help: " << p.help << "\n";
    return;
  }
  llvm::SourceMgr sm;
  sm.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(text, what),
                        llvm::SMLoc());
  const char *start = sm.getMemoryBuffer(1)->getBufferStart();
  size_t offset = std::min(*p.offset, text.size());
  size_t length = std::min(p.length, text.size() - offset);
  printError(os, sm, llvm::SMLoc::getFromPointer(start + offset), length,
             p.message, p.help);
}

llvm::Error toLlvmError(Error err) {
  if (!err)
    return llvm::Error::success();
  const Problem &p = err.problem();
  std::string text = p.message;
  if (!p.help.empty())
    text += "\nhelp: " + p.help;
  return llvm::createStringError(llvm::inconvertibleErrorCode(), text);
}

} // namespace hypipe
