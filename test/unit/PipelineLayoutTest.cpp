//===- PipelineLayoutTest.cpp - the pipeline layout parser ----------------===//
#include "core/lang/PipelineLayout.h"
#include "test/unit/TestHelpers.h"

namespace hypipe {
namespace {

using testing::expectSourceError;

TEST(PipelineLayout, ExpansionKeepsSourceOffsets) {
  auto l = parsePipelineLayout("E,(t|)*2L", 3);
  ASSERT_TRUE(static_cast<bool>(l)) << toString(l.takeError());
  EXPECT_EQ(l->expanded, "Et|t|L");
  // Both copies of the group point back at the 't' and '|' inside it.
  EXPECT_EQ(l->sourceOffsets, (std::vector<size_t>{0, 3, 4, 3, 4, 8}));
}

TEST(PipelineLayout, GroupsDoNotNest) {
  // As in Megatron: '((t)*2)*2' unrolls the inner group once, leaving '(' and
  // ')'.
  Problem e = expectSourceError(parsePipelineLayout("E((t)*2)*2L", 1));
  EXPECT_NE(e.message.find("'(' is not a layout letter"), std::string::npos)
      << e.message;
  EXPECT_EQ(e.offset, 2u); // the inner '(', copied out of the unrolled group
}

TEST(PipelineLayout, CaseMistakeIsExplained) {
  Problem e = expectSourceError(parsePipelineLayout("e|L", 2));
  EXPECT_EQ(e.offset, 0u);
  EXPECT_NE(e.message.find("did you mean 'E'"), std::string::npos) << e.message;
}

TEST(PipelineLayout, HugeRepetitionIsRefused) {
  Problem e =
      expectSourceError(parsePipelineLayout("Et*99999999999999999999|L", 2));
  EXPECT_EQ(e.offset, 2u);
  EXPECT_NE(e.message.find("expands to more than"), std::string::npos)
      << e.message;
}

TEST(PipelineLayout, StageCountMustDivideByPp) {
  Problem e = expectSourceError(parsePipelineLayout("Et|t|tL", 2));
  EXPECT_NE(e.message.find("3 stages"), std::string::npos) << e.message;
  EXPECT_NE(e.help.find("2 or 4 stages"), std::string::npos) << e.help;
}

TEST(PipelineLayoutValidation, EmptyLayoutIsAnErrorNotACrash) {
  auto l = parsePipelineLayout("|", 2);
  ASSERT_TRUE(static_cast<bool>(l));
  Problem e = expectSourceError(validatePipelineLayout(*l, 0, std::nullopt));
  EXPECT_NE(e.message.find("no layers"), std::string::npos) << e.message;
}

TEST(PipelineLayoutValidation, TrailingEmptyStageIsNamed) {
  auto l = parsePipelineLayout("Et|tt|tt|", 2);
  ASSERT_TRUE(static_cast<bool>(l));
  Problem e = expectSourceError(validatePipelineLayout(*l, 5, std::nullopt));
  EXPECT_NE(e.help.find("trailing '|'"), std::string::npos) << e.help;
}

TEST(PipelineLayoutValidation, DecoderAfterMtpPointsAtTheDecoder) {
  auto l = parsePipelineLayout("Et|m|t|L", 4);
  ASSERT_TRUE(static_cast<bool>(l));
  Problem e = expectSourceError(validatePipelineLayout(*l, 2, 1));
  EXPECT_EQ(e.offset, 5u);
}

} // namespace
} // namespace hypipe
