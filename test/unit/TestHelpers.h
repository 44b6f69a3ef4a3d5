//===- TestHelpers.h - shared helpers of the unit tests -------------------===//
#ifndef HYPIPE_TEST_UNIT_TESTHELPERS_H
#define HYPIPE_TEST_UNIT_TESTHELPERS_H

#include "frontend/Diagnostic.h"

#include <gtest/gtest.h>

namespace hypipe::testing {

/// The SourceError inside `err` (consumed); fails the test if there is none.
inline SourceError sourceErrorOf(llvm::Error err) {
  SourceError out(0, "", "");
  bool found = false;
  llvm::handleAllErrors(
      std::move(err), [&](const SourceError &e) { out = e, found = true; },
      [&](const llvm::ErrorInfoBase &e) {
        ADD_FAILURE() << "not a SourceError: " << e.message();
      });
  EXPECT_TRUE(found);
  return out;
}

template <typename T> SourceError expectSourceError(llvm::Expected<T> result) {
  EXPECT_FALSE(static_cast<bool>(result))
      << "expected the input to be rejected";
  if (result)
    return SourceError(0, "", "");
  return sourceErrorOf(result.takeError());
}

} // namespace hypipe::testing

#endif
