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
  for (const auto& entry : std::filesystem::directory_iterator(TempPath(""))) {
    EXPECT_EQ(entry.path().filename().string().find("atomic_write.tmp"), std::string::npos)
        << entry.path();
  }
}

TEST(AtomicFileTest, PiecesAreWrittenBackToBackIncludingEmptyOnes) {
  const std::string path = TempPath("atomic_pieces");
  const std::string big(1 << 20, 'x');
  ASSERT_TRUE(WriteFileAtomically(path, {"head", "", big, "tail"}).ok());
  absl::StatusOr<std::string> bytes = ReadFileBytes(path);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes, "head" + big + "tail");
  ASSERT_TRUE(WriteFileAtomically(path, std::vector<absl::string_view>{}).ok());
  EXPECT_EQ(*ReadFileBytes(path), "");
}

TEST(AtomicFileTest, WriteSetsTheModeItIsGiven) {
  const std::string path = TempPath("atomic_secret");
  ASSERT_TRUE(WriteFileAtomically(path, "key", 0600).ok());
  EXPECT_EQ(std::filesystem::status(path).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  ASSERT_TRUE(WriteFileAtomically(path, "key").ok());
  EXPECT_EQ(std::filesystem::status(path).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write |
                std::filesystem::perms::group_read | std::filesystem::perms::others_read);
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
