// What a joiner accepts of the chunks a state source streams
// (FetchStageState, state_transfer.h): the receive side of one FetchState
// stream, apart from gRPC so that it can be tested and fuzzed on its own
// (tests/fuzz/state_fuzzer.cc).
//
//   StateChunkReceiver receiver(options, &got, &sha, &digest);
//   while (reader->Read(&chunk)) {
//     absl::Status s = receiver.Accept(chunk);
//     if (!s.ok()) { context.TryCancel(); return s; }
//   }
//   SS_RETURN_IF_ERROR(the call's own status);
//   return receiver.Finish();
//
// Note [Receiving state chunks]: the source is a stranger until its bytes
// check out, so every chunk is checked before it is kept: the stage and
// iteration asked for; on the first chunk of a stream, the claimed total
// against FetchOptions::max_bytes (refused before a byte is held) and the
// SHA-256 against the partial snapshot held from an earlier stream (another
// snapshot: start again from zero); then every chunk's SHA-256, total and
// offset equal to the stream's and the bytes held, no byte past the total,
// and its CRC-32C. The whole is kept only when its SHA-256 matches. The
// bytes held (`got`), the snapshot's SHA-256 and its params digest outlive
// one stream: a later stream, from this source or another, resumes at
// `got->size()`.
//
// Thread rule: one caller at a time; `got`, `sha` and `digest` must outlive
// the receiver.
#ifndef SKIPSWARM_NODE_DAEMON_GOSSIP_STATE_CHUNKS_H_
#define SKIPSWARM_NODE_DAEMON_GOSSIP_STATE_CHUNKS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "proto/stage.pb.h"

namespace skipswarm::node {

struct ChunkExpectations {
  int stage = 0;
  uint64_t iteration = 0;
  uint64_t max_bytes = 0;  // 0: no bound (FetchOptions::max_bytes)
  // Called on the first chunk of the stream for this stage and iteration,
  // before its other checks: the source reached the boundary.
  std::function<void()> on_first_chunk;
};

class StateChunkReceiver {
 public:
  // `got` holds got->size() bytes of the snapshot whose SHA-256 is `*sha`
  // (both empty when nothing is held yet).
  StateChunkReceiver(ChunkExpectations expect, std::string* got, std::string* sha,
                     uint64_t* digest)
      : expect_(std::move(expect)), got_(got), sha_(sha), digest_(digest) {}

  // The next chunk of this stream. An error ends the stream (the caller
  // cancels the call): InvalidArgument (another stage or iteration),
  // ResourceExhausted (a total over max_bytes; nothing held), Aborted
  // (another snapshot than the one held; nothing held, its SHA-256 kept),
  // DataLoss (out of sequence: nothing held; or a bad CRC).
  absl::Status Accept(const proto::StateChunk& chunk);

  // After the stream ended without a transport error: OK when the whole
  // snapshot is held and its SHA-256 matches; Unavailable when the stream
  // ended early (resume); DataLoss on a SHA-256 mismatch (nothing held).
  absl::Status Finish();

 private:
  const ChunkExpectations expect_;
  std::string* const got_;
  std::string* const sha_;
  uint64_t* const digest_;
  bool first_ = true;
  uint64_t total_ = 0;
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_GOSSIP_STATE_CHUNKS_H_
