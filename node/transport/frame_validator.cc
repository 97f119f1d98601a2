#include "node/transport/frame_validator.h"

#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "common/crc32c.h"
#include "proto/version.h"

namespace skipswarm::node {

const char* FrameRefusalName(FrameRefusal r) {
  switch (r) {
    case FrameRefusal::kVersion:
      return "version";
    case FrameRefusal::kSwarm:
      return "swarm";
    case FrameRefusal::kMalformed:
      return "malformed";
    case FrameRefusal::kChecksum:
      return "checksum";
    case FrameRefusal::kDuplicate:
      return "duplicate";
    case FrameRefusal::kQuota:
      return "quota";
    case FrameRefusal::kOther:
      break;
  }
  return "other";
}

FrameRefusal FrameRefusalOf(const absl::Status& why) {
  switch (why.code()) {
    case absl::StatusCode::kFailedPrecondition:
      return FrameRefusal::kVersion;
    case absl::StatusCode::kPermissionDenied:
      return FrameRefusal::kSwarm;
    case absl::StatusCode::kInvalidArgument:
      return FrameRefusal::kMalformed;
    case absl::StatusCode::kDataLoss:
      return FrameRefusal::kChecksum;
    case absl::StatusCode::kAlreadyExists:
      return FrameRefusal::kDuplicate;
    default:
      return FrameRefusal::kOther;
  }
}

FrameValidator::FrameValidator(ValidatorOptions options, common::Clock* clock)
    : options_(std::move(options)),
      self_bytes_(options_.self.Bytes()),
      clock_(clock),
      log_limit_(common::PeerLogLimiterOptions{}) {}

absl::Status FrameValidator::CheckHeader(const proto::FrameHeader& h) const {
  absl::Status version = proto::CheckProtocolVersion(h.protocol_version());
  if (!version.ok()) return version;
  if (!options_.swarm_id.empty() && h.swarm_id() != options_.swarm_id) {
    return absl::PermissionDeniedError(
        "frame is for another swarm (swarm_id differs from this node's)");
  }
  if (h.route_size() == 0 || h.route_size() > kMaxRouteHops) {
    return absl::InvalidArgumentError(absl::StrCat(
        "route has ", h.route_size(), " hops; must be 1..", kMaxRouteHops));
  }
  if (h.hop_index() >= static_cast<uint32_t>(h.route_size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "hop_index ", h.hop_index(), " out of range for a route of ",
        h.route_size(), " hops"));
  }
  if (h.route(h.hop_index()).node_id() != self_bytes_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "route[", h.hop_index(), "] is not this node (",
        options_.self.ShortString(), ")"));
  }
  if (h.direction() != proto::DIRECTION_FORWARD &&
      h.direction() != proto::DIRECTION_BACKWARD && h.direction() != proto::DIRECTION_SKETCH) {
    return absl::InvalidArgumentError("direction is not forward, backward or sketch");
  }
  if (h.direction() == proto::DIRECTION_SKETCH &&
      (h.tensor().payload_bytes() != 0 || h.tensor().shape_size() != 0 || !h.has_sketch_answer())) {
    return absl::InvalidArgumentError("a sketch frame carries an answer and no tensor");
  }
  if (h.has_abort_cause()) {
    absl::Status cause = CheckAbortCause(h);
    if (!cause.ok()) return cause;
  }
  const uint64_t bytes = h.tensor().payload_bytes();
  if (bytes > options_.max_payload_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("payload of ", bytes, " bytes exceeds the limit of ",
                     options_.max_payload_bytes));
  }
  if (options_.check_tensor_shape && (bytes > 0 || h.tensor().shape_size() > 0)) {
    absl::StatusOr<uint64_t> implied = ImpliedPayloadBytes(h.tensor());
    if (!implied.ok()) return implied.status();
    if (*implied != bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "payload_bytes ", bytes, " does not match the declared tensor (", *implied,
          " bytes for its shape and codec)"));
    }
  }
  const uint64_t min_chunks = ChunkCountFor(bytes);
  if (h.chunk_count() < min_chunks || h.chunk_count() > bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "chunk_count ", h.chunk_count(), " inconsistent with payload_bytes ",
        bytes, " (chunks must hold 1 B..1 MiB each)"));
  }
  return absl::OkStatus();
}

absl::Status FrameValidator::CheckAbortCause(const proto::FrameHeader& h) {
  // Only an abort notice (Note [Abort notices] in node/stage/stage_server.cc:
  // an empty BACKWARD frame with no tensor) carries a cause.
  if (h.direction() != proto::DIRECTION_BACKWARD || h.tensor().payload_bytes() != 0 ||
      h.tensor().shape_size() != 0 || h.tensor().dtype() != proto::DTYPE_UNSPECIFIED) {
    return absl::InvalidArgumentError("abort_cause on a frame that is not an abort notice");
  }
  const proto::AbortCause& c = h.abort_cause();
  if (c.kind() != proto::AbortCause::ABORT_CAUSE_STOPPING) {
    return absl::InvalidArgumentError(
        absl::StrCat("abort_cause of unknown kind ", static_cast<int>(c.kind())));
  }
  if (c.node().size() != common::NodeId::kBytes) {
    return absl::InvalidArgumentError(absl::StrCat("abort_cause names a node of ",
                                                   c.node().size(), " bytes; must be ",
                                                   common::NodeId::kBytes));
  }
  // The stopping node refused this iteration, so it stops before it (0 at
  // iteration 0: the sender's fallback, StoppingRefusalCause).
  if (c.stop_after() >= h.iteration() && c.stop_after() > 0) {
    return absl::InvalidArgumentError(absl::StrCat("abort_cause stops after iteration ",
                                                   c.stop_after(), ", not before the frame's ",
                                                   h.iteration()));
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> FrameValidator::ImpliedPayloadBytes(const proto::TensorMeta& meta) {
  if (meta.shape_size() < 1 || meta.shape_size() > 8) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor rank ", meta.shape_size(), " is not in 1..8"));
  }
  // Bounded well below overflow: 2^40 elements is far beyond any limit.
  constexpr uint64_t kMaxElements = uint64_t{1} << 40;
  uint64_t n = 1;
  for (int64_t d : meta.shape()) {
    if (d < 1 || static_cast<uint64_t>(d) > kMaxElements / n) {
      return absl::InvalidArgumentError(absl::StrCat("tensor dim ", d, " out of range"));
    }
    n *= static_cast<uint64_t>(d);
  }
  const bool fp = meta.dtype() == proto::DTYPE_FLOAT32;
  switch (meta.codec()) {
    case proto::CODEC_RAW_FP32:
      if (fp) return n * 4;
      break;
    case proto::CODEC_FP16:
    case proto::CODEC_BF16:
      if (fp) return n * 2;
      break;
    case proto::CODEC_INT8_BLOCKWISE:
      if (fp && meta.block_size() >= 1 && meta.block_size() <= (1u << 20)) {
        return (n + meta.block_size() - 1) / meta.block_size() * 4 + n;
      }
      break;
    case proto::CODEC_RAW_INT64:
      if (meta.dtype() == proto::DTYPE_INT64) return n * 8;
      break;
    default:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat("codec ", meta.codec(), " with dtype ",
                                                 meta.dtype(), " (block ", meta.block_size(),
                                                 ") is not a valid tensor encoding"));
}

absl::Status FrameValidator::CheckChunk(const proto::FrameHeader& h,
                                        uint32_t expected_index,
                                        uint64_t bytes_so_far,
                                        const proto::PayloadChunk& chunk) const {
  if (chunk.index() != expected_index) {
    return absl::InvalidArgumentError(absl::StrCat(
        "chunk ", chunk.index(), " arrived where chunk ", expected_index,
        " was expected"));
  }
  if (expected_index >= h.chunk_count()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "more chunks than the header's chunk_count ", h.chunk_count()));
  }
  const uint64_t size = chunk.data().size();
  if (size == 0 || size > kMaxChunkBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk ", chunk.index(), " has ", size,
                     " bytes; must be 1..", kMaxChunkBytes));
  }
  if (bytes_so_far + size > h.tensor().payload_bytes()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "chunks exceed payload_bytes ", h.tensor().payload_bytes()));
  }
  return absl::OkStatus();
}

absl::Status FrameValidator::CheckPayload(const proto::FrameHeader& h,
                                          const absl::Cord& payload) const {
  return CheckPayload(h, payload, common::Crc32c(payload));
}

absl::Status FrameValidator::CheckPayload(const proto::FrameHeader& h,
                                          const absl::Cord& payload,
                                          uint32_t crc) const {
  if (payload.size() != h.tensor().payload_bytes()) {
    return absl::InvalidArgumentError(
        absl::StrCat("payload has ", payload.size(), " bytes, header says ",
                     h.tensor().payload_bytes()));
  }
  if (crc != h.tensor().payload_crc32c()) {
    return absl::DataLossError(absl::StrCat(
        "payload CRC-32C mismatch: computed ", crc, ", header says ",
        h.tensor().payload_crc32c()));
  }
  return absl::OkStatus();
}

absl::Status FrameValidator::CheckFrame(const Frame& frame) const {
  absl::Status status = CheckHeader(frame.header);
  if (!status.ok()) return status;
  return CheckPayload(frame.header, frame.payload);
}

absl::Status FrameValidator::Reserve(const proto::FrameHeader& header) {
  FrameKey key = FrameKey::Of(header);
  absl::MutexLock lock(&mu_);
  if (seen_.contains(key)) {
    return absl::AlreadyExistsError(
        "duplicate frame: this (origin, iteration, mb, direction, hop) was "
        "already admitted");
  }
  const uint64_t seq = next_seq_++;
  seen_.emplace(key, seq);
  order_.emplace_back(std::move(key), seq);
  while (order_.size() > options_.duplicate_window) {
    auto it = seen_.find(order_.front().first);
    if (it != seen_.end() && it->second == order_.front().second) {
      seen_.erase(it);
    }
    order_.pop_front();
  }
  return absl::OkStatus();
}

void FrameValidator::Release(const FrameKey& key) {
  absl::MutexLock lock(&mu_);
  seen_.erase(key);  // its stale entry in order_ is skipped on eviction
}

void FrameValidator::LogRejected(const PeerId& from, const proto::FrameHeader& header,
                                 const absl::Status& why, bool by_quota) {
  const absl::Duration now = clock_ != nullptr ? clock_->SteadyNow() : absl::ZeroDuration();
  const FrameRefusal reason = by_quota ? FrameRefusal::kQuota : FrameRefusalOf(why);
  common::PeerLogVerdict verdict;
  {
    absl::MutexLock lock(&log_mu_);
    ++rejected_by_reason_[static_cast<size_t>(reason)];
    if (by_quota) return;
    verdict = log_limit_.Allow(from.Bytes(), now);
  }
  // Logged outside the lock: a log sink may be slow.
  LogHeldBack(verdict.due);
  if (!verdict.show) return;
  std::string held;
  if (verdict.held > 0) {
    absl::StrAppend(&held, "; ", verdict.held, " more refused frames from ", from.ShortString(),
                    " not shown");
  }
  if (verdict.forgotten > 0) {
    absl::StrAppend(&held, "; ", verdict.forgotten,
                    " more refused frames from peers no longer tracked not shown");
  }
  LOG(WARNING) << "rejected frame from " << from << " (" << DescribeFrame(header)
               << "): " << why << held;
}

FrameValidator::~FrameValidator() {
  std::vector<common::PeerLogSummary> pending;
  {
    absl::MutexLock lock(&log_mu_);
    pending = log_limit_.Flush();
  }
  LogHeldBack(pending);
}

void FrameValidator::LogHeldBack(const std::vector<common::PeerLogSummary>& summaries) {
  // Note [Paced peer logs]: the counts of peers that went quiet.
  for (const common::PeerLogSummary& s : summaries) {
    absl::StatusOr<common::NodeId> peer = common::NodeId::FromBytes(s.peer);
    LOG(WARNING) << s.held << " more refused frames from "
                 << (peer.ok() ? peer->ShortString() : "peers no longer tracked")
                 << " not shown";
  }
}

uint64_t FrameValidator::rejected_frames() const {
  const FrameRefusalCounts counts = rejected_by_reason();
  return std::accumulate(counts.begin(), counts.end(), uint64_t{0});
}

FrameRefusalCounts FrameValidator::rejected_by_reason() const {
  absl::MutexLock lock(&log_mu_);
  return rejected_by_reason_;
}

void AdmitFrame(const std::shared_ptr<FrameValidator>& validator,
                const std::shared_ptr<const FrameHandler>& handler,
                const PeerId& from, Frame frame, AckFn ack,
                std::optional<uint32_t> crc) {
  absl::Status status =
      crc.has_value() ? validator->CheckPayload(frame.header, frame.payload, *crc)
                      : validator->CheckPayload(frame.header, frame.payload);
  if (status.ok()) status = validator->Reserve(frame.header);
  if (!status.ok()) {
    validator->LogRejected(from, frame.header, status);
    ack(std::move(status));
    return;
  }
  FrameKey key = FrameKey::Of(frame.header);
  if (handler == nullptr || !*handler) {
    validator->Release(key);
    ack(absl::UnavailableError("node has no frame handler yet"));
    return;
  }
  (*handler)(from, std::move(frame),
             [validator, key = std::move(key),
              ack = std::move(ack)](absl::Status admission) mutable {
               if (!admission.ok()) validator->Release(key);
               ack(std::move(admission));
             });
}

}  // namespace skipswarm::node
