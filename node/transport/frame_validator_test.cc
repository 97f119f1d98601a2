#include "node/transport/frame_validator.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/sim_clock.h"
#include "gtest/gtest.h"
#include "node/transport/test_util.h"

namespace skipswarm::node {
namespace {

using ::skipswarm::node::testutil::kTestSwarm;
using ::skipswarm::node::testutil::LogCapture;
using ::skipswarm::node::testutil::MakeTestFrame;

class FrameValidatorTest : public ::testing::Test {
 protected:
  FrameValidatorTest()
      : origin_(PeerId::ForName("origin")),
        self_(PeerId::ForName("self")),
        validator_(ValidatorOptions{self_, kTestSwarm, 8 << 20, 4}) {}

  // A valid frame for this node (hop 1 of origin -> self -> origin).
  Frame Valid(size_t bytes = 3 << 20, uint64_t mb = 0) {
    return MakeTestFrame({origin_, self_, origin_}, 1, bytes, mb);
  }

  absl::StatusCode HeaderCode(const proto::FrameHeader& h) {
    return validator_.CheckHeader(h).code();
  }

  PeerId origin_;
  PeerId self_;
  FrameValidator validator_;
};

TEST_F(FrameValidatorTest, AcceptsAValidFrame) {
  EXPECT_TRUE(validator_.CheckFrame(Valid()).ok());
  EXPECT_TRUE(validator_.CheckFrame(Valid(0)).ok());
}

TEST_F(FrameValidatorTest, RejectsWrongProtocolVersion) {
  Frame f = Valid();
  f.header.set_protocol_version(proto::PROTOCOL_VERSION_UNSPECIFIED);
  EXPECT_EQ(HeaderCode(f.header), absl::StatusCode::kFailedPrecondition);
  f.header.set_protocol_version(static_cast<proto::ProtocolVersion>(7));
  absl::Status status = validator_.CheckHeader(f.header);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(status.message().find("v7"), absl::string_view::npos) << status;
}

TEST_F(FrameValidatorTest, RejectsForeignSwarm) {
  Frame f = Valid();
  f.header.set_swarm_id("other");
  EXPECT_EQ(HeaderCode(f.header), absl::StatusCode::kPermissionDenied);
}

TEST_F(FrameValidatorTest, RejectsBadRoutes) {
  Frame empty = Valid();
  empty.header.clear_route();
  EXPECT_EQ(HeaderCode(empty.header), absl::StatusCode::kInvalidArgument);

  Frame too_long = Valid();
  while (too_long.header.route_size() <= kMaxRouteHops) {
    too_long.header.add_route()->set_node_id(origin_.Bytes());
  }
  EXPECT_EQ(HeaderCode(too_long.header), absl::StatusCode::kInvalidArgument);

  Frame out_of_range = Valid();
  out_of_range.header.set_hop_index(3);
  EXPECT_EQ(HeaderCode(out_of_range.header), absl::StatusCode::kInvalidArgument);

  Frame not_me = Valid();
  not_me.header.set_hop_index(2);  // route[2] is the origin
  absl::Status status = validator_.CheckHeader(not_me.header);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("not this node"), absl::string_view::npos);
}

TEST_F(FrameValidatorTest, RejectsMissingDirection) {
  Frame f = Valid();
  f.header.set_direction(proto::DIRECTION_UNSPECIFIED);
  EXPECT_EQ(HeaderCode(f.header), absl::StatusCode::kInvalidArgument);
}

// Verified compute's answer frame: an answer in the header, no tensor.
TEST_F(FrameValidatorTest, SketchFramesCarryAnAnswerAndNoTensor) {
  Frame f = Valid();
  f.header.set_direction(proto::DIRECTION_SKETCH);
  f.header.clear_tensor();
  f.header.set_chunk_count(0);
  f.payload.Clear();
  EXPECT_EQ(HeaderCode(f.header), absl::StatusCode::kInvalidArgument);  // no answer
  f.header.mutable_sketch_answer()->set_mb_id(1);
  EXPECT_EQ(HeaderCode(f.header), absl::StatusCode::kOk);
  Frame with_tensor = Valid();
  with_tensor.header.set_direction(proto::DIRECTION_SKETCH);
  with_tensor.header.mutable_sketch_answer()->set_mb_id(1);
  EXPECT_EQ(HeaderCode(with_tensor.header), absl::StatusCode::kInvalidArgument);
}

// Note [Frame validation] 1c: a peer's abort_cause is refused unless it is
// what an honest hop sends (node/stage/stage_server_send.cc).
TEST_F(FrameValidatorTest, AbortCauseOnlyOnAbortNoticesAndBounded) {
  // An abort notice for hop 1 (iteration 3), as SendAbort builds it.
  Frame notice = Valid(0);
  notice.header.set_direction(proto::DIRECTION_BACKWARD);
  notice.header.clear_tensor();
  notice.header.set_chunk_count(0);
  proto::AbortCause* cause = notice.header.mutable_abort_cause();
  cause->set_kind(proto::AbortCause::ABORT_CAUSE_STOPPING);
  cause->set_node(origin_.Bytes());
  cause->set_stop_after(2);
  EXPECT_EQ(HeaderCode(notice.header), absl::StatusCode::kOk);

  Frame long_node = notice;
  long_node.header.mutable_abort_cause()->set_node(std::string(1 << 16, 'x'));
  absl::Status status = validator_.CheckHeader(long_node.header);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("32"), absl::string_view::npos) << status;
  Frame short_node = notice;
  short_node.header.mutable_abort_cause()->set_node(origin_.Bytes().substr(1));
  EXPECT_EQ(HeaderCode(short_node.header), absl::StatusCode::kInvalidArgument);

  Frame unknown_kind = notice;
  unknown_kind.header.mutable_abort_cause()->set_kind(proto::AbortCause::ABORT_CAUSE_UNSPECIFIED);
  EXPECT_EQ(HeaderCode(unknown_kind.header), absl::StatusCode::kInvalidArgument);
  unknown_kind.header.mutable_abort_cause()->set_kind(static_cast<proto::AbortCause::Kind>(9));
  EXPECT_EQ(HeaderCode(unknown_kind.header), absl::StatusCode::kInvalidArgument);

  // The node refused iteration 3, so it stopped after an earlier one.
  Frame late = notice;
  late.header.mutable_abort_cause()->set_stop_after(3);
  EXPECT_EQ(HeaderCode(late.header), absl::StatusCode::kInvalidArgument);
  late.header.mutable_abort_cause()->set_stop_after(~uint64_t{0});
  EXPECT_EQ(HeaderCode(late.header), absl::StatusCode::kInvalidArgument);

  // Not an abort notice: a forward, or a backward with a gradient.
  Frame forward = Valid();
  *forward.header.mutable_abort_cause() = notice.header.abort_cause();
  EXPECT_EQ(HeaderCode(forward.header), absl::StatusCode::kInvalidArgument);
  Frame gradient = Valid();
  gradient.header.set_direction(proto::DIRECTION_BACKWARD);
  *gradient.header.mutable_abort_cause() = notice.header.abort_cause();
  EXPECT_EQ(HeaderCode(gradient.header), absl::StatusCode::kInvalidArgument);
}

TEST_F(FrameValidatorTest, RejectsOversizedPayload) {
  Frame f = Valid();
  f.header.mutable_tensor()->set_payload_bytes(9 << 20);
  f.header.set_chunk_count(9);
  absl::Status status = validator_.CheckHeader(f.header);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("exceeds the limit"), absl::string_view::npos);
}

TEST_F(FrameValidatorTest, RejectsChunkCountInconsistentWithSize) {
  Frame f = Valid(3 << 20);
  for (uint32_t bad : {0u, 2u}) {  // 3 MiB needs at least 3 chunks
    f.header.set_chunk_count(bad);
    EXPECT_EQ(HeaderCode(f.header), absl::StatusCode::kInvalidArgument) << bad;
  }
  Frame empty = Valid(0);
  empty.header.set_chunk_count(1);
  EXPECT_EQ(HeaderCode(empty.header), absl::StatusCode::kInvalidArgument);
  Frame tiny = Valid(2);
  tiny.header.set_chunk_count(3);  // 3 chunks cannot each hold ≥ 1 byte of 2
  EXPECT_EQ(HeaderCode(tiny.header), absl::StatusCode::kInvalidArgument);
}

TEST_F(FrameValidatorTest, ChecksChunkOrderSizesAndTotal) {
  Frame f = Valid(3 << 20);
  proto::PayloadChunk chunk;
  chunk.set_index(0);
  chunk.set_data(std::string(kMaxChunkBytes, 'a'));
  EXPECT_TRUE(validator_.CheckChunk(f.header, 0, 0, chunk).ok());

  chunk.set_index(1);  // expected 0
  EXPECT_EQ(validator_.CheckChunk(f.header, 0, 0, chunk).code(),
            absl::StatusCode::kInvalidArgument);

  chunk.set_index(3);  // beyond chunk_count
  EXPECT_EQ(validator_.CheckChunk(f.header, 3, 3 << 20, chunk).code(),
            absl::StatusCode::kInvalidArgument);

  proto::PayloadChunk big;
  big.set_index(0);
  big.set_data(std::string(kMaxChunkBytes + 1, 'a'));
  EXPECT_EQ(validator_.CheckChunk(f.header, 0, 0, big).code(),
            absl::StatusCode::kInvalidArgument);

  proto::PayloadChunk empty;
  empty.set_index(0);
  EXPECT_EQ(validator_.CheckChunk(f.header, 0, 0, empty).code(),
            absl::StatusCode::kInvalidArgument);

  proto::PayloadChunk overflow;
  overflow.set_index(2);
  overflow.set_data(std::string(kMaxChunkBytes, 'a'));
  EXPECT_EQ(validator_.CheckChunk(f.header, 2, (3 << 20) - 10, overflow).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(FrameValidatorTest, RejectsPayloadSizeMismatch) {
  Frame f = Valid(1000);
  f.payload.RemoveSuffix(1);
  EXPECT_EQ(validator_.CheckFrame(f).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(FrameValidatorTest, RejectsBadChecksumWithDataLoss) {
  Frame f = Valid(1000);
  f.header.mutable_tensor()->set_payload_crc32c(f.header.tensor().payload_crc32c() ^ 1);
  absl::Status status = validator_.CheckFrame(f);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(status.message().find("CRC-32C"), absl::string_view::npos);
}

TEST_F(FrameValidatorTest, DetectsDuplicatesUntilReleased) {
  Frame f = Valid(10, /*mb=*/5);
  EXPECT_TRUE(validator_.Reserve(f.header).ok());
  EXPECT_EQ(validator_.Reserve(f.header).code(), absl::StatusCode::kAlreadyExists);
  // The same micro-batch going backward is a different frame.
  Frame back = MakeTestFrame({origin_, self_, origin_}, 1, 10, 5,
                             proto::DIRECTION_BACKWARD);
  EXPECT_TRUE(validator_.Reserve(back.header).ok());
  // So is a verify-only copy of the same forward (verified compute: the
  // replica that answered it may get the real frame after a re-route).
  Frame copy = f;
  copy.header.mutable_verify()->set_seed(3);
  EXPECT_TRUE(validator_.Reserve(copy.header).ok());
  EXPECT_EQ(validator_.Reserve(copy.header).code(), absl::StatusCode::kAlreadyExists);
  // A refused frame may come again.
  validator_.Release(FrameKey::Of(f.header));
  EXPECT_TRUE(validator_.Reserve(f.header).ok());
}

TEST_F(FrameValidatorTest, ForgetsKeysBeyondTheWindow) {
  for (uint64_t mb = 0; mb < 5; ++mb) {  // window is 4
    EXPECT_TRUE(validator_.Reserve(Valid(10, mb).header).ok());
  }
  EXPECT_TRUE(validator_.Reserve(Valid(10, 0).header).ok());   // evicted
  EXPECT_FALSE(validator_.Reserve(Valid(10, 4).header).ok());  // still known
}

// A header that declares a small tensor but a large payload was accepted
// (and its chunks received) until the decoder compared the sizes.
TEST_F(FrameValidatorTest, PayloadThatDoesNotMatchTheDeclaredShapeIsRefusedAtTheHeader) {
  FrameValidator strict(ValidatorOptions{self_, kTestSwarm, 8 << 20, 4, true});
  Frame f = Valid(4096);  // shape {1024} fp32: 4096 bytes
  EXPECT_TRUE(strict.CheckHeader(f.header).ok());
  f.header.mutable_tensor()->set_shape(0, 16);  // declares 64 bytes
  EXPECT_TRUE(validator_.CheckHeader(f.header).ok()) << "the old check let it in";
  absl::Status s = strict.CheckHeader(f.header);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("does not match"), absl::string_view::npos) << s;
  // Codecs: int8 blockwise (scales + values), int64, and nonsense.
  proto::TensorMeta m;
  m.add_shape(2);
  m.add_shape(300);
  m.set_dtype(proto::DTYPE_FLOAT32);
  m.set_codec(proto::CODEC_INT8_BLOCKWISE);
  m.set_block_size(256);
  EXPECT_EQ(*FrameValidator::ImpliedPayloadBytes(m), 3u * 4 + 600);
  m.set_codec(proto::CODEC_RAW_INT64);
  EXPECT_FALSE(FrameValidator::ImpliedPayloadBytes(m).ok()) << "int64 with a float dtype";
  m.set_dtype(proto::DTYPE_INT64);
  EXPECT_EQ(*FrameValidator::ImpliedPayloadBytes(m), 600u * 8);
  m.set_shape(1, 0);
  EXPECT_FALSE(FrameValidator::ImpliedPayloadBytes(m).ok());
  m.set_shape(1, int64_t{1} << 40);
  EXPECT_FALSE(FrameValidator::ImpliedPayloadBytes(m).ok()) << "overflow-sized";
}

// Note [Paced peer logs] (common/peer_log_limiter.h): a peer sending a
// stream of bad frames gets its first refusals logged in full, then one line
// per interval counting the rest; another peer is not silenced by it.
TEST_F(FrameValidatorTest, RefusedFramesAreLoggedPacedPerPeer) {
  common::SimClock clock;
  auto validator =
      std::make_shared<FrameValidator>(ValidatorOptions{self_, kTestSwarm, 8 << 20, 4}, &clock);
  const PeerId flooder = PeerId::ForName("flooder");
  const PeerId other = PeerId::ForName("other");
  auto send_bad = [&](const PeerId& from, uint64_t mb) {
    Frame f = Valid(64, mb);
    f.header.mutable_tensor()->set_payload_crc32c(f.header.tensor().payload_crc32c() + 1);
    absl::Status acked;
    AdmitFrame(validator, nullptr, from, std::move(f),
               [&acked](absl::Status s) { acked = std::move(s); });
    EXPECT_EQ(acked.code(), absl::StatusCode::kDataLoss) << acked;
  };
  LogCapture log;
  const std::string flooder_lines = absl::StrCat("rejected frame from ", flooder.ShortString());
  for (int i = 0; i < 1000; ++i) {
    send_bad(flooder, i);
    clock.Advance(absl::Milliseconds(1));  // 1,000 frames/s
  }
  EXPECT_LE(log.Count(flooder_lines), 5);
  EXPECT_GE(log.Count(flooder_lines), 1);
  send_bad(other, 0);
  EXPECT_EQ(log.Count(absl::StrCat("rejected frame from ", other.ShortString())), 1);
  EXPECT_EQ(log.Count("not shown"), 0);
  // After the interval the flooder's next refusal is shown with the count of
  // those that were not.
  clock.Advance(absl::Seconds(10));
  send_bad(flooder, 1000);
  const int shown = log.Count(flooder_lines);
  EXPECT_EQ(log.Count(absl::StrCat(1001 - shown, " more refused frames from ",
                                   flooder.ShortString(), " not shown")),
            1);
  EXPECT_EQ(validator->rejected_frames(), 1002u);
}

// Note [Paced peer logs]: a peer that floods and then stops still has its
// held-back count logged: with another peer's refusal after the interval,
// and whatever is left when the validator goes.
TEST_F(FrameValidatorTest, AQuietFloodersHeldCountIsLoggedLater) {
  common::SimClock clock;
  auto validator =
      std::make_unique<FrameValidator>(ValidatorOptions{self_, kTestSwarm, 8 << 20, 4}, &clock);
  const PeerId flooder = PeerId::ForName("flooder");
  const PeerId other = PeerId::ForName("other");
  Frame bad = Valid(64, 1);
  bad.header.set_swarm_id("another swarm");
  const absl::Status why = validator->CheckHeader(bad.header);
  LogCapture log;
  for (int i = 0; i < 1000; ++i) validator->LogRejected(flooder, bad.header, why);
  const std::string flooder_held =
      absl::StrCat("995 more refused frames from ", flooder.ShortString(), " not shown");
  EXPECT_EQ(log.Count(flooder_held), 0);
  clock.Advance(absl::Seconds(11));
  validator->LogRejected(other, bad.header, why);
  EXPECT_EQ(log.Count(flooder_held), 1);
  // The other peer floods too and the validator goes: its count is flushed.
  for (int i = 0; i < 9; ++i) validator->LogRejected(other, bad.header, why);
  validator.reset();
  EXPECT_EQ(log.Count(absl::StrCat("5 more refused frames from ", other.ShortString())), 1);
  EXPECT_EQ(log.Count("not shown"), 2);
}

}  // namespace
}  // namespace skipswarm::node
