//===- Error.h - errors as values, without LLVM ---------------------------===//
//
// The core (model dimensions, the languages, the cost model, the partitioner
// and the schedules) is linked by the runtime, which links no LLVM, so it
// cannot return `llvm::Error`. `hypipe::Error` and `hypipe::Expected<T>` keep
// LLVM's idioms (`if (auto err = f())`, `if (!x) return x.takeError();`) and
// carry what a caller needs to render a good message: what went wrong, what
// to do, and, for the languages, where in the parsed text it went wrong.
// The compiler turns them into `llvm::Error` (frontend/Diagnostic.h); the
// runtime prints them.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_CORE_ERROR_H
#define HYPIPE_CORE_ERROR_H

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

namespace hypipe {

/// What went wrong.
struct Problem {
  std::string message;
  /// What to do about it ("" if the message says it).
  std::string help;
  /// 0-based byte offset into the text being parsed, for errors of the
  /// pattern and layout languages; the owner of the text renders the caret.
  std::optional<size_t> offset;
  size_t length = 1; ///< bytes to underline at `offset` (at least 1)
};

/// Success, or a `Problem`. True when it holds a problem, like `llvm::Error`.
class [[nodiscard]] Error {
public:
  static Error success() { return Error(); }
  Error(Problem problem)
      : problem_(std::make_unique<Problem>(std::move(problem))) {}
  Error(Error &&) = default;
  Error &operator=(Error &&) = default;

  explicit operator bool() const { return problem_ != nullptr; }
  const Problem &problem() const { return *problem_; }
  const std::string &message() const { return problem_->message; }
  /// Moves the problem out, leaving success behind.
  Problem takeProblem() {
    Problem p = std::move(*problem_);
    problem_.reset();
    return p;
  }

private:
  Error() = default;
  std::unique_ptr<Problem> problem_;
};

/// A plain error: a message that already says what to do.
inline Error makeError(std::string message) {
  return Error(Problem{std::move(message), {}, std::nullopt, 1});
}

/// An error at `offset` (length `length`) of the text being parsed.
inline Error sourceError(size_t offset, std::string message, std::string help,
                         size_t length = 1) {
  return Error(Problem{std::move(message), std::move(help), offset,
                       length < 1 ? 1 : length});
}

/// A value of type T, or a `Problem`. True when it holds a value. T may be a
/// reference.
template <typename T> class [[nodiscard]] Expected {
  using Stored =
      std::conditional_t<std::is_reference_v<T>,
                         std::reference_wrapper<std::remove_reference_t<T>>, T>;
  using Value = std::remove_reference_t<T>;

public:
  template <typename U,
            typename = std::enable_if_t<std::is_convertible_v<U &&, Stored>>>
  Expected(U &&value)
      : state_(std::in_place_index<0>, std::forward<U>(value)) {}
  Expected(Error error) : state_(std::in_place_index<1>, error.takeProblem()) {}

  explicit operator bool() const { return state_.index() == 0; }
  Value &operator*() { return std::get<0>(state_); }
  const Value &operator*() const { return std::get<0>(state_); }
  Value *operator->() { return &static_cast<Value &>(std::get<0>(state_)); }
  const Value *operator->() const {
    return &static_cast<const Value &>(std::get<0>(state_));
  }

  /// The problem; only when `!*this`.
  const Problem &problem() const { return std::get<1>(state_); }
  /// Moves the problem out as an `Error` (success if there is a value).
  Error takeError() {
    if (state_.index() == 0)
      return Error::success();
    return Error(std::move(std::get<1>(state_)));
  }

private:
  std::variant<Stored, Problem> state_;
};

/// The message of `err`, then `help: ...` on its own line if it has help
/// (success gives "").
inline std::string toString(const Error &err) {
  if (!err)
    return std::string();
  const Problem &p = err.problem();
  return p.help.empty() ? p.message : p.message + "\nhelp: " + p.help;
}

} // namespace hypipe

#endif
