// A frame: one hop of one micro-batch's activation (forward) or gradient
// (backward), as the transport moves it. See README.md for its lifecycle.
//
//   Frame frame;
//   *frame.header.mutable_tensor() = meta;      // dtype, shape, codec
//   frame.header.set_iteration(it); ...         // route, hop_index, direction
//   frame.payload = absl::Cord(std::move(encoded_bytes));
//   SealFrame(frame);   // payload_bytes, payload_crc32c, chunk_count, version
//   transport->Send(next_hop, std::move(frame), done);
//
// Thread rule: value types; thread-compatible.
#ifndef SKIPSWARM_NODE_TRANSPORT_FRAME_H_
#define SKIPSWARM_NODE_TRANSPORT_FRAME_H_

#include <cstdint>
#include <string>

#include "absl/strings/cord.h"
#include "proto/pipeline.pb.h"

namespace skipswarm::node {

// Largest PayloadChunk on the wire (docs/DESIGN.md §4).
inline constexpr size_t kMaxChunkBytes = size_t{1} << 20;
// Largest payload a frame may carry (TensorMeta.payload_bytes limit).
inline constexpr uint64_t kMaxPayloadBytes = uint64_t{256} << 20;
// Longest route (FrameHeader.route).
inline constexpr int kMaxRouteHops = 64;

struct Frame {
  proto::FrameHeader header;
  // The encoded tensor. A Cord so that chunks received from the wire are
  // joined without copying; call payload.Flatten() for one contiguous span.
  absl::Cord payload;
};

// Number of chunks `payload_bytes` travels in with `chunk_bytes`-sized
// chunks (0 for an empty payload).
uint32_t ChunkCountFor(uint64_t payload_bytes, size_t chunk_bytes = kMaxChunkBytes);

// Makes the header describe the payload: sets protocol_version,
// tensor.payload_bytes, tensor.payload_crc32c and chunk_count (for
// kMaxChunkBytes chunks). Senders call it once the payload is final.
void SealFrame(Frame& frame);

// Identity of a frame for duplicate detection: the same micro-batch at the
// same hop in the same direction is delivered at most once.
struct FrameKey {
  std::string origin;
  uint64_t iteration = 0;
  uint64_t mb_id = 0;
  int direction = 0;
  uint32_t hop_index = 0;
  // A verify-only copy (header.verify set) is another frame than the
  // micro-batch's own forward to the same hop: the replica that answered
  // it may later get the real one after a re-route.
  bool verify = false;

  static FrameKey Of(const proto::FrameHeader& header);

  friend bool operator==(const FrameKey& a, const FrameKey& b) {
    return a.origin == b.origin && a.iteration == b.iteration &&
           a.mb_id == b.mb_id && a.direction == b.direction &&
           a.hop_index == b.hop_index && a.verify == b.verify;
  }
  template <typename H>
  friend H AbslHashValue(H h, const FrameKey& k) {
    return H::combine(std::move(h), k.origin, k.iteration, k.mb_id,
                      k.direction, k.hop_index, k.verify);
  }
};

// "it=3 mb=7 fwd hop=2/5 origin=ab12cd34 bytes=4194304", for logs.
std::string DescribeFrame(const proto::FrameHeader& header);

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRANSPORT_FRAME_H_
