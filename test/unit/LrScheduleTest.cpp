//===- LrScheduleTest.cpp - Megatron's learning-rate schedule, by hand ----===//
//
// Values of Megatron-LM's get_lr (optimizer_param_scheduler.py) worked out
// by hand for each style. test/e2e/lr-schedule.test compares every step of
// trained runs with megatron-core's own scheduler.
//
//===----------------------------------------------------------------------===//
#include "core/model/LrSchedule.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace hypipe;

namespace {

/// lr 1e-3 to min_lr 1e-4, 2 warm-up steps, decay by step 10, a sample a
/// step.
LrSchedule scheduleOf(LrDecayStyle style) {
  LrSchedule s;
  s.style = style;
  s.maxLr = 1e-3;
  s.minLr = 1e-4;
  s.warmupSamples = 2;
  s.decaySamples = 10;
  return s;
}

TEST(LrSchedule, WarmupStartsAtZero) {
  for (LrDecayStyle style : kLrDecayStyles) {
    LrSchedule s = scheduleOf(style);
    s.wsdDecaySamples = 4;
    EXPECT_DOUBLE_EQ(s.at(0), 0.0) << lrDecayStyleName(style);
    EXPECT_DOUBLE_EQ(s.at(1), 0.5e-3) << lrDecayStyleName(style);
    EXPECT_DOUBLE_EQ(s.at(2), 1e-3) << lrDecayStyleName(style);
  }
}

TEST(LrSchedule, EachStyle) {
  // 4 of the 8 decay steps after warm-up: ratio 0.5.
  EXPECT_DOUBLE_EQ(scheduleOf(LrDecayStyle::Linear).at(6), 1e-4 + 0.5 * 9e-4);
  EXPECT_DOUBLE_EQ(scheduleOf(LrDecayStyle::Cosine).at(6), 1e-4 + 0.5 * 9e-4);
  // Ratio 0.25: cos(pi / 4) = sqrt(2) / 2.
  EXPECT_DOUBLE_EQ(scheduleOf(LrDecayStyle::Cosine).at(4),
                   1e-4 + 0.5 * (1 + std::sqrt(0.5)) * 9e-4);
  EXPECT_DOUBLE_EQ(scheduleOf(LrDecayStyle::Constant).at(50), 1e-3);
  // lr sqrt(warmup / steps): 1e-3 sqrt(2 / 8).
  EXPECT_DOUBLE_EQ(scheduleOf(LrDecayStyle::InverseSquareRoot).at(8), 0.5e-3);
  // Past the decay steps every decaying style is at min_lr.
  for (LrDecayStyle style : {LrDecayStyle::Linear, LrDecayStyle::Cosine,
                             LrDecayStyle::InverseSquareRoot})
    EXPECT_DOUBLE_EQ(scheduleOf(style).at(11), 1e-4) << lrDecayStyleName(style);
  EXPECT_DOUBLE_EQ(scheduleOf(LrDecayStyle::Linear).at(10), 1e-4);
}

TEST(LrSchedule, InverseSquareRootWithoutWarmup) {
  LrSchedule s = scheduleOf(LrDecayStyle::InverseSquareRoot);
  s.warmupSamples = 0;
  s.minLr = 0;
  // Megatron counts at least one sample of each: 0 and 1 are both lr.
  EXPECT_DOUBLE_EQ(s.at(0), 1e-3);
  EXPECT_DOUBLE_EQ(s.at(1), 1e-3);
  EXPECT_DOUBLE_EQ(s.at(4), 0.5e-3);
  // In samples, not steps: after one step of 4 samples, lr / sqrt(4).
  s.decaySamples = 40;
  EXPECT_DOUBLE_EQ(s.at(4), 0.5e-3);
}

TEST(LrSchedule, WsdStableThenEachDecay) {
  LrSchedule s = scheduleOf(LrDecayStyle::Wsd);
  s.wsdDecaySamples = 4; // anneals over steps 7 to 10
  EXPECT_DOUBLE_EQ(s.at(6), 1e-3);
  s.wsdStyle = WsdDecayStyle::Linear;
  EXPECT_DOUBLE_EQ(s.at(8), 1e-4 + 0.5 * 9e-4);
  s.wsdStyle = WsdDecayStyle::Cosine;
  EXPECT_DOUBLE_EQ(s.at(8), 1e-4 + 0.5 * 9e-4);
  s.wsdStyle = WsdDecayStyle::Exponential;
  EXPECT_DOUBLE_EQ(s.at(8), 1e-4 + (2 * std::sqrt(0.5) - 1) * 9e-4);
  s.wsdStyle = WsdDecayStyle::MinusSqrt;
  EXPECT_DOUBLE_EQ(s.at(7), 1e-4 + 0.5 * 9e-4); // 1 - sqrt(1/4)
  for (WsdDecayStyle style : kWsdDecayStyles) {
    s.wsdStyle = style;
    EXPECT_NEAR(s.at(10), 1e-4, 1e-18) << wsdDecayStyleName(style);
  }
}

TEST(LrSchedule, FractionalWarmup) {
  LrSchedule s = scheduleOf(LrDecayStyle::Linear);
  s.warmupSamples = 2.5; // --lr-warmup-fraction 0.25 of 10 decay steps
  EXPECT_DOUBLE_EQ(s.at(2), 1e-3 * 2 / 2.5);
  EXPECT_DOUBLE_EQ(s.at(3), 1e-4 + (1 - 0.5 / 7.5) * 9e-4);
}

TEST(LrSchedule, NamesRoundTrip) {
  for (LrDecayStyle style : kLrDecayStyles)
    EXPECT_EQ(parseLrDecayStyle(lrDecayStyleName(style)), style);
  for (WsdDecayStyle style : kWsdDecayStyles)
    EXPECT_EQ(parseWsdDecayStyle(wsdDecayStyleName(style)), style);
  EXPECT_FALSE(parseLrDecayStyle("wsd")); // Megatron's spelling is WSD
}

} // namespace
