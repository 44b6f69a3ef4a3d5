//===- TestHelpers.h - shared helpers of the unit tests -------------------===//
#ifndef HYPIPE_TEST_UNIT_TESTHELPERS_H
#define HYPIPE_TEST_UNIT_TESTHELPERS_H

#include "core/Error.h"

#include <gtest/gtest.h>

namespace hypipe::testing {

/// The located problem of a rejected `result`; fails the test if the input
/// was accepted or the problem has no location in the text.
template <typename T> Problem expectSourceError(const Expected<T> &result) {
  EXPECT_FALSE(static_cast<bool>(result))
      << "expected the input to be rejected";
  if (result)
    return Problem{};
  EXPECT_TRUE(result.problem().offset.has_value())
      << "not located: " << result.problem().message;
  return result.problem();
}

} // namespace hypipe::testing

#endif
