#include "node/daemon/gossip/state_chunks.h"

#include <string>
#include <vector>

#include "common/crc32c.h"
#include "common/sha256.h"
#include "gtest/gtest.h"

namespace skipswarm::node {
namespace {

constexpr int kStage = 2;
constexpr uint64_t kIteration = 7;

// The chunks an honest source sends of `bytes`, `size` bytes each.
std::vector<proto::StateChunk> Chunks(const std::string& bytes, size_t size) {
  std::vector<proto::StateChunk> out;
  const std::string sha = common::Sha256(bytes);
  for (size_t at = 0; at < bytes.size(); at += size) {
    proto::StateChunk c;
    c.set_stage(kStage);
    c.set_iteration(kIteration);
    c.set_total_bytes(bytes.size());
    c.set_offset(at);
    c.set_data(bytes.substr(at, size));
    c.set_crc32c(common::Crc32c(c.data()));
    c.set_sha256(sha);
    c.set_params_digest(99);
    out.push_back(c);
  }
  return out;
}

ChunkExpectations Expect(uint64_t max_bytes = 0) {
  ChunkExpectations e;
  e.stage = kStage;
  e.iteration = kIteration;
  e.max_bytes = max_bytes;
  return e;
}

TEST(StateChunkReceiverTest, AnHonestStreamIsHeldWhole) {
  std::string got, sha;
  uint64_t digest = 0;
  int firsts = 0;
  ChunkExpectations e = Expect();
  e.on_first_chunk = [&] { ++firsts; };
  StateChunkReceiver r(e, &got, &sha, &digest);
  for (const auto& c : Chunks("checkpoint bytes", 5)) ASSERT_TRUE(r.Accept(c).ok());
  EXPECT_TRUE(r.Finish().ok());
  EXPECT_EQ(got, "checkpoint bytes");
  EXPECT_EQ(digest, 99u);
  EXPECT_EQ(firsts, 1);
}

TEST(StateChunkReceiverTest, ACutStreamResumesInTheNextOne) {
  std::string got, sha;
  uint64_t digest = 0;
  const auto chunks = Chunks("checkpoint bytes", 5);
  {
    StateChunkReceiver r(Expect(), &got, &sha, &digest);
    ASSERT_TRUE(r.Accept(chunks[0]).ok());
    EXPECT_TRUE(absl::IsUnavailable(r.Finish()));
  }
  StateChunkReceiver r(Expect(), &got, &sha, &digest);
  for (size_t i = 1; i < chunks.size(); ++i) ASSERT_TRUE(r.Accept(chunks[i]).ok());
  EXPECT_TRUE(r.Finish().ok());
  EXPECT_EQ(got, "checkpoint bytes");
}

TEST(StateChunkReceiverTest, HostileChunksAreRefused) {
  const auto chunks = Chunks("checkpoint bytes", 5);
  std::string got, sha;
  uint64_t digest = 0;

  proto::StateChunk other_stage = chunks[0];
  other_stage.set_stage(kStage + 1);
  EXPECT_TRUE(absl::IsInvalidArgument(
      StateChunkReceiver(Expect(), &got, &sha, &digest).Accept(other_stage)));

  EXPECT_TRUE(absl::IsResourceExhausted(
      StateChunkReceiver(Expect(/*max_bytes=*/8), &got, &sha, &digest).Accept(chunks[0])));
  EXPECT_TRUE(got.empty());

  proto::StateChunk bad_crc = chunks[0];
  bad_crc.set_crc32c(bad_crc.crc32c() ^ 1);
  EXPECT_TRUE(absl::IsDataLoss(StateChunkReceiver(Expect(), &got, &sha, &digest).Accept(bad_crc)));
  EXPECT_TRUE(got.empty());

  proto::StateChunk past_total = chunks[0];
  past_total.set_total_bytes(3);
  EXPECT_TRUE(
      absl::IsDataLoss(StateChunkReceiver(Expect(), &got, &sha, &digest).Accept(past_total)));

  StateChunkReceiver skips(Expect(), &got, &sha, &digest);
  ASSERT_TRUE(skips.Accept(chunks[0]).ok());
  EXPECT_TRUE(absl::IsDataLoss(skips.Accept(chunks[2])));
  EXPECT_TRUE(got.empty());
}

TEST(StateChunkReceiverTest, WrongHashIsDroppedAndAnotherSnapshotRestarts) {
  std::string got, sha;
  uint64_t digest = 0;
  auto chunks = Chunks("checkpoint bytes", 5);
  for (auto& c : chunks) c.set_sha256(std::string(32, 'x'));
  StateChunkReceiver r(Expect(), &got, &sha, &digest);
  for (const auto& c : chunks) ASSERT_TRUE(r.Accept(c).ok());
  EXPECT_TRUE(absl::IsDataLoss(r.Finish()));
  EXPECT_TRUE(got.empty());

  // A partial snapshot held, then a stream of another one: start again.
  got = "check";
  sha = std::string(32, 'y');
  EXPECT_TRUE(absl::IsAborted(
      StateChunkReceiver(Expect(), &got, &sha, &digest).Accept(Chunks("checkpoint bytes", 5)[0])));
  EXPECT_TRUE(got.empty());
  EXPECT_EQ(sha, common::Sha256("checkpoint bytes"));
}

}  // namespace
}  // namespace skipswarm::node
