#include "node/daemon/gossip/state_transfer.h"

#include <glog/logging.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <set>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/crc32c.h"
#include "common/sha256.h"
#include "common/real_clock.h"
#include "common/status_macros.h"
#include "node/daemon/gossip/state_chunks.h"
#include "proto/grpc_status.h"
#include "proto/stage.grpc.pb.h"
#include "proto/version.h"

namespace skipswarm::node {
namespace {

// Copies of a Snapshot share its bytes (immutable once served): a request
// takes one under the lock and streams it after, without copying the
// stage's tens of MB.
struct Snapshot {
  std::shared_ptr<const std::string> bytes = std::make_shared<const std::string>();
  std::string sha256;
  uint64_t params_digest = 0;
};

// A stage snapshot as it is served: its bytes, their SHA-256, its digest.
Snapshot Served(StageSnapshot snap) {
  Snapshot s;
  s.sha256 = common::Sha256(snap.bytes);
  s.params_digest = snap.params_digest;
  s.bytes = std::make_shared<const std::string>(std::move(snap.bytes));
  return s;
}

}  // namespace

class StateServer::Impl final : public proto::StateTransferService::Service {
 public:
  Impl(const StateServerOptions& options, SnapshotFn snapshot)
      : options_(options), snapshot_(std::move(snapshot)) {}

  absl::Status Start() {
    if (options_.serve_on != nullptr) {
      options_.serve_on->RegisterService(this);
      return absl::OkStatus();
    }
    grpc::ServerBuilder builder;
    // Exclusive ports: gRPC sets SO_REUSEPORT by default, which let a second
    // daemon on the same port start a second swarm silently.
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    builder.AddListeningPort(options_.listen_address,
                             options_.credentials ? options_.credentials->ForServer()
                                                  : grpc::InsecureServerCredentials(),
                             &port_);
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
    if (server_ == nullptr || port_ == 0) {
      return absl::UnavailableError(
          absl::StrCat("cannot serve state transfer on ", options_.listen_address,
                       " (port in use, or not an address of this host?); see --state_listen"));
    }
    return absl::OkStatus();
  }

  void Shutdown() {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      stopping_ = true;
    }
    if (server_) server_->Shutdown(common::SystemDeadlineAfter(absl::Seconds(1)));
  }

  void OnBoundary(uint64_t next, const std::map<int, uint64_t>& digests) {
    std::set<int> wanted;
    {
      absl::MutexLock lock(&mu_);
      at_boundary_ = next;
      digests_ = digests;
      for (const auto& [key, n] : wanted_) {
        if (key.second == next) wanted.insert(key.first);
      }
    }
    // Snapshot outside the lock (it serializes the stage: milliseconds to
    // seconds); waiters re-check when it lands.
    std::map<int, absl::StatusOr<StageSnapshot>> taken;
    for (int stage : wanted) {
      {
        absl::MutexLock lock(&mu_);
        if (snapshots_.count({stage, next}) > 0) continue;  // published already
      }
      taken.emplace(stage, snapshot_(stage));
    }
    absl::MutexLock lock(&mu_);
    for (auto& [stage, snap] : taken) {
      if (!snap.ok()) {
        LOG(ERROR) << "state snapshot of stage " << stage << " failed: " << snap.status();
        failed_[{stage, next}] = snap.status();
        continue;
      }
      Snapshot s = Served(*std::move(snap));
      LOG(INFO) << "state snapshot of stage " << stage << " at iteration " << next << ": "
                << s.bytes->size() << " bytes for joiners";
      KeepSnapshotLocked({stage, next}, std::move(s));
    }
    for (auto it = wanted_.begin(); it != wanted_.end();) {
      it = it->first.second <= next ? wanted_.erase(it) : std::next(it);
    }
  }

  void KeepSnapshotLocked(std::pair<int, uint64_t> key, Snapshot s)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    snapshots_[key] = std::move(s);
    while (static_cast<int>(snapshots_.size()) > std::max(1, options_.max_snapshots)) {
      auto oldest = snapshots_.begin();
      for (auto i = snapshots_.begin(); i != snapshots_.end(); ++i) {
        if (i->first.second < oldest->first.second) oldest = i;
      }
      snapshots_.erase(oldest);
    }
  }

  void Publish(int stage, uint64_t iteration, StageSnapshot snap) {
    Snapshot s = Served(std::move(snap));
    absl::MutexLock lock(&mu_);
    KeepSnapshotLocked({stage, iteration}, std::move(s));
  }

  void HoldCopy(int stage, uint64_t iteration, StageSnapshot snap, int keep) {
    Snapshot s = Served(std::move(snap));
    absl::MutexLock lock(&mu_);
    copies_[{stage, iteration}] = std::move(s);
    // The newest `keep` of this stage (the map orders a stage's copies by
    // iteration).
    auto first = copies_.lower_bound({stage, 0});
    auto end = copies_.lower_bound({stage + 1, 0});
    for (auto n = std::distance(first, end); n > std::max(1, keep); --n) {
      first = copies_.erase(first);
    }
  }

  std::vector<std::pair<int, uint64_t>> HeldCopies() {
    absl::MutexLock lock(&mu_);
    std::vector<std::pair<int, uint64_t>> out;
    for (const auto& [key, snap] : copies_) out.push_back(key);
    return out;
  }

  grpc::Status Health(grpc::ServerContext*, const proto::HealthRequest*,
                      proto::HealthResponse* response) override {
    absl::MutexLock lock(&mu_);
    response->set_protocol_version(proto::kProtocolVersion);
    response->set_node_id(options_.self.Bytes());
    response->set_version(proto::kSoftwareVersion);
    for (const auto& [stage, digest] : digests_) {
      proto::StageHealth* h = response->add_stages();
      h->set_stage(static_cast<uint32_t>(stage));
      h->set_iteration(at_boundary_);
      h->set_params_digest(digest);
    }
    for (const auto& [key, snap] : copies_) {
      proto::StageHealth* h = response->add_copies();
      h->set_stage(static_cast<uint32_t>(key.first));
      h->set_iteration(key.second);
      h->set_params_digest(snap.params_digest);
    }
    return grpc::Status::OK;
  }

  // Note [Snapshot in the iteration]: the lock is released while the
  // stage is serialised; a concurrent request for the same key finds the
  // snapshot or takes an identical one.
  absl::Status SnapshotInIterationLocked(int stage, uint64_t it)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    mu_.Unlock();
    absl::StatusOr<StageSnapshot> snap = options_.in_iteration(stage, it);
    Snapshot s;
    if (snap.ok()) s = Served(*std::move(snap));
    mu_.Lock();
    if (!snap.ok()) {
      return absl::Status(snap.status().code(),
                          absl::StrCat("iteration ", it, " already started here; stage ", stage,
                                       "'s state of its boundary: ", snap.status().message()));
    }
    if (snapshots_.count({stage, it}) > 0) return absl::OkStatus();
    LOG(INFO) << "state snapshot of stage " << stage << " at iteration " << it
              << " taken in the iteration: " << s.bytes->size() << " bytes for joiners";
    KeepSnapshotLocked({stage, it}, std::move(s));
    return absl::OkStatus();
  }

  // A hosted stage's snapshot at boundary `it`: waits for the boundary
  // when it is still ahead (Note [Boundary snapshots]).
  absl::StatusOr<Snapshot> AwaitSnapshotLocked(grpc::ServerContext* context, int stage,
                                               uint64_t it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const std::pair<int, uint64_t> key{stage, it};
    if (digests_.count(stage) == 0) {
      return absl::NotFoundError(absl::StrCat("this node does not host stage ", stage));
    }
    if (snapshots_.count(key) == 0 && at_boundary_ == it && options_.in_iteration) {
      absl::Status taken = SnapshotInIterationLocked(stage, it);
      if (!taken.ok()) return taken;
    }
    if (snapshots_.count(key) == 0 && at_boundary_ >= it) {
      return absl::FailedPreconditionError(
          absl::StrCat("iteration ", it, " already started here (at ", at_boundary_,
                       "); no snapshot of stage ", stage, " for it"));
    }
    ++wanted_[key];
    ++waiting_;
    // Wait in short slices so a cancelled call or a shutdown ends it.
    absl::Duration waited;
    auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stopping_ || snapshots_.count(key) > 0 || failed_.count(key) > 0 ||
             at_boundary_ > it;
    };
    while (!mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Milliseconds(100))) {
      waited += absl::Milliseconds(100);
      if (context->IsCancelled() || waited >= options_.max_wait) break;
    }
    --waiting_;
    auto found = snapshots_.find(key);
    if (found != snapshots_.end()) return found->second;
    auto f = failed_.find(key);
    if (f != failed_.end()) return f->second;
    if (stopping_) return absl::UnavailableError("shutting down");
    return absl::DeadlineExceededError(
        absl::StrCat("no snapshot of stage ", stage, " at iteration ", it, " here"));
  }

  grpc::Status FetchState(grpc::ServerContext* context, const proto::StateRequest* request,
                          grpc::ServerWriter<proto::StateChunk>* writer) override {
    absl::Status ok = proto::CheckProtocolVersion(request->protocol_version());
    if (ok.ok() && !options_.swarm_id.empty() && request->swarm_id() != options_.swarm_id) {
      ok = absl::PermissionDeniedError("wrong swarm id");
    }
    if (ok.ok() && options_.credentials) {
      absl::StatusOr<common::NodeId> from = common::NodeId::FromBytes(request->from());
      ok = from.ok() ? options_.credentials->CheckPeer(context->auth_context(), *from)
                     : absl::InvalidArgumentError("bad sender id");
    }
    if (!ok.ok()) LOG(WARNING) << "refused state request from " << context->peer() << ": " << ok;
    if (!ok.ok()) return proto::ToGrpcStatus(ok);
    // Note [Peer quotas]: the slot is held while the request waits for its
    // boundary and while it is streamed.
    common::PeerQuota::StreamSlot slot;
    absl::StatusOr<common::NodeId> quota_id = common::NodeId::FromBytes(request->from());
    if (options_.quota != nullptr) {
      if (!quota_id.ok()) {
        return proto::ToGrpcStatus(absl::InvalidArgumentError("bad sender id"));
      }
      absl::StatusOr<common::PeerQuota::StreamSlot> taken = options_.quota->OpenStream(*quota_id);
      if (!taken.ok()) {
        options_.quota->HoldRefusal(taken.status());  // Note [Refusal hold]
        return proto::ToGrpcStatus(taken.status());
      }
      slot = std::move(*taken);  // the request's message
    }
    const int stage = static_cast<int>(request->stage());
    const uint64_t it = request->iteration();
    const std::pair<int, uint64_t> key{stage, it};
    Snapshot snap;
    {
      absl::MutexLock lock(&mu_);
      if (copies_.count(key) == 0 && failed_on_purpose_ < options_.fail_first_transfers) {
        ++failed_on_purpose_;
        return proto::ToGrpcStatus(
            absl::UnavailableError("state transfer refused (fault injection)"));
      }
      // Note [Checkpoint copies]: a copy held for another node's stage is
      // served as it is, hosted or not, whatever the boundary.
      if (auto copy = copies_.find(key); copy != copies_.end()) {
        snap = copy->second;
      } else {
        absl::StatusOr<Snapshot> waited = AwaitSnapshotLocked(context, stage, it);
        if (!waited.ok()) return proto::ToGrpcStatus(waited.status());
        snap = *std::move(waited);  // shares the bytes: streaming runs without the lock
      }
    }
    const uint64_t total = snap.bytes->size();
    uint64_t offset = std::min<uint64_t>(request->resume_offset(), total);
    if (options_.quota != nullptr) {
      absl::Status bytes = options_.quota->Admit(*quota_id, total - offset, /*messages=*/0);
      if (!bytes.ok()) {
        options_.quota->HoldRefusal(bytes);  // Note [Refusal hold]
        return proto::ToGrpcStatus(bytes);
      }
    }
    int sent = 0;
    do {
      const size_t n = std::min<uint64_t>(options_.chunk_bytes, total - offset);
      proto::StateChunk chunk;
      chunk.set_stage(static_cast<uint32_t>(stage));
      chunk.set_iteration(it);
      chunk.set_total_bytes(total);
      chunk.set_offset(offset);
      chunk.set_data(snap.bytes->data() + offset, n);
      chunk.set_crc32c(common::Crc32c(chunk.data()));
      chunk.set_sha256(snap.sha256);
      chunk.set_params_digest(snap.params_digest);
      if (options_.cut_first_stream_after_chunks > 0 &&
          sent == options_.cut_first_stream_after_chunks) {
        absl::MutexLock lock(&mu_);
        if (!cut_done_) {
          cut_done_ = true;
          return proto::ToGrpcStatus(absl::UnavailableError("stream cut (fault injection)"));
        }
      }
      if (!writer->Write(chunk)) {
        return proto::ToGrpcStatus(absl::UnavailableError("joiner went away"));
      }
      ++sent;
      offset += n;
    } while (offset < total);
    return grpc::Status::OK;
  }

  const StateServerOptions options_;
  const SnapshotFn snapshot_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool cut_done_ ABSL_GUARDED_BY(mu_) = false;
  int failed_on_purpose_ ABSL_GUARDED_BY(mu_) = 0;
  int waiting_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t at_boundary_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<int, uint64_t> digests_ ABSL_GUARDED_BY(mu_);
  // (stage, iteration) -> requests waiting for that boundary.
  std::map<std::pair<int, uint64_t>, int> wanted_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<int, uint64_t>, Snapshot> snapshots_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<int, uint64_t>, absl::Status> failed_ ABSL_GUARDED_BY(mu_);
  // Note [Checkpoint copies]: (stage, iteration) -> a copy held for peers.
  std::map<std::pair<int, uint64_t>, Snapshot> copies_ ABSL_GUARDED_BY(mu_);
};

absl::StatusOr<std::unique_ptr<StateServer>> StateServer::Create(
    const StateServerOptions& options, SnapshotFn snapshot) {
  auto impl = std::make_shared<Impl>(options, std::move(snapshot));
  absl::Status s = impl->Start();
  if (!s.ok()) return s;
  return std::unique_ptr<StateServer>(new StateServer(std::move(impl)));
}

StateServer::StateServer(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
StateServer::~StateServer() { impl_->Shutdown(); }
int StateServer::port() const { return impl_->port_; }
void StateServer::OnBoundary(uint64_t next_iteration, const std::map<int, uint64_t>& digests) {
  impl_->OnBoundary(next_iteration, digests);
}
void StateServer::Shutdown() { impl_->Shutdown(); }
void StateServer::Publish(int stage, uint64_t iteration, StageSnapshot snapshot) {
  impl_->Publish(stage, iteration, std::move(snapshot));
}
void StateServer::HoldCopy(int stage, uint64_t iteration, StageSnapshot snapshot, int keep) {
  impl_->HoldCopy(stage, iteration, std::move(snapshot), keep);
}
std::vector<std::pair<int, uint64_t>> StateServer::HeldCopies() const {
  return impl_->HeldCopies();
}
int StateServer::waiting() const {
  absl::MutexLock lock(&impl_->mu_);
  return impl_->waiting_;
}

namespace {

std::shared_ptr<grpc::Channel> ChannelTo(
    const StateSource& source,
    const std::shared_ptr<const identity::PeerCredentials>& credentials) {
  if (!credentials) {
    return grpc::CreateChannel(source.address, grpc::InsecureChannelCredentials());
  }
  grpc::ChannelArguments args;
  credentials->ConfigureChannel(args);
  return grpc::CreateCustomChannel(source.address, credentials->ForChannel(source.id), args);
}

absl::Status FetchCall(proto::StateTransferService::Stub* stub, const FetchOptions& o,
                       grpc::ClientContext* context, std::string* got, std::string* sha,
                       uint64_t* digest);

// One FetchState call; appends to `got` (which holds `got->size()` bytes of
// the snapshot whose SHA-256 is `*sha`, empty when nothing is held yet).
absl::Status FetchOnce(proto::StateTransferService::Stub* stub, const FetchOptions& o, std::string* got,
                       std::string* sha, uint64_t* digest) {
  grpc::ClientContext context;
  context.set_deadline(common::SystemDeadlineAfter(o.deadline));
  // Note [Stopping while joining]: the call may wait for the source's
  // boundary for a minute; a stop must not.
  absl::Notification call_over;
  std::atomic<bool> cancelled{false};
  std::thread watcher;
  if (o.cancelled) {
    watcher = std::thread([&] {
      while (!call_over.WaitForNotificationWithTimeout(absl::Milliseconds(50))) {
        if (o.cancelled()) {
          cancelled.store(true);
          context.TryCancel();
          return;
        }
      }
    });
  }
  absl::Status s = FetchCall(stub, o, &context, got, sha, digest);
  call_over.Notify();
  if (watcher.joinable()) watcher.join();
  if (cancelled.load()) return absl::CancelledError("state transfer stopped by a signal");
  return s;
}

// FetchOnce's call, under `context`.
absl::Status FetchCall(proto::StateTransferService::Stub* stub, const FetchOptions& o,
                       grpc::ClientContext* context_ptr, std::string* got, std::string* sha,
                       uint64_t* digest) {
  grpc::ClientContext& context = *context_ptr;
  proto::StateRequest request;
  request.set_protocol_version(proto::kProtocolVersion);
  request.set_swarm_id(o.swarm_id);
  request.set_from(o.self.Bytes());
  request.set_stage(static_cast<uint32_t>(o.stage));
  request.set_iteration(o.iteration);
  request.set_resume_offset(got->size());
  auto reader = stub->FetchState(&context, request);
  // Note [Receiving state chunks] (state_chunks.h).
  StateChunkReceiver receiver({.stage = o.stage,
                               .iteration = o.iteration,
                               .max_bytes = o.max_bytes,
                               .on_first_chunk = o.on_first_chunk},
                              got, sha, digest);
  proto::StateChunk chunk;
  while (reader->Read(&chunk)) {
    absl::Status accepted = receiver.Accept(chunk);
    if (!accepted.ok()) {
      context.TryCancel();
      return accepted;
    }
  }
  absl::Status s = proto::ToAbslStatus(reader->Finish());
  if (!s.ok()) return s;
  return receiver.Finish();
}

}  // namespace

absl::StatusOr<FetchedState> FetchStageState(const std::vector<StateSource>& sources,
                                             const FetchOptions& options) {
  FetchedState out;
  std::string sha;
  std::vector<std::string> errors;
  int passed = 0;  // sources already past the boundary
  for (const StateSource& source : sources) {
    const std::string& address = source.address;
    if (options.cancelled && options.cancelled()) {
      return absl::CancelledError("state transfer stopped by a signal");
    }
    ++out.sources_tried;
    auto channel = ChannelTo(source, options.credentials);
    auto stub = proto::StateTransferService::NewStub(channel);
    absl::Status last;
    for (int attempt = 0; attempt <= options.resumes_per_source; ++attempt) {
      ++out.streams;
      last = FetchOnce(stub.get(), options, &out.bytes, &sha, &out.params_digest);
      if (last.ok()) {
        out.source = address;
        return out;
      }
      if (absl::IsCancelled(last)) return last;
      LOG(WARNING) << "state transfer of stage " << options.stage << " from " << address
                   << " broke at byte " << out.bytes.size() << ": " << last;
      // Retrying the same source only helps for a broken stream.
      if (!absl::IsUnavailable(last) && !absl::IsAborted(last) && !absl::IsDataLoss(last)) break;
    }
    if (absl::IsFailedPrecondition(last)) ++passed;
    errors.push_back(absl::StrCat(address, ": ", last.ToString()));
  }
  const std::string why = absl::StrCat("no replica delivered stage ", options.stage,
                                       " at iteration ", options.iteration, ": ",
                                       absl::StrJoin(errors, "; "));
  // Every source is past that boundary: the caller needs a later one.
  if (!sources.empty() && passed == static_cast<int>(sources.size())) {
    return absl::FailedPreconditionError(why);
  }
  return absl::UnavailableError(why);
}

namespace {

// One Health call on `channel`: what its source trains (stages) and what
// copies it holds (copies).
absl::StatusOr<proto::HealthResponse> QueryHealthOn(const std::shared_ptr<grpc::Channel>& channel,
                                                    absl::Duration deadline) {
  auto stub = proto::StateTransferService::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(common::SystemDeadlineAfter(deadline));
  proto::HealthRequest request;
  request.set_protocol_version(proto::kProtocolVersion);
  proto::HealthResponse response;
  SS_RETURN_IF_ERROR(proto::ToAbslStatus(stub->Health(&context, request, &response)));
  return response;
}

// As above on a fresh channel to `source`.
absl::StatusOr<proto::HealthResponse> QueryHealth(
    const StateSource& source,
    const std::shared_ptr<const identity::PeerCredentials>& credentials,
    absl::Duration deadline) {
  return QueryHealthOn(ChannelTo(source, credentials), deadline);
}

absl::StatusOr<uint64_t> IterationOf(const StateSource& source,
                                     const proto::HealthResponse& response) {
  if (response.stages_size() == 0) {
    return absl::FailedPreconditionError(absl::StrCat(source.address, " is not training yet"));
  }
  return response.stages(0).iteration();
}

}  // namespace

absl::StatusOr<uint64_t> QuerySourceIteration(
    const StateSource& source,
    const std::shared_ptr<const identity::PeerCredentials>& credentials,
    absl::Duration deadline) {
  SS_ASSIGN_OR_RETURN(proto::HealthResponse response,
                      QueryHealth(source, credentials, deadline));
  return IterationOf(source, response);
}

HealthChannels::HealthChannels() = default;
HealthChannels::~HealthChannels() = default;

absl::StatusOr<uint64_t> HealthChannels::QueryIteration(
    const StateSource& source,
    const std::shared_ptr<const identity::PeerCredentials>& credentials,
    absl::Duration deadline) {
  if (credentials != credentials_) {
    channels_.clear();
    credentials_ = credentials;
  }
  const std::pair<std::string, common::NodeId> key(source.address, source.id);
  auto it = channels_.find(key);
  if (it == channels_.end()) {
    if (channels_.size() >= kMaxChannels) channels_.clear();
    it = channels_.emplace(key, ChannelTo(source, credentials)).first;
  }
  absl::StatusOr<proto::HealthResponse> response = QueryHealthOn(it->second, deadline);
  // Note [Health channels]: the next query after a failure dials afresh.
  if (!response.ok()) {
    channels_.erase(it);
    return response.status();
  }
  return IterationOf(source, *response);
}

absl::StatusOr<std::vector<std::pair<int, uint64_t>>> QueryHeldCopies(
    const StateSource& source,
    const std::shared_ptr<const identity::PeerCredentials>& credentials,
    absl::Duration deadline) {
  SS_ASSIGN_OR_RETURN(proto::HealthResponse response,
                      QueryHealth(source, credentials, deadline));
  std::vector<std::pair<int, uint64_t>> out;
  for (const proto::StageHealth& h : response.copies()) {
    out.push_back({static_cast<int>(h.stage()), h.iteration()});
  }
  return out;
}

}  // namespace skipswarm::node
