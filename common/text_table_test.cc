#include "common/text_table.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace skipswarm::common {
namespace {

TEST(TextTableTest, SkipsCommentsAndBlankLinesAndSplitsOnWhitespace) {
  std::vector<std::string> seen;
  absl::Status s = ForEachTableRow("# header\n\na  b\tc # note\n  \nd\r\n", "table",
                                   [&](const TableRow& f) {
                                     std::string joined;
                                     for (absl::string_view x : f) joined += std::string(x) + ",";
                                     seen.push_back(joined);
                                     return absl::OkStatus();
                                   });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(seen, (std::vector<std::string>{"a,b,c,", "d,"}));
}

TEST(TextTableTest, AnErrorNamesTheTableAndLineAndStops) {
  int rows = 0;
  absl::Status s = ForEachTableRow("ok\n# c\nbad\nnever\n", "WAN table", [&](const TableRow& f) {
    ++rows;
    return f[0] == "bad" ? absl::InvalidArgumentError("bad row") : absl::OkStatus();
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "WAN table line 3: bad row");
  EXPECT_EQ(rows, 2);
}

TEST(TextTableTest, ANonRegularFileIsRefused) {
  absl::StatusOr<std::string> t = ReadTextFile("/dev/zero", "routes file");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << t.status();
}

TEST(TextTableTest, MissingFileIsNotFound) {
  absl::StatusOr<std::string> t = ReadTextFile("/nonexistent/skipswarm/x", "routes file");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(t.status().message(), "cannot read routes file /nonexistent/skipswarm/x");
}

}  // namespace
}  // namespace skipswarm::common
