//===- Diagnostic.cpp -----------------------------------------------------===//
#include "frontend/Diagnostic.h"

#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

namespace hypipe {

void printError(llvm::raw_ostream &os, const llvm::SourceMgr &sm,
                llvm::SMLoc loc, size_t length, llvm::StringRef message,
                llvm::StringRef help) {
  llvm::SmallVector<llvm::SMRange, 1> ranges;
  if (length > 1)
    ranges.push_back(llvm::SMRange(
        loc, llvm::SMLoc::getFromPointer(loc.getPointer() + length)));
  // Print the diagnostic directly: a handler installed on `sm` (the YAML
  // parser's) must not swallow it.
  sm.GetMessage(loc, llvm::SourceMgr::DK_Error, message, ranges)
      .print(/*ProgName=*/nullptr, os, /*ShowColors=*/false);
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
