#include "common/bounded_file.h"

#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace skipswarm::common {
namespace {

TEST(BoundedFileTest, ReadsASmallFileWhole) {
  const std::string path = ::testing::TempDir() + "/bounded_small.txt";
  std::ofstream(path) << "hello";
  absl::StatusOr<std::string> text = ReadBoundedFile(path, "config file");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "hello");
}

TEST(BoundedFileTest, RefusesDevZeroAFolderAndAnOversizedFile) {
  absl::StatusOr<std::string> zero = ReadBoundedFile("/dev/zero", "config file");
  EXPECT_EQ(zero.status().code(), absl::StatusCode::kInvalidArgument) << zero.status();
  EXPECT_NE(zero.status().message().find("not a regular file"), std::string::npos);
  EXPECT_FALSE(ReadBoundedFile(::testing::TempDir(), "config file").ok());
  const std::string path = ::testing::TempDir() + "/bounded_big.txt";
  std::ofstream(path) << std::string(2048, 'x');
  absl::StatusOr<std::string> big = ReadBoundedFile(path, "scenario", /*max_bytes=*/1024);
  EXPECT_EQ(big.status().code(), absl::StatusCode::kInvalidArgument) << big.status();
  EXPECT_EQ(ReadBoundedFile(path + ".absent", "scenario").status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace skipswarm::common
