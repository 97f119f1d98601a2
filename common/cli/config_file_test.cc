#include "common/cli/config_file.h"

#include "gtest/gtest.h"

namespace skipswarm::common::cli {
namespace {

TEST(ConfigFileTest, RendersScalarsAndListsAsFlagText) {
  auto entries = ParseConfigText(R"({
      // comments are allowed
      "planner": "skippipe", "budget_ms": 200, "ratio": 0.5,
      "insecure": true, "peers": ["a:1", "b:2"] })",
                                 "c.json");
  ASSERT_TRUE(entries.ok()) << entries.status();
  ASSERT_EQ(entries->size(), 5u);
  EXPECT_EQ((*entries)[0].key, "planner");
  EXPECT_EQ((*entries)[0].value, "skippipe");
  EXPECT_EQ((*entries)[1].value, "200");
  EXPECT_EQ((*entries)[2].value, "0.5");
  EXPECT_EQ((*entries)[3].value, "true");
  EXPECT_EQ((*entries)[4].value, "a:1,b:2");
}

TEST(ConfigFileTest, MalformedJsonNamesTheFileAndPosition) {
  auto entries = ParseConfigText("{\"a\": 1,, }", "broken.json");
  ASSERT_FALSE(entries.ok());
  EXPECT_EQ(entries.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(entries.status().message().find("broken.json"), std::string::npos);
  EXPECT_NE(entries.status().message().find("column"), std::string::npos);
}

TEST(ConfigFileTest, NestedObjectsAreRejectedNamingTheKey) {
  auto entries = ParseConfigText(R"({"model": {"layers": 6}})", "c.json");
  ASSERT_FALSE(entries.ok());
  EXPECT_NE(entries.status().message().find("'model'"), std::string::npos);
}

TEST(ConfigFileTest, TopLevelMustBeAnObject) {
  EXPECT_FALSE(ParseConfigText("[1, 2]", "c.json").ok());
  EXPECT_FALSE(ParseConfigText("", "c.json").ok());
}

TEST(ConfigFileTest, MissingFileIsNotFound) {
  auto entries = ReadConfigFile("/nonexistent/skipswarm.json");
  EXPECT_EQ(entries.status().code(), absl::StatusCode::kNotFound);
}

// A number out of double's range used to escape as an uncaught
// nlohmann::json out_of_range exception and abort the process.
TEST(ConfigFileTest, ANumberOutOfRangeIsAClearError) {
  auto entries = ParseConfigText("{\n  \"lr\": 1e400\n}\n", "c.json");
  ASSERT_FALSE(entries.ok());
  EXPECT_EQ(entries.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(entries.status().message().find("c.json"), std::string::npos) << entries.status();
  EXPECT_NE(entries.status().message().find("1e400"), std::string::npos) << entries.status();
}

// --config=/dev/zero read gigabytes before failing.
TEST(ConfigFileTest, ANonRegularFileIsRefusedAtOnce) {
  auto entries = ReadConfigFile("/dev/zero");
  ASSERT_FALSE(entries.ok());
  EXPECT_NE(entries.status().message().find("not a regular file"), std::string::npos)
      << entries.status();
}

}  // namespace
}  // namespace skipswarm::common::cli
