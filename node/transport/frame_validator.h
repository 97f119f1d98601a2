// Receiver-side checks on every frame from a peer, run before any payload
// byte is used. Peers are untrusted (docs/DESIGN.md §4): nothing here CHECKs.
//
// Note [Frame validation]
// A receiving transport runs, in order:
//   1. CheckHeader when the header arrives: protocol version
//      (FAILED_PRECONDITION), swarm id (PERMISSION_DENIED), route length
//      1..64, hop_index < route length, route[hop_index] == this node,
//      direction set (a DIRECTION_SKETCH frame: a sketch_answer and no
//      tensor), TensorMeta.payload_bytes ≤ the limit, chunk_count
//      consistent with payload_bytes (0 iff empty; every chunk 1 B..1 MiB)
//      (INVALID_ARGUMENT).
//   1b. With check_tensor_shape: rank 1..8, every dim >= 1, a known codec of
//      the right dtype, and payload_bytes == what shape and codec imply
//      (INVALID_ARGUMENT), so a frame cannot declare a small tensor and
//      send (or make us reserve) a large payload.
//   1c. An abort_cause (Note [Stopping refusals] in node/stage/stage_server.h)
//      only on an abort notice (BACKWARD, no tensor), of a known kind,
//      naming a node of exactly 32 bytes, stopping before the frame's
//      iteration (INVALID_ARGUMENT): a peer cannot make the hops before it
//      carry an arbitrary blob to the origin.
//   2. CheckChunk per chunk: index == next expected, size 1 B..1 MiB, total
//      not beyond payload_bytes (INVALID_ARGUMENT).
//   3. CheckPayload on the whole payload: exact size (INVALID_ARGUMENT) and
//      CRC-32C (DATA_LOSS).
//   4. Reserve: (origin, iteration, mb, direction, hop, verify-only or not)
//      not seen before (ALREADY_EXISTS); the handler's refusal Releases the key again so a
//      refused frame may be retried once a slot frees.
// A failed check becomes the frame's ack and a LOG(WARNING), paced per
// sending peer (LogRejected; Note [Paced peer logs] in
// common/peer_log_limiter.h), and is counted by reason (FrameRefusal: the
// daemon's skipswarm_transport_frames_refused_total{reason}); the stream
// and the server keep going. Tensor
// shape/dtype are the stage's business (model/ wire codec), checked by the
// frame handler.
//
// Thread rule: thread-safe (the duplicate window is behind a mutex).
#ifndef SKIPSWARM_NODE_TRANSPORT_FRAME_VALIDATOR_H_
#define SKIPSWARM_NODE_TRANSPORT_FRAME_VALIDATOR_H_

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "common/node_id.h"
#include "common/peer_log_limiter.h"
#include "node/transport/frame.h"
#include "node/transport/transport.h"

namespace skipswarm::node {

struct ValidatorOptions {
  common::NodeId self;
  // Frames must carry exactly this swarm id. Empty: accept any (tests).
  std::string swarm_id;
  uint64_t max_payload_bytes = kMaxPayloadBytes;
  // How many recent frame keys are remembered for duplicate detection.
  size_t duplicate_window = 1 << 16;
  // Note [Frame validation] 1b: the header's tensor shape, codec and dtype
  // must imply exactly its payload_bytes (refused before a payload byte is
  // received or allocated). The daemons set it; off for transport tests
  // whose frames carry arbitrary bytes.
  bool check_tensor_shape = false;
};

// Why a frame was refused, from a fixed set (a metric label: no peer
// input reaches it): its refusal's code as Note [Frame validation] gives
// them (kVersion: FAILED_PRECONDITION, kSwarm: PERMISSION_DENIED,
// kMalformed: INVALID_ARGUMENT, kChecksum: DATA_LOSS, kDuplicate:
// ALREADY_EXISTS), kQuota: its sender's quota refused it (Note [Peer
// quotas]), kOther: any other code.
enum class FrameRefusal {
  kVersion,
  kSwarm,
  kMalformed,
  kChecksum,
  kDuplicate,
  kQuota,
  kOther
};
inline constexpr size_t kFrameRefusals = 7;
const char* FrameRefusalName(FrameRefusal r);  // "version", "swarm", ...
// The reason of a refusal with status `why` (not a quota's).
FrameRefusal FrameRefusalOf(const absl::Status& why);
// Refused frames so far, indexed by FrameRefusal.
using FrameRefusalCounts = std::array<uint64_t, kFrameRefusals>;

class FrameValidator {
 public:
  // `clock` paces the refused-frame log (LogRejected); borrowed, it must
  // outlive the validator. Null (checks only: fuzzers, tests): time stands
  // still, so each peer's first lines are shown and the rest only counted.
  explicit FrameValidator(ValidatorOptions options, common::Clock* clock = nullptr);
  // Logs the held-back counts still pending (Note [Paced peer logs]).
  ~FrameValidator();
  FrameValidator(const FrameValidator&) = delete;
  FrameValidator& operator=(const FrameValidator&) = delete;

  absl::Status CheckHeader(const proto::FrameHeader& header) const;
  // Step 1b alone: the payload size `meta`'s shape and codec imply.
  static absl::StatusOr<uint64_t> ImpliedPayloadBytes(const proto::TensorMeta& meta);
  // Step 1c alone, for a header with an abort_cause: only on an abort
  // notice, a known kind, a node id of NodeId::kBytes, and a last iteration
  // before the frame's.
  static absl::Status CheckAbortCause(const proto::FrameHeader& header);
  // `expected_index` chunks totalling `bytes_so_far` came before `chunk`.
  absl::Status CheckChunk(const proto::FrameHeader& header,
                          uint32_t expected_index, uint64_t bytes_so_far,
                          const proto::PayloadChunk& chunk) const;
  absl::Status CheckPayload(const proto::FrameHeader& header,
                            const absl::Cord& payload) const;
  // The same, given the payload's CRC-32C computed while it arrived.
  absl::Status CheckPayload(const proto::FrameHeader& header,
                            const absl::Cord& payload, uint32_t crc) const;
  // Header + payload, for transports that move whole frames (in-process).
  absl::Status CheckFrame(const Frame& frame) const;

  // Claims the frame's key; ALREADY_EXISTS if it was claimed before.
  absl::Status Reserve(const proto::FrameHeader& header);
  // Un-claims it (the handler refused the frame).
  void Release(const FrameKey& key);

  // Counts a rejected frame from `from` (by FrameRefusalOf(why)) and
  // LOG(WARNING)s it, paced per peer (Note [Paced peer logs] in
  // common/peer_log_limiter.h): each peer's first lines in full, then one
  // per interval saying how many were not shown; the count of a peer that
  // went quiet comes with a later call's sweep, or at destruction.
  // `by_quota`: the peer's quota refused it, which logs its own refusals:
  // counted (kQuota) only.
  void LogRejected(const PeerId& from, const proto::FrameHeader& header,
                   const absl::Status& why, bool by_quota = false);
  // Frames rejected so far (LogRejected calls), shown or not; and by reason.
  uint64_t rejected_frames() const;
  FrameRefusalCounts rejected_by_reason() const;

  const ValidatorOptions& options() const { return options_; }

 private:
  // One line per summary; called without log_mu_ held.
  static void LogHeldBack(const std::vector<common::PeerLogSummary>& summaries);

  const ValidatorOptions options_;
  const std::string self_bytes_;
  common::Clock* const clock_;

  mutable absl::Mutex log_mu_;
  FrameRefusalCounts rejected_by_reason_ ABSL_GUARDED_BY(log_mu_) = {};
  common::PeerLogLimiter log_limit_ ABSL_GUARDED_BY(log_mu_);

  absl::Mutex mu_;
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<FrameKey, uint64_t> seen_ ABSL_GUARDED_BY(mu_);
  std::deque<std::pair<FrameKey, uint64_t>> order_ ABSL_GUARDED_BY(mu_);
};

// Runs steps 3-4 of Note [Frame validation] on a complete frame, hands it
// to `handler` and routes the verdict to `ack`, releasing the duplicate
// key on refusal and logging rejections (LogRejected). Shared by the
// transports.
// `handler` may be null or empty (frame refused with UNAVAILABLE).
// `crc`: the payload's CRC-32C if the caller computed it on the way in.
void AdmitFrame(const std::shared_ptr<FrameValidator>& validator,
                const std::shared_ptr<const FrameHandler>& handler,
                const PeerId& from, Frame frame, AckFn ack,
                std::optional<uint32_t> crc = std::nullopt);

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRANSPORT_FRAME_VALIDATOR_H_
