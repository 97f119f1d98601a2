#include "tests/adversarial/poison/poisoned_compute.h"

#include "gtest/gtest.h"

namespace skipswarm::tests {
namespace {

TEST(ParsePoisonTest, AnOptionalEveryMakesAnIntermittentLiar) {
  absl::StatusOr<Poison> always = ParsePoison("signflip:8");
  ASSERT_TRUE(always.ok()) << always.status();
  EXPECT_EQ(always->kind, Poison::Kind::kSignFlip);
  EXPECT_EQ(always->factor, 8);
  EXPECT_EQ(always->every, 1);
  absl::StatusOr<Poison> third = ParsePoison("signflip:8:3");
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_EQ(third->kind, Poison::Kind::kSignFlip);
  EXPECT_EQ(third->factor, 8);
  EXPECT_EQ(third->every, 3);
  absl::StatusOr<Poison> nan = ParsePoison("nan:2");
  ASSERT_TRUE(nan.ok()) << nan.status();
  EXPECT_EQ(nan->kind, Poison::Kind::kNaN);
  EXPECT_EQ(nan->every, 2);
  absl::StatusOr<Poison> none = ParsePoison("");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->kind, Poison::Kind::kNone);
  for (const char* bad : {"signflip", "signflip:8:0", "signflip:8:x", "scale:0", "nan:1:2",
                          "signflip:8:3:1", "flip:8"}) {
    EXPECT_FALSE(ParsePoison(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace skipswarm::tests
