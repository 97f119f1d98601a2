#include "common/atomic_file.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace skipswarm::common {
namespace {

std::string TempPath(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  return (std::filesystem::path(base ? base : "/tmp") / name).string();
}

TEST(AtomicFileTest, WriteReplacesWholeAndLeavesNoTemp) {
  const std::string path = TempPath("atomic_write");
  ASSERT_TRUE(WriteFileAtomically(path, "old bytes").ok());
  ASSERT_TRUE(WriteFileAtomically(path, "new").ok());
  absl::StatusOr<std::string> bytes = ReadFileBytes(path);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes, "new");
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST(AtomicFileTest, AWriteIntoAMissingFolderFailsAndNamesTheTemp) {
  absl::Status s = WriteFileAtomically(TempPath("no/such/folder/file"), "x");
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_NE(s.message().find("file.tmp"), std::string::npos) << s;
}

TEST(AtomicFileTest, RenameDurablyMovesAndReportsFailure) {
  const std::string from = TempPath("rename_from");
  const std::string to = TempPath("rename_to");
  ASSERT_TRUE(WriteFileAtomically(from, "payload").ok());
  ASSERT_TRUE(RenameDurably(from, to).ok());
  EXPECT_FALSE(std::filesystem::exists(from));
  EXPECT_EQ(*ReadFileBytes(to), "payload");
  EXPECT_TRUE(absl::IsUnavailable(RenameDurably(from, to)));
}

TEST(AtomicFileTest, ReadingAMissingFileIsNotFound) {
  EXPECT_TRUE(absl::IsNotFound(ReadFileBytes(TempPath("absent")).status()));
}

}  // namespace
}  // namespace skipswarm::common
