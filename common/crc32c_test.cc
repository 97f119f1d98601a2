#include "common/crc32c.h"

#include <string>

#include "gtest/gtest.h"

namespace skipswarm::common {
namespace {

TEST(Crc32cTest, MatchesPublishedCheckValues) {
  EXPECT_EQ(Crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(Crc32c(std::string(32, '\0')), 0x8A9136AAu);   // RFC 3720 B.4
  EXPECT_EQ(Crc32c(std::string(32, '\xff')), 0x62A8AB43u);
  EXPECT_EQ(Crc32c(""), 0u);
}

TEST(Crc32cTest, HardwareAndPortableAgree) {
  std::string data;
  for (int i = 0; i < 300007; ++i) data.push_back(static_cast<char>(i * 131 + 7 + (i >> 9)));
  // Around and beyond the three-lane block (3 x 8 KiB) of the fast path.
  for (size_t n : {0, 1, 7, 8, 9, 63, 1000, 10007, 24575, 24576, 24577, 49152,
                   100003, 300007}) {
    absl::string_view part(data.data(), n);
    EXPECT_EQ(Crc32c(part), Crc32cExtendPortable(0, part)) << n;
  }
}

TEST(Crc32cTest, LongInputMatchesABitwiseReference) {
  // Expected value from a bit-at-a-time CRC-32C written in Python.
  std::string data;
  for (int i = 0; i < 100003; ++i) data.push_back(static_cast<char>(i * 131 + 7 + (i >> 9)));
  EXPECT_EQ(Crc32c(data), 0x2f845dcdu);
}

TEST(Crc32cTest, StreamingEqualsOneShot) {
  std::string data(5000, 'x');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i);
  const uint32_t whole = Crc32c(data);
  absl::string_view view(data);
  EXPECT_EQ(Crc32cExtend(Crc32c(view.substr(0, 1234)), view.substr(1234)), whole);
  absl::Cord cord;
  cord.Append(std::string(view.substr(0, 3000)));
  cord.Append(std::string(view.substr(3000)));
  EXPECT_EQ(Crc32c(cord), whole);
}

}  // namespace
}  // namespace skipswarm::common
