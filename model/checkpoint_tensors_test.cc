#include "model/checkpoint_tensors.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace skipswarm::model {
namespace {

std::string Floats(std::vector<float> v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

template <typename T>
void PutAt(std::string& s, size_t at, T v) {
  std::memcpy(&s[at], &v, sizeof(v));
}

// Two entries: "w" (float32 [2, 3]) then "s" (int64 scalar).
std::string TwoEntries() {
  std::string out;
  AppendTensorCount(out, 2);
  AppendTensorEntry(out, "w", TensorDtype::kFloat32, {2, 3}, Floats({1, 2, 3, 4, 5, 6}));
  const int64_t seven = 7;
  AppendTensorEntry(out, "s", TensorDtype::kInt64, {},
                    std::string(reinterpret_cast<const char*>(&seven), 8));
  return out;
}
// Offsets in TwoEntries(): count 4, name_len 2, "w" 1, dtype 1, rank 1, dims 16, byte_len 8.
constexpr size_t kFirstRank = 4 + 2 + 1 + 1;
constexpr size_t kFirstDim = kFirstRank + 1;
constexpr size_t kFirstLen = kFirstDim + 16;

TEST(CheckpointTensorsTest, RoundTrips) {
  const std::string bytes = TwoEntries();
  absl::StatusOr<std::vector<TensorEntry>> e = ParseTensorList(bytes);
  ASSERT_TRUE(e.ok()) << e.status();
  ASSERT_EQ(e->size(), 2u);
  EXPECT_EQ((*e)[0].name, "w");
  EXPECT_EQ((*e)[0].dtype, TensorDtype::kFloat32);
  EXPECT_EQ((*e)[0].dims, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ((*e)[0].data, Floats({1, 2, 3, 4, 5, 6}));
  EXPECT_EQ((*e)[1].name, "s");
  EXPECT_TRUE((*e)[1].dims.empty());
  EXPECT_EQ((*e)[1].data.size(), 8u);
}

TEST(CheckpointTensorsTest, RefusesEveryTruncation) {
  const std::string bytes = TwoEntries();
  for (size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_EQ(ParseTensorList(bytes.substr(0, n)).status().code(), absl::StatusCode::kDataLoss)
        << "prefix of " << n << " bytes";
  }
  EXPECT_EQ(ParseTensorList(bytes + "x").status().code(), absl::StatusCode::kDataLoss);
}

TEST(CheckpointTensorsTest, RefusesLengthsTheInputCannotHold) {
  std::string huge_count = TwoEntries();
  PutAt<uint32_t>(huge_count, 0, 0xffffffffu);
  EXPECT_EQ(ParseTensorList(huge_count).status().code(), absl::StatusCode::kDataLoss);

  std::string huge_len = TwoEntries();
  PutAt<uint64_t>(huge_len, kFirstLen, UINT64_MAX);
  EXPECT_EQ(ParseTensorList(huge_len).status().code(), absl::StatusCode::kDataLoss);

  // Dims whose product overflows 64 bits, with a byte length that matches
  // the wrapped product.
  std::string overflow = TwoEntries();
  PutAt<int64_t>(overflow, kFirstDim, int64_t{1} << 62);
  PutAt<int64_t>(overflow, kFirstDim + 8, 8);
  PutAt<uint64_t>(overflow, kFirstLen, 0);
  EXPECT_EQ(ParseTensorList(overflow).status().code(), absl::StatusCode::kDataLoss);

  std::string negative = TwoEntries();
  PutAt<int64_t>(negative, kFirstDim, -2);
  EXPECT_EQ(ParseTensorList(negative).status().code(), absl::StatusCode::kDataLoss);

  std::string rank = TwoEntries();
  PutAt<uint8_t>(rank, kFirstRank, kMaxTensorRank + 1);
  EXPECT_EQ(ParseTensorList(rank).status().code(), absl::StatusCode::kDataLoss);

  std::string dtype = TwoEntries();
  PutAt<uint8_t>(dtype, kFirstRank - 1, 99);
  EXPECT_EQ(ParseTensorList(dtype).status().code(), absl::StatusCode::kDataLoss);

  std::string empty_name = TwoEntries();
  PutAt<uint16_t>(empty_name, 4, 0);
  EXPECT_EQ(ParseTensorList(empty_name).status().code(), absl::StatusCode::kDataLoss);
}

TEST(CheckpointTensorsTest, RefusesDuplicateNames) {
  std::string out;
  AppendTensorCount(out, 2);
  AppendTensorEntry(out, "w", TensorDtype::kUInt8, {1}, "a");
  AppendTensorEntry(out, "w", TensorDtype::kUInt8, {1}, "b");
  absl::Status s = ParseTensorList(out).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("duplicate"), std::string::npos) << s;
}

TEST(CheckpointTensorsTest, EmptyTensorsAndListsParse) {
  std::string out;
  AppendTensorCount(out, 1);
  AppendTensorEntry(out, "e", TensorDtype::kBFloat16, {0, 4}, "");
  absl::StatusOr<std::vector<TensorEntry>> e = ParseTensorList(out);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_TRUE((*e)[0].data.empty());
  std::string none;
  AppendTensorCount(none, 0);
  EXPECT_TRUE(ParseTensorList(none).ok());
}

}  // namespace
}  // namespace skipswarm::model
