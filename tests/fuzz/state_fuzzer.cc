// Fuzz target: the chunks a hostile state source streams to a joiner
// (node/daemon/gossip/state_chunks.h, Note [Receiving state chunks]; the
// receive side of FetchStageState), without gRPC: one or more streams of
// StateChunk messages through StateChunkReceiver, the bytes held carried
// from one stream to the next as a resume carries them.
//
// Input: byte 0 = flags (bit 0: FetchOptions::max_bytes = 4096, else no
// bound; bit 1: a partial snapshot is already held, 3 bytes under another
// SHA-256); then records: u8 record flags (bit 0: the stream ends after this
// chunk; bit 1: set the chunk's CRC-32C right, so mutations reach past the
// CRC), u16 length (little-endian), a serialized StateChunk. The stream
// asks for stage 1, iteration 5.
//
// Nothing may crash or read out of bounds, and what the receiver keeps must
// hold (abort, so both libFuzzer and fuzz_driver.cc report the input):
// never more bytes than max_bytes; a chunk accepted carried its bytes'
// right CRC; a stream finished OK holds exactly the bytes whose SHA-256 the
// chunks named.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "common/crc32c.h"
#include "common/sha256.h"
#include "node/daemon/gossip/state_chunks.h"
#include "proto/stage.pb.h"

namespace {

namespace node = skipswarm::node;
namespace proto = skipswarm::proto;

constexpr uint64_t kMaxBytes = 4096;

void Fail(const char* what) {
  std::fprintf(stderr, "state_fuzzer: %s\n", what);
  std::abort();
}

// How far inputs got (printed at exit with FUZZ_STATS=1).
struct Reached {
  long inputs = 0, chunks = 0, accepted = 0, finished = 0;
  ~Reached() {
    if (std::getenv("FUZZ_STATS") != nullptr) {
      std::fprintf(stderr,
                   "state_fuzzer: %ld inputs, %ld chunks, %ld accepted, %ld transfers complete\n",
                   inputs, chunks, accepted, finished);
    }
  }
} reached;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  ++reached.inputs;
  const uint8_t flags = data[0];
  node::ChunkExpectations expect;
  expect.stage = 1;
  expect.iteration = 5;
  expect.max_bytes = (flags & 1) != 0 ? kMaxBytes : 0;
  std::string got, sha;
  uint64_t digest = 0;
  if ((flags & 2) != 0) {
    got = "abc";
    sha = skipswarm::common::Sha256("another snapshot");
  }
  auto receiver = std::make_unique<node::StateChunkReceiver>(expect, &got, &sha, &digest);
  bool open = true;
  auto finish = [&] {
    if (receiver->Finish().ok()) {
      ++reached.finished;
      if (skipswarm::common::Sha256(got) != sha) Fail("a finished transfer does not match its SHA-256");
    }
    open = false;
  };
  size_t at = 1;
  while (at + 3 <= size) {
    const uint8_t record = data[at];
    const size_t len = data[at + 1] | (size_t{data[at + 2]} << 8);
    at += 3;
    if (len > size - at) break;
    proto::StateChunk chunk;
    const bool parsed = chunk.ParseFromArray(data + at, static_cast<int>(len));
    at += len;
    if (!parsed) continue;
    if ((record & 2) != 0) chunk.set_crc32c(skipswarm::common::Crc32c(chunk.data()));
    if (!open) {
      receiver = std::make_unique<node::StateChunkReceiver>(expect, &got, &sha, &digest);
      open = true;
    }
    ++reached.chunks;
    if (receiver->Accept(chunk).ok()) {
      ++reached.accepted;
      if (skipswarm::common::Crc32c(chunk.data()) != chunk.crc32c()) {
        Fail("a chunk with a wrong CRC was accepted");
      }
    } else {
      open = false;  // the joiner cancels the call; a later record is a new stream
      continue;
    }
    if (expect.max_bytes > 0 && got.size() > expect.max_bytes) Fail("held more than max_bytes");
    if ((record & 1) != 0) finish();
  }
  if (open) finish();
  return 0;
}
