// The frame fuzzer's seeds (corpus/frame/, written by make_seeds) must pass
// the header checks (Note [Frame validation] in
// node/transport/frame_validator.h) as frame_fuzzer.cc sets the validator
// up: a seed refused at its first check (a stale protocol version) leaves
// the CI fuzz run mutating nothing but that check. Regenerate them with
//   bazel run //tests/fuzz:make_seeds -- $PWD/tests/fuzz/corpus
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "common/node_id.h"
#include "gtest/gtest.h"
#include "node/transport/frame_validator.h"
#include "proto/pipeline.pb.h"

namespace skipswarm::node {
namespace {

TEST(FrameSeedsTest, EverySeedPassesTheHeaderChecks) {
  int seeds = 0;
  for (const auto& entry : std::filesystem::directory_iterator("tests/fuzz/corpus/frame")) {
    const std::string name = entry.path().filename().string();
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    const std::string input = bytes.str();
    // frame_fuzzer.cc's input: flags, header length (2 bytes, little
    // endian), chunk size, header, payload.
    ASSERT_GE(input.size(), 4u) << name;
    const size_t header_len = static_cast<uint8_t>(input[1]) |
                              (static_cast<size_t>(static_cast<uint8_t>(input[2])) << 8);
    ASSERT_LE(header_len, input.size() - 4) << name;
    proto::FrameHeader header;
    ASSERT_TRUE(header.ParseFromArray(input.data() + 4, static_cast<int>(header_len))) << name;
    ASSERT_LT(header.hop_index(), static_cast<uint32_t>(header.route_size())) << name;
    ValidatorOptions options;
    absl::StatusOr<common::NodeId> self =
        common::NodeId::FromBytes(header.route(header.hop_index()).node_id());
    ASSERT_TRUE(self.ok()) << name;
    options.self = *self;  // flags bit 0, as every seed sets it
    options.max_payload_bytes = uint64_t{4} << 20;
    const absl::Status checked = FrameValidator(options).CheckHeader(header);
    EXPECT_TRUE(checked.ok()) << name << ": " << checked;
    ++seeds;
  }
  EXPECT_GE(seeds, 6);
}

}  // namespace
}  // namespace skipswarm::node
