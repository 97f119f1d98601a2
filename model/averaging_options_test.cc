#include "model/averaging_options.h"

#include <gtest/gtest.h>

namespace skipswarm::model {
namespace {

TEST(AveragingOptionsTest, ParsesEveryCodecSpelling) {
  EXPECT_EQ(ParseAvgCodec("fp32")->kind, AvgCodecKind::kFp32);
  EXPECT_EQ(ParseAvgCodec("bf16")->kind, AvgCodecKind::kBf16);
  EXPECT_EQ(ParseAvgCodec("int8")->kind, AvgCodecKind::kInt8);
  absl::StatusOr<AvgCodecSpec> t = ParseAvgCodec("topk:0.05");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->kind, AvgCodecKind::kTopK);
  EXPECT_DOUBLE_EQ(t->topk_fraction, 0.05);
  EXPECT_EQ(AvgCodecName(*t), "topk:0.05");
  absl::StatusOr<AvgCodecSpec> p = ParseAvgCodec("powersgd:8");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->rank, 8);
  EXPECT_EQ(AvgCodecName(*p), "powersgd:8");
}

TEST(AveragingOptionsTest, RefusesBadSpellingsAndRanges) {
  for (const char* bad : {"", "fp16x", "topk:0", "topk:1.5", "topk:", "powersgd:0", "int4"}) {
    EXPECT_FALSE(ParseAvgCodec(bad).ok()) << bad;
  }
  AveragingOptions o;
  EXPECT_TRUE(ValidateAveraging(o).ok());
  o.outer_every = 0;
  EXPECT_FALSE(ValidateAveraging(o).ok());
  o.outer_every = 8;
  o.outer_momentum = 1.0;
  EXPECT_FALSE(ValidateAveraging(o).ok());
  o.outer_momentum = 0.9;
  o.outer_lr = 0;
  EXPECT_FALSE(ValidateAveraging(o).ok());
}

TEST(AveragingOptionsTest, BytesPerCodec) {
  const double n = 1 << 20;
  EXPECT_DOUBLE_EQ(AveragedBytes(*ParseAvgCodec("fp32"), n), 4 * n);
  EXPECT_DOUBLE_EQ(AveragedBytes(*ParseAvgCodec("bf16"), n), 2 * n);
  EXPECT_DOUBLE_EQ(AveragedBytes(*ParseAvgCodec("int8"), n), n + 4 * n / 256);
  EXPECT_DOUBLE_EQ(AveragedBytes(*ParseAvgCodec("topk:0.01"), n), 8 * std::ceil(0.01 * n));
  // 1024 x 1024 view, rank 4: two factors of 4 x 1024 floats.
  EXPECT_DOUBLE_EQ(AveragedBytes(*ParseAvgCodec("powersgd:4"), n), 4.0 * 4 * 2048);
}

}  // namespace
}  // namespace skipswarm::model
