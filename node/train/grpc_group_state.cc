// StageService.FetchState served and fetched (Note [Digest re-sync] in
// node_trainer.h): <= 1 MiB chunks with CRC-32C, bounded by the stage's
// known size.
#include <glog/logging.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/crc32c.h"
#include "common/real_clock.h"
#include "node/train/grpc_group_impl.h"
#include "proto/grpc_status.h"
#include "proto/stage.grpc.pb.h"
#include "proto/version.h"

namespace skipswarm::node {

// Note [Digest re-sync] (node_trainer.h): serves the provider's bytes in
// <= 1 MiB chunks, each with its CRC-32C.
grpc::Status GrpcGroupComm::Impl::FetchState(grpc::ServerContext* context,
                                             const proto::StateRequest* request,
                                             grpc::ServerWriter<proto::StateChunk>* writer) {
  absl::Status ok = proto::CheckProtocolVersion(request->protocol_version());
  if (ok.ok() && !options_.swarm_id.empty() && request->swarm_id() != options_.swarm_id) {
    ok = absl::PermissionDeniedError("wrong swarm id");
  }
  if (ok.ok() && !creds().insecure()) {
    absl::StatusOr<common::NodeId> from = common::NodeId::FromBytes(request->from());
    ok = from.ok() ? creds().CheckPeer(context->auth_context(), *from)
                   : absl::UnauthenticatedError("state request without a sender id");
    if (ok.ok()) ok = CheckMember(*from);
    if (!ok.ok()) LOG(WARNING) << "refused state request from " << context->peer() << ": " << ok;
  }
  // Note [Peer quotas]: a slot while served, one message now, the bytes
  // once their number is known. Plain text: the sender's word is its id.
  common::PeerQuota::StreamSlot slot;
  absl::StatusOr<common::NodeId> quota_id = common::NodeId::FromBytes(request->from());
  if (ok.ok() && options_.state_quota != nullptr) {
    ok = quota_id.ok() ? TakeQuota(*options_.state_quota, *quota_id, 0, &slot)
                       : absl::InvalidArgumentError("state request without a sender id");
  }
  StateProvider provider;
  {
    absl::MutexLock lock(&mu_);
    provider = provider_;
  }
  if (ok.ok() && !provider) ok = absl::UnavailableError("no state to serve yet");
  // A StatusOr must never be built from an OK status (Abseil aborts), so the
  // refusal and the provider's answer take separate paths.
  if (!ok.ok()) {
    VLOG(1) << "state request from " << context->peer() << ": " << ok;
    return proto::ToGrpcStatus(ok);
  }
  absl::StatusOr<std::string> state =
      provider(static_cast<int>(request->stage()), request->iteration());
  if (!state.ok()) {
    VLOG(1) << "state request from " << context->peer() << ": " << state.status();
    return proto::ToGrpcStatus(state.status());
  }
  const uint64_t total = state->size();
  if (options_.state_quota != nullptr) {
    absl::Status bytes = options_.state_quota->Admit(*quota_id, total, /*messages=*/0);
    if (!bytes.ok()) {
      options_.state_quota->HoldRefusal(bytes);  // Note [Refusal hold]
      return proto::ToGrpcStatus(bytes);
    }
  }
  uint64_t offset = std::min<uint64_t>(request->resume_offset(), total);
  do {
    const uint64_t n = std::min<uint64_t>(total - offset, uint64_t{1} << 20);
    proto::StateChunk chunk;
    chunk.set_stage(request->stage());
    chunk.set_iteration(request->iteration());
    chunk.set_total_bytes(total);
    chunk.set_offset(offset);
    chunk.set_data(state->data() + offset, n);
    chunk.set_crc32c(common::Crc32c(chunk.data()));
    if (!writer->Write(chunk)) break;
    offset += n;
  } while (offset < total);
  return grpc::Status::OK;
}

absl::StatusOr<std::string> GrpcGroupComm::Impl::FetchNow(const std::string& address,
                                                          const common::NodeId& to,
                                                          uint64_t iteration, int stage) {
  if (address.empty()) return absl::UnavailableError("no StageService address");
  auto channel = ChannelFor(address, to);
  auto stub = proto::StageService::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(common::SystemDeadlineAfter(options_.push_deadline));
  proto::StateRequest request;
  request.set_protocol_version(proto::kProtocolVersion);
  request.set_swarm_id(options_.swarm_id);
  request.set_from(options_.self.Bytes());
  request.set_stage(static_cast<uint32_t>(stage));
  request.set_iteration(iteration);
  const uint64_t limit = MaxStateBytes(stage);
  auto reader = stub->FetchState(&context, request);
  std::string bytes;
  proto::StateChunk chunk;
  uint64_t total = 0;
  absl::Status bad;
  while (reader->Read(&chunk)) {
    if (bytes.empty()) total = chunk.total_bytes();
    if (total > limit) {
      bad = absl::ResourceExhaustedError(absl::StrCat("state of stage ", stage, " claims ", total,
                                                      " bytes; at most ", limit,
                                                      " expected (Note [Push admission])"));
      context.TryCancel();
      break;
    }
    if (chunk.offset() != bytes.size() || chunk.total_bytes() != total ||
        bytes.size() + chunk.data().size() > total ||
        common::Crc32c(chunk.data()) != chunk.crc32c()) {
      bad = absl::DataLossError("state chunk out of order, oversized or corrupt");
      context.TryCancel();
      break;
    }
    bytes += chunk.data();
  }
  absl::Status s = proto::ToAbslStatus(reader->Finish());
  if (!bad.ok()) return bad;
  if (!s.ok()) return s;
  if (bytes.size() != total) return absl::DataLossError("state transfer ended early");
  return bytes;
}

// Retries UNAVAILABLE answers every 100 ms for 10 s while `from` is alive.
void GrpcGroupComm::Impl::TryFetch(uint64_t iteration, int stage, common::NodeId from,
                                   std::shared_ptr<StateDone> done, int attempt) {
  constexpr int kMaxAttempts = 100;
  std::weak_ptr<Impl> weak = weak_from_this();
  const absl::Duration wait = attempt == 0 ? absl::ZeroDuration() : absl::Milliseconds(100);
  clock_->RunAfter(wait, [weak, iteration, stage, from, done, attempt] {
    auto self = weak.lock();
    if (!self) return;
    self->PostFor(from, [weak, iteration, stage, from, done, attempt] {
      auto self = weak.lock();
      if (!self) return;
      absl::StatusOr<std::string> state =
          self->FetchNow(self->AddressOf(from), from, iteration, stage);
      if (absl::IsUnavailable(state.status()) && attempt + 1 < kMaxAttempts &&
          self->view_->IsAlive(from)) {
        return self->TryFetch(iteration, stage, from, done, attempt + 1);
      }
      self->clock_->RunAfter(absl::ZeroDuration(), [done, state = std::move(state)]() mutable {
        (*done)(std::move(state));
      });
    });
  });
}

// A stage's state (weights and two AdamW moments, fp32, plus names and
// shapes; with Note [Outer steps] also the anchor, the outer momentum and
// the error-feedback residual, Note [Averaging state]) from its known size:
// 7 floats per element leave one spare; before any round, max_elements'
// worth.
uint64_t GrpcGroupComm::Impl::MaxStateBytes(int stage) {
  absl::MutexLock lock(&mu_);
  auto it = stage_elements_.find(stage);
  const uint64_t elements =
      it != stage_elements_.end() ? it->second : static_cast<uint64_t>(options_.max_elements);
  return 7 * elements * sizeof(float) + (uint64_t{1} << 20);
}

}  // namespace skipswarm::node
