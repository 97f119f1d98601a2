#include "node/train/grpc_group.h"

#include <glog/logging.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <deque>
#include <functional>
#include <cstring>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/crc32c.h"
#include "common/real_clock.h"
#include "common/status_macros.h"
#include "node/compute/task_runner.h"
#include "node/train/sharded_reduce.h"
#include "proto/grpc_status.h"
#include "proto/stage.grpc.pb.h"
#include "proto/version.h"

namespace skipswarm::node {
namespace {

constexpr size_t kChunkFloats = (size_t{1} << 20) / sizeof(float);
constexpr int kPushThreads = 4;
constexpr int kMaxMembers = 64;          // replicas in one round
constexpr uint64_t kKeepIterations = 4;  // finished rounds kept for late peers
// Note [Push admission]: a push names an iteration at most this far past
// the newest this node has reached (Barrier / AllReduce called); honest
// members are never more than one ahead (the barrier), so anything later
// is refused before a byte of its data is held.
constexpr uint64_t kMaxIterationsAhead = 2;
// Shards held before our own AllReduce (early_): at most this many bytes
// while no stage's size is known, else kEarlyRounds rounds of every known
// stage (a round brings each member at most twice its stage's size).
// A fetched state (Note [Digest re-sync]) is bounded by the stage's known
// size too (MaxStateBytes), whatever total its sender claims.
constexpr uint64_t kUnknownEarlyBytes = uint64_t{64} << 20;
constexpr uint64_t kEarlyRounds = 2;

// Note [Uplink figure] (grpc_group.h): gradient bytes pushed over the time
// at least one push was in flight.
class UplinkMeter {
 public:
  void Begin(absl::Duration now) {
    absl::MutexLock lock(&mu_);
    if (active_++ == 0) busy_since_ = now;
  }
  void End(absl::Duration now, uint64_t bytes, bool ok) {
    absl::MutexLock lock(&mu_);
    if (--active_ == 0) busy_ += now - busy_since_;
    if (ok) bytes_ += bytes;
  }
  // Bytes/s, smoothed; 0 until 256 KiB have been pushed.
  uint64_t Take() {
    absl::MutexLock lock(&mu_);
    if (bytes_ >= (uint64_t{1} << 18) && busy_ > absl::ZeroDuration()) {
      const double sample = static_cast<double>(bytes_) / absl::ToDoubleSeconds(busy_);
      estimate_ = estimate_ == 0 ? sample : 0.5 * estimate_ + 0.5 * sample;
      bytes_ = 0;
      busy_ = absl::ZeroDuration();
    }
    return static_cast<uint64_t>(std::min(estimate_, 1e18));
  }

 private:
  absl::Mutex mu_;
  int active_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Duration busy_since_ ABSL_GUARDED_BY(mu_);
  absl::Duration busy_ ABSL_GUARDED_BY(mu_);
  uint64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  double estimate_ ABSL_GUARDED_BY(mu_) = 0;
};

// GrpcGroupOptions::max_upload_bytes_per_second: chunks take back-to-back
// slots of the uplink; a chunk is written when its slot ends (store and
// forward, like a link of that bandwidth).
class UploadPacer {
 public:
  explicit UploadPacer(double bytes_per_second) : rate_(bytes_per_second) {}
  // How long a chunk of `bytes` waits at `now` before it is written.
  absl::Duration Reserve(uint64_t bytes, absl::Duration now) {
    absl::MutexLock lock(&mu_);
    next_ = std::max(next_, now) + absl::Seconds(static_cast<double>(bytes) / rate_);
    return next_ - now;
  }

 private:
  const double rate_;
  absl::Mutex mu_;
  absl::Duration next_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

class GrpcGroupComm::Impl : public proto::StageService::Service,
                            public std::enable_shared_from_this<GrpcGroupComm::Impl> {
 public:
  Impl(const GrpcGroupOptions& options, SwarmView* view, common::Clock* clock)
      : options_(options), view_(view), clock_(clock) {
    absl::MutexLock lock(&pushers_mu_);
    for (int i = 0; i < kPushThreads; ++i) pushers_.push_back(std::make_unique<ThreadTaskRunner>());
  }

  absl::Status Start() {
    grpc::ServerBuilder builder;
    // Exclusive ports: gRPC sets SO_REUSEPORT by default, which let a second
    // daemon on the same port start a second swarm silently.
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    builder.AddListeningPort(options_.listen_address, creds().ForServer(), &port_);
    builder.SetMaxReceiveMessageSize(8 << 20);
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
    if (server_ == nullptr || port_ == 0) {
      return absl::UnavailableError(
          absl::StrCat("cannot serve StageService on ", options_.listen_address,
                       " (port in use, or not an address of this host?); see --group_listen"));
    }
    return absl::OkStatus();
  }

  void Shutdown() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    if (server_) server_->Shutdown(common::SystemDeadlineAfter(absl::ZeroDuration()));
    std::vector<std::unique_ptr<ThreadTaskRunner>> pushers;
    {
      absl::WriterMutexLock lock(&pushers_mu_);
      pushers.swap(pushers_);  // later posts see none and are dropped
    }
    pushers.clear();  // joins the push threads (their tasks may still post)
  }

  // --- StageService (sync API; runs on gRPC's threads) ---
  grpc::Status PushGradients(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<proto::GradientAck, proto::GradientChunk>* stream) override {
    proto::GradientChunk chunk;
    ReduceMessage m;
    std::vector<float> data;
    uint32_t stage = 0, expected = 0, count = 0, phase = 0;
    uint64_t total = 0;
    while (stream->Read(&chunk)) {
      absl::Status ok = CheckChunk(chunk, expected, data.size());
      if (ok.ok() && expected == 0) {
        stage = chunk.stage();
        phase = chunk.phase();
        count = chunk.chunk_count();
        total = chunk.tensor().shape(0);
        ok = Header(chunk, &m);
        if (ok.ok()) ok = creds().CheckPeer(context->auth_context(), m.from);
        if (ok.ok()) ok = CheckMember(m.from);
        if (ok.ok() && phase != 0) ok = AdmitPush(m, total);
        if (ok.ok()) data.reserve(total);
      } else if (ok.ok() && (chunk.stage() != stage || chunk.iteration() != m.iteration ||
                             chunk.chunk_count() != count || chunk.phase() != phase ||
                             static_cast<int>(chunk.shard()) != m.shard)) {
        ok = absl::InvalidArgumentError("chunks of one push disagree on their header");
      }
      if (!ok.ok()) {
        LOG(WARNING) << "refused gradient push from " << context->peer() << ": " << ok;
        return proto::ToGrpcStatus(ok);
      }
      const size_t n = chunk.data().size() / sizeof(float);
      const size_t at = data.size();
      data.resize(at + n);
      if (n > 0) std::memcpy(data.data() + at, chunk.data().data(), n * sizeof(float));
      ++expected;
    }
    if (expected != count || data.size() != total) {
      absl::Status bad = absl::InvalidArgumentError(
          absl::StrCat("push ended after ", expected, "/", count, " chunks, ", data.size(), "/",
                       total, " elements"));
      LOG(WARNING) << "refused gradient push from " << context->peer() << ": " << bad;
      return proto::ToGrpcStatus(bad);
    }
    if (phase == 0) {
      ReceiveBarrier(m.iteration, m.from);
    } else {
      m.data = std::make_shared<const std::vector<float>>(std::move(data));
      ReceiveReduce(std::move(m));
    }
    proto::GradientAck ack;
    ack.set_chunk_index(count == 0 ? 0 : count - 1);
    stream->Write(ack);
    return grpc::Status::OK;
  }

  // The ReduceMessage fields of a push's first chunk (data aside).
  static absl::Status Header(const proto::GradientChunk& c, ReduceMessage* m) {
    m->iteration = c.iteration();
    m->stage = static_cast<int>(c.stage());
    m->from = *common::NodeId::FromBytes(c.from());  // checked by CheckChunk
    m->shard = static_cast<int>(c.shard());
    m->total = static_cast<int64_t>(c.total_elements());
    m->visits = c.visits();
    m->digest = c.params_digest();
    m->digests.assign(c.member_digests().begin(), c.member_digests().end());
    m->bandwidth = c.uplink_bytes_per_second();
    m->bandwidths.assign(c.member_uplinks().begin(), c.member_uplinks().end());
    m->layout.weights.assign(c.shard_weights().begin(), c.shard_weights().end());
    if (c.phase() == 0) {
      return c.stage() == kBarrierStage && c.tensor().shape(0) == 0
                 ? absl::OkStatus()
                 : absl::InvalidArgumentError("a barrier message carries no gradient");
    }
    if (c.phase() > 2 || c.stage() == kBarrierStage) {
      return absl::InvalidArgumentError(absl::StrCat("unknown push phase ", c.phase()));
    }
    m->phase = c.phase() == 1 ? ReduceMessage::Phase::kScatter : ReduceMessage::Phase::kGather;
    if (c.members_size() > kMaxMembers || c.shard_weights_size() > kMaxMembers ||
        c.member_uplinks_size() > kMaxMembers || c.member_digests_size() > kMaxMembers) {
      return absl::InvalidArgumentError("too many members");
    }
    for (const std::string& b : c.members()) {
      absl::StatusOr<common::NodeId> id = common::NodeId::FromBytes(b);
      if (!id.ok()) return absl::InvalidArgumentError("bad member id");
      m->members.push_back(*id);
    }
    return absl::OkStatus();
  }

  // Note [Digest re-sync] (node_trainer.h): serves the provider's bytes in
  // <= 1 MiB chunks, each with its CRC-32C.
  grpc::Status FetchState(grpc::ServerContext* context, const proto::StateRequest* request,
                          grpc::ServerWriter<proto::StateChunk>* writer) override {
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

  absl::StatusOr<std::string> FetchNow(const std::string& address, const common::NodeId& to,
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
        bad = absl::ResourceExhaustedError(absl::StrCat(
            "state of stage ", stage, " claims ", total, " bytes; at most ", limit,
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
  void TryFetch(uint64_t iteration, int stage, common::NodeId from,
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

  grpc::Status Health(grpc::ServerContext*, const proto::HealthRequest*,
                      proto::HealthResponse* response) override {
    response->set_protocol_version(proto::kProtocolVersion);
    response->set_node_id(options_.self.Bytes());
    response->set_version(proto::kSoftwareVersion);
    return grpc::Status::OK;
  }

  absl::Status CheckChunk(const proto::GradientChunk& chunk, uint32_t expected,
                          size_t have) const {
    SS_RETURN_IF_ERROR(proto::CheckProtocolVersion(chunk.protocol_version()));
    if (!options_.swarm_id.empty() && chunk.swarm_id() != options_.swarm_id) {
      return absl::PermissionDeniedError("wrong swarm id");
    }
    if (!common::NodeId::FromBytes(chunk.from()).ok()) {
      return absl::InvalidArgumentError("bad sender id");
    }
    if (chunk.chunk_index() != expected || chunk.chunk_count() == 0 ||
        chunk.chunk_index() >= chunk.chunk_count()) {
      return absl::InvalidArgumentError(absl::StrCat("chunk ", chunk.chunk_index(), "/",
                                                     chunk.chunk_count(), ", expected ",
                                                     expected));
    }
    if (chunk.tensor().shape_size() != 1 || chunk.tensor().shape(0) < 0 ||
        chunk.tensor().shape(0) > options_.max_elements ||
        chunk.total_elements() > static_cast<uint64_t>(options_.max_elements)) {
      return absl::InvalidArgumentError("tensor shape must be [n] within the size limit");
    }
    if (chunk.offset() != have || chunk.data().size() % sizeof(float) != 0 ||
        chunk.data().size() > (size_t{1} << 20) ||
        have + chunk.data().size() / sizeof(float) >
            static_cast<uint64_t>(chunk.tensor().shape(0))) {
      return absl::InvalidArgumentError("chunk offset or size out of range");
    }
    return absl::OkStatus();
  }

  // Note [Push admission]: the iteration window, the stage's known size
  // and the early-shard budget, checked at a push's first chunk.
  absl::Status AdmitPush(const ReduceMessage& m, uint64_t elements) {
    absl::MutexLock lock(&mu_);
    if (reached_any_ && m.iteration > reached_ && m.iteration - reached_ > kMaxIterationsAhead) {
      ++stats_pushes_refused_;
      return absl::FailedPreconditionError(absl::StrCat(
          "push for iteration ", m.iteration, " while this node is at ", reached_));
    }
    if (reached_any_ && m.iteration + kKeepIterations < reached_) {
      ++stats_pushes_refused_;
      return absl::FailedPreconditionError(absl::StrCat(
          "push for iteration ", m.iteration, ", long over (now ", reached_, ")"));
    }
    auto size = stage_elements_.find(m.stage);
    if (size != stage_elements_.end() &&
        (elements > size->second || static_cast<uint64_t>(m.total) > size->second)) {
      ++stats_pushes_refused_;
      return absl::InvalidArgumentError(absl::StrCat(
          "push of ", elements, " elements for stage ", m.stage, " of ", size->second));
    }
    if (reduces_.count({m.iteration, m.stage}) == 0 &&
        early_bytes_ + elements * sizeof(float) > EarlyBudgetLocked()) {
      ++stats_pushes_refused_;
      return absl::ResourceExhaustedError("too many gradient shards waiting already");
    }
    return absl::OkStatus();
  }

  // A stage's state (weights and two AdamW moments, fp32, plus names and
  // shapes) from its known size; before any round, max_elements' worth.
  uint64_t MaxStateBytes(int stage) {
    absl::MutexLock lock(&mu_);
    auto it = stage_elements_.find(stage);
    const uint64_t elements = it != stage_elements_.end()
                                  ? it->second
                                  : static_cast<uint64_t>(options_.max_elements);
    return 4 * elements * sizeof(float) + (uint64_t{1} << 20);
  }

  uint64_t EarlyBudgetLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (stage_elements_.empty()) return kUnknownEarlyBytes;
    uint64_t known = 0;
    for (const auto& [stage, n] : stage_elements_) known += n * sizeof(float);
    return std::max(kUnknownEarlyBytes, kEarlyRounds * 2 * known);
  }

  void ReachedLocked(uint64_t iteration) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!reached_any_ || iteration > reached_) reached_ = iteration;
    reached_any_ = true;
  }

  // GrpcGroupOptions::members_only.
  absl::Status CheckMember(const common::NodeId& from) const {
    if (!options_.members_only) return absl::OkStatus();
    for (const PeerInfo& p : view_->Members()) {
      if (p.id == from) return absl::OkStatus();
    }
    return absl::PermissionDeniedError(
        absl::StrCat("node ", from.ShortString(), " is not a member of this swarm"));
  }

  // --- bookkeeping ---
  void ReceiveBarrier(uint64_t iteration, const common::NodeId& from) {
    {
      absl::MutexLock lock(&mu_);
      arrived_[iteration].insert(from);
    }
    Sweep();
  }

  void ReceiveReduce(ReduceMessage m) {
    std::vector<OutgoingReduce> out;
    {
      absl::MutexLock lock(&mu_);
      const std::pair<uint64_t, int> key{m.iteration, m.stage};
      auto it = reduces_.find(key);
      if (it == reduces_.end()) {
        // Before our own AllReduce for it: kept until then.
        // Bounded (Note [Push admission]): admitted at the first chunk,
        // checked again now that the bytes are here.
        const uint64_t bytes = m.data->size() * sizeof(float);
        auto& early = early_[key];
        if (early.size() < 4 * kMaxMembers && early_bytes_ + bytes <= EarlyBudgetLocked()) {
          early_bytes_ += bytes;
          early.push_back(std::move(m));
        }
        while (early_.size() > 64) EraseEarlyLocked(early_.begin());
        return;
      }
      ShardedReduce& r = *it->second.reduce;
      VLOG(1) << options_.self.ShortString() << ": shard " << m.shard << " phase "
              << static_cast<int>(m.phase) << " from " << m.from.ShortString() << " for a round of "
              << m.members.size() << " (ours " << r.members().size() << ", done " << r.done()
              << ", delivered " << it->second.delivered << ")";
      absl::StatusOr<std::vector<OutgoingReduce>> more = r.Receive(std::move(m));
      if (!more.ok()) {
        LOG(WARNING) << "refused a gradient shard: " << more.status();
      } else {
        out.insert(out.end(), std::make_move_iterator(more->begin()),
                   std::make_move_iterator(more->end()));
      }
    }
    Send(std::move(out));
    Sweep();
  }

  // One channel (one HTTP/2 connection) per peer address and node (a TLS
  // channel talks only to its node), reused by every push and state fetch;
  // the channels live as long as this object.
  std::shared_ptr<grpc::Channel> ChannelFor(const std::string& address,
                                            const common::NodeId& to) {
    absl::MutexLock lock(&channels_mu_);
    std::shared_ptr<grpc::Channel>& c = channels_[absl::StrCat(address, "/", to.Hex())];
    if (c == nullptr) {
      // A restarted peer at the same address is found again within a second.
      grpc::ChannelArguments args;
      args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
      args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
      args.SetMaxReceiveMessageSize(8 << 20);
      creds().ConfigureChannel(args);
      c = grpc::CreateCustomChannel(address, creds().ForChannel(to), args);
    }
    return c;
  }

  // Runs `task` on the push thread of `peer` (one per peer, so its pushes
  // stay in order); dropped once Shutdown has begun.
  void PostFor(const common::NodeId& peer, Task task) {
    absl::ReaderMutexLock lock(&pushers_mu_);
    if (pushers_.empty()) return;
    pushers_[std::hash<std::string>()(peer.Bytes()) % pushers_.size()]->Post(std::move(task));
  }

  std::string AddressOf(const common::NodeId& to) const {
    for (const PeerInfo& p : view_->Members()) {
      if (p.id == to) return p.group_address;
    }
    return "";
  }

  void Send(std::vector<OutgoingReduce> out) {
    for (OutgoingReduce& o : out) {
      const uint32_t phase = o.message.phase == ReduceMessage::Phase::kScatter ? 1 : 2;
      Push(o.to, phase, o.message.iteration, static_cast<uint32_t>(o.message.stage),
           std::make_shared<const ReduceMessage>(std::move(o.message)));
    }
  }

  // Pushes `m` (null: a barrier message) to `to` on its push thread; a
  // failed push marks `to` dead (its rounds restart without it).
  void Push(const common::NodeId& to, uint32_t phase, uint64_t iteration, uint32_t stage,
            std::shared_ptr<const ReduceMessage> m) {
    const std::string address = AddressOf(to);
    std::weak_ptr<Impl> weak = weak_from_this();
    PostFor(to, [weak, to, address, phase, iteration, stage, m] {
      auto self = weak.lock();
      if (!self) return;
      const uint64_t bytes = m != nullptr ? m->data->size() * sizeof(float) : 0;
      if (bytes > 0) self->uplink_.Begin(self->clock_->SteadyNow());
      absl::Status s = self->PushNow(address, to, phase, iteration, stage, m.get());
      if (bytes > 0) self->uplink_.End(self->clock_->SteadyNow(), bytes, s.ok());
      if (!s.ok()) {
        LOG(WARNING) << "gradient push to " << to << " (" << address << ") failed: " << s;
        self->view_->MarkDead(to);
        self->Sweep();
      }
    });
  }

  absl::Status PushNow(const std::string& address, const common::NodeId& to, uint32_t phase,
                       uint64_t iteration, uint32_t stage, const ReduceMessage* m) {
    if (address.empty()) return absl::UnavailableError("no StageService address");
    auto channel = ChannelFor(address, to);
    auto stub = proto::StageService::NewStub(channel);
    grpc::ClientContext context;
    context.set_deadline(common::SystemDeadlineAfter(options_.push_deadline));
    auto stream = stub->PushGradients(&context);
    static const std::vector<float> kEmpty;
    const std::vector<float>& data = m != nullptr ? *m->data : kEmpty;
    const size_t n = data.size();
    const uint32_t count =
        static_cast<uint32_t>(std::max<size_t>(1, (n + kChunkFloats - 1) / kChunkFloats));
    for (uint32_t i = 0; i < count; ++i) {
      proto::GradientChunk chunk;
      chunk.set_protocol_version(proto::kProtocolVersion);
      chunk.set_swarm_id(options_.swarm_id);
      chunk.set_from(options_.self.Bytes());
      chunk.set_stage(stage);
      chunk.set_iteration(iteration);
      chunk.set_phase(phase);
      if (m != nullptr) {
        chunk.set_visits(static_cast<uint32_t>(m->visits));
        chunk.set_params_digest(m->digest);
        chunk.set_shard(static_cast<uint32_t>(m->shard));
        chunk.set_total_elements(static_cast<uint64_t>(m->total));
        chunk.set_uplink_bytes_per_second(m->bandwidth);
        if (i == 0) {
          for (const common::NodeId& id : m->members) chunk.add_members(id.Bytes());
          for (uint64_t d : m->digests) chunk.add_member_digests(d);
          for (uint32_t w : m->layout.weights) chunk.add_shard_weights(w);
          for (uint64_t b : m->bandwidths) chunk.add_member_uplinks(b);
        }
      }
      chunk.set_chunk_index(i);
      chunk.set_chunk_count(count);
      const size_t begin = std::min(n, i * kChunkFloats);
      const size_t end = std::min(n, begin + kChunkFloats);
      chunk.set_offset(begin);
      chunk.mutable_tensor()->set_dtype(proto::DTYPE_FLOAT32);
      chunk.mutable_tensor()->set_codec(proto::CODEC_RAW_FP32);
      chunk.mutable_tensor()->add_shape(static_cast<int64_t>(n));
      chunk.set_data(reinterpret_cast<const char*>(data.data() + begin),
                     (end - begin) * sizeof(float));
      if (pacer_ != nullptr && end > begin) {
        // Blocks this push thread (its peer's pushes queue behind it, as
        // on a link) on a clock timer.
        absl::Notification slot;
        clock_->RunAfter(pacer_->Reserve((end - begin) * sizeof(float), clock_->SteadyNow()),
                         [&slot] { slot.Notify(); });
        slot.WaitForNotification();
      }
      if (!stream->Write(chunk)) break;
    }
    stream->WritesDone();
    proto::GradientAck ack;
    stream->Read(&ack);
    return proto::ToAbslStatus(stream->Finish());
  }

  // The stage's replicas the view calls alive, and this node.
  std::vector<common::NodeId> LiveMembers(int stage) const {
    std::vector<common::NodeId> live = view_->Replicas(stage);
    if (std::find(live.begin(), live.end(), options_.self) == live.end()) {
      live.push_back(options_.self);
    }
    std::sort(live.begin(), live.end());
    return live;
  }

  // Note [Shard layout] (sharded_reduce.h): the cut of a round of `members`
  // from the figures the stage's last finished round handed back.
  ShardLayout LayoutFor(int stage, const std::vector<common::NodeId>& members) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = figures_.find(stage);
    if (it == figures_.end()) return ShardLayout();
    std::vector<uint64_t> figures;
    for (const common::NodeId& m : members) {
      auto f = it->second.find(m);
      if (f == it->second.end()) return ShardLayout();  // unknown: equal shards
      figures.push_back(f->second);
    }
    return ShardLayout::FromBandwidths(figures);
  }

  // This member's figure for a new round.
  uint64_t OwnUplink() {
    return options_.uplink_bytes_per_second ? options_.uplink_bytes_per_second()
                                            : uplink_.Take();
  }

  void Sweep() {
    std::vector<absl::AnyInvocable<void()>> calls;
    std::vector<OutgoingReduce> out;
    bool recheck = false;
    int waiting = 0;
    std::set<common::NodeId> silent;  // Note [Silent members]
    std::string silent_where;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      const absl::Duration now = clock_->SteadyNow();
      const absl::Duration deadline = SilentDeadlineLocked();
      std::set<common::NodeId>& missing = this->missing;
      const std::vector<common::NodeId> data_nodes = view_->Replicas(0);
      missing.clear();
      for (auto it = barrier_waiters_.begin(); it != barrier_waiters_.end();) {
        const auto& arrived = arrived_[it->first];
        bool complete = true;
        for (const common::NodeId& d : data_nodes) {
          if (!arrived.count(d)) {
            complete = false;
            missing.insert(d);
          }
        }
        if (!complete) {
          const absl::Duration since = barrier_since_.count(it->first) > 0
                                           ? barrier_since_[it->first]
                                           : now;
          bool any_arrived = false;
          for (const common::NodeId& d : data_nodes) any_arrived |= arrived.count(d) > 0;
          if (any_arrived && now - since > deadline) {
            for (const common::NodeId& d : data_nodes) {
              if (!arrived.count(d) && d != options_.self) silent.insert(d);
            }
            silent_where = absl::StrCat("barrier of iteration ", it->first);
          }
          ++it;
          continue;
        }
        if (barrier_since_.count(it->first) > 0) {
          RecordWaitLocked(now - barrier_since_[it->first]);
          barrier_since_.erase(it->first);
        }
        for (BarrierDone& w : it->second) {
          calls.push_back([w = std::move(w)]() mutable { w(absl::OkStatus()); });
        }
        it = barrier_waiters_.erase(it);
      }
      uint64_t newest = 0;
      for (auto& [key, pending] : reduces_) {
        newest = std::max(newest, key.first);
        ShardedReduce& r = *pending.reduce;
        if (pending.delivered) {
          // Note [Gradient exchange]: peers redoing a round we finished (they
          // saw a death after our round completed) get our part again.
          if (std::optional<std::vector<common::NodeId>> round = r.SmallerRoundWaiting()) {
            std::vector<OutgoingReduce> more = r.Start(*round, LayoutFor(key.second, *round));
            out.insert(out.end(), std::make_move_iterator(more.begin()),
                       std::make_move_iterator(more.end()));
          }
          continue;
        }
        const std::vector<common::NodeId> live = LiveMembers(key.second);
        if (live != r.members()) {
          LOG(WARNING) << "iteration " << key.first << " stage " << key.second
                       << ": replica group now " << live.size() << " (was "
                       << r.members().size() << "); averaging again without the lost";
          std::vector<OutgoingReduce> more = r.Start(live, LayoutFor(key.second, live));
          out.insert(out.end(), std::make_move_iterator(more.begin()),
                     std::make_move_iterator(more.end()));
        }
        if (!r.done()) {
          for (const common::NodeId& m : r.Missing()) missing.insert(m);
          if (now - pending.since > deadline) {
            for (const common::NodeId& m : r.Missing()) {
              if (m != options_.self) silent.insert(m);
            }
            silent_where = absl::StrCat("averaging of iteration ", key.first, " stage ", key.second);
          }
          ++waiting;
          continue;
        }
        RecordWaitLocked(now - pending.since);
        auto result = std::make_shared<absl::StatusOr<ReduceResult>>(r.result());
        if (result->ok()) {
          // The next round's inputs (Note [Shard layout]).
          std::map<common::NodeId, uint64_t>& figures = figures_[key.second];
          figures.clear();
          for (const auto& [id, b] : (*result)->bandwidths) figures[id] = b;
          if ((*result)->layout_fell_back) {
            LOG(WARNING) << "iteration " << key.first << " stage " << key.second
                         << ": replicas disagreed on the shard layout; averaged on equal "
                            "shards";
          }
        }
        for (ReduceDone& w : pending.waiters) {
          calls.push_back([w = std::move(w), result]() mutable { w(*result); });
        }
        pending.waiters.clear();
        pending.delivered = true;
      }
      // Finished rounds stay a few iterations for peers that redo them.
      while (!reduces_.empty() && reduces_.begin()->first.first + kKeepIterations < newest) {
        reduces_.erase(reduces_.begin());
      }
      recheck = !barrier_waiters_.empty() || waiting > 0;
      // Forget messages of rounds long over.
      while (arrived_.size() > 8) arrived_.erase(arrived_.begin());
      while (barrier_since_.size() > 8) barrier_since_.erase(barrier_since_.begin());
      if (!silent.empty()) {
        LOG(WARNING) << "the " << silent_where << " waited more than " << deadline
                     << " for " << silent.size()
                     << " member(s) that answer probes but sent nothing; dropping them";
      }
      if (recheck && recheck_armed_) recheck = false;
      if (recheck) recheck_armed_ = true;
    }
    Send(std::move(out));
    for (auto& call : calls) clock_->RunAfter(absl::ZeroDuration(), std::move(call));
    if (!silent.empty()) {
      for (const common::NodeId& m : silent) view_->MarkDead(m);
      std::weak_ptr<Impl> weak = weak_from_this();
      clock_->RunAfter(absl::ZeroDuration(), [weak] {
        if (auto self = weak.lock()) self->Sweep();
      });
    }
    if (recheck) {
      std::weak_ptr<Impl> weak = weak_from_this();
      clock_->RunAfter(options_.recheck, [weak] {
        if (auto self = weak.lock()) {
          std::set<common::NodeId> probe;
          {
            absl::MutexLock lock(&self->mu_);
            self->recheck_armed_ = false;
            probe = self->missing;
          }
          self->ProbeMissing(probe);
          self->Sweep();
        }
      });
    }
  }

  // Note [Group liveness]: replicas of a stage need not share a pipeline
  // stream, so the transport may never tell one that another died. While a
  // barrier or reduce waits for a member, the member's StageService is
  // probed (Health, short deadline) every probe_interval; a member that does
  // not answer probe_failures times in a row is marked dead and the round
  // finishes without it (a dead process refuses connections, so that takes
  // about probe_failures x probe_interval; failed pushes mark it at once).
  void ProbeMissing(const std::set<common::NodeId>& members) {
    const absl::Duration now = clock_->SteadyNow();
    for (const common::NodeId& m : members) {
      {
        absl::MutexLock lock(&mu_);
        auto it = probed_.find(m);
        if (it != probed_.end() && now - it->second < options_.probe_interval) continue;
        probed_[m] = now;
      }
      std::string address;
      for (const PeerInfo& p : view_->Members()) {
        if (p.id == m) address = p.group_address;
      }
      std::weak_ptr<Impl> weak = weak_from_this();
      PostFor(m, [weak, m, address] {
        auto self = weak.lock();
        if (!self) return;
        auto stub = proto::StageService::NewStub(self->ProbeChannel(address, m));
        grpc::ClientContext context;
        context.set_deadline(common::SystemDeadlineAfter(self->options_.probe_timeout));
        proto::HealthRequest request;
        request.set_protocol_version(proto::kProtocolVersion);
        proto::HealthResponse response;
        grpc::Status s = stub->Health(&context, request, &response);
        int failures = 0;
        {
          absl::MutexLock lock(&self->mu_);
          failures = s.ok() ? 0 : self->probe_failures_[m] + 1;
          self->probe_failures_[m] = failures;
        }
        if (failures >= self->options_.probe_failures) {
          LOG(WARNING) << "member " << m << " (" << address << ") did not answer " << failures
                       << " probes; dropping it from the group: " << s.error_message();
          self->view_->MarkDead(m);
          self->Sweep();
        } else if (!s.ok()) {
          LOG(WARNING) << "member " << m << " (" << address << ") did not answer a probe ("
                       << failures << "/" << self->options_.probe_failures
                       << "): " << s.error_message();
        }
      });
    }
  }

  // A fresh channel for one Health call to member `to`.
  std::shared_ptr<grpc::Channel> ProbeChannel(const std::string& address,
                                              const common::NodeId& to) const {
    grpc::ChannelArguments args;
    creds().ConfigureChannel(args);
    return grpc::CreateCustomChannel(address, creds().ForChannel(to), args);
  }

  const identity::PeerCredentials& creds() const { return *credentials_; }

  struct PendingReduce {
    std::unique_ptr<ShardedReduce> reduce;
    std::vector<ReduceDone> waiters;
    bool delivered = false;
    absl::Duration since;  // our own AllReduce (clock time)
  };

  // Note [Silent members]: a member that answers its probes but never sends
  // its barrier or gradients would stall every replica forever. A barrier
  // that at least one data node reached, or a reduce, that waits longer
  // than SilentDeadline drops the members it still waits for (MarkDead
  // through the group view: out of this round, which is then averaged
  // without them; they re-sign or re-sync to come back). A barrier no data
  // node reached is left waiting: the data nodes are paused (Note [Paused
  // training] in data_node_driver.h), and relays must not spin through
  // empty iterations. The deadline follows measured waits: factor x the
  // slowest of the last kWaitSamples completed barriers and reduces, never
  // under the floor.
  absl::Duration SilentDeadlineLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (waits_.empty()) return options_.silent_initial;
    const absl::Duration slowest = *std::max_element(waits_.begin(), waits_.end());
    return std::max(options_.silent_floor, slowest * options_.silent_factor);
  }
  void RecordWaitLocked(absl::Duration d) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    waits_.push_back(d);
    while (waits_.size() > kWaitSamples) waits_.pop_front();
  }
  static constexpr size_t kWaitSamples = 16;

  const GrpcGroupOptions options_;
  const std::shared_ptr<const identity::PeerCredentials> credentials_ = options_.credentials;
  SwarmView* const view_;
  common::Clock* const clock_;
  absl::Mutex pushers_mu_;  // Shutdown empties pushers_ while timers may post
  std::vector<std::unique_ptr<ThreadTaskRunner>> pushers_ ABSL_GUARDED_BY(pushers_mu_);
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;

  absl::Mutex channels_mu_;
  std::map<std::string, std::shared_ptr<grpc::Channel>> channels_ ABSL_GUARDED_BY(channels_mu_);
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  StateProvider provider_ ABSL_GUARDED_BY(mu_);
  bool recheck_armed_ ABSL_GUARDED_BY(mu_) = false;
  // Members a pending barrier or reduce still waits for (last sweep).
  std::set<common::NodeId> missing ABSL_GUARDED_BY(mu_);
  // When each member was last probed (clock time).
  std::map<common::NodeId, absl::Duration> probed_ ABSL_GUARDED_BY(mu_);
  // Consecutive failed probes per member.
  std::map<common::NodeId, int> probe_failures_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, std::set<common::NodeId>> arrived_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, std::vector<BarrierDone>> barrier_waiters_ ABSL_GUARDED_BY(mu_);
  // When our barrier of each iteration began (clock time).
  std::map<uint64_t, absl::Duration> barrier_since_ ABSL_GUARDED_BY(mu_);
  // Durations of recent completed barriers and reduces (Note [Silent members]).
  std::deque<absl::Duration> waits_ ABSL_GUARDED_BY(mu_);
  // By (iteration, stage); kept kKeepIterations after delivery.
  std::map<std::pair<uint64_t, int>, PendingReduce> reduces_ ABSL_GUARDED_BY(mu_);
  // Shards that came before our own AllReduce for them, and their bytes.
  std::map<std::pair<uint64_t, int>, std::vector<ReduceMessage>> early_ ABSL_GUARDED_BY(mu_);
  uint64_t early_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // The newest iteration this node reached (Barrier / AllReduce), and the
  // element count of each stage it reduced (Note [Push admission]).
  uint64_t reached_ ABSL_GUARDED_BY(mu_) = 0;
  bool reached_any_ ABSL_GUARDED_BY(mu_) = false;
  std::map<int, uint64_t> stage_elements_ ABSL_GUARDED_BY(mu_);
  uint64_t stats_pushes_refused_ ABSL_GUARDED_BY(mu_) = 0;

  void EraseEarlyLocked(
      std::map<std::pair<uint64_t, int>, std::vector<ReduceMessage>>::iterator it)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (const ReduceMessage& m : it->second) {
      early_bytes_ -= m.data != nullptr ? m.data->size() * sizeof(float) : 0;
    }
    early_.erase(it);
  }
  // Per stage: every member's uplink figure from its last finished round.
  std::map<int, std::map<common::NodeId, uint64_t>> figures_ ABSL_GUARDED_BY(mu_);
  UplinkMeter uplink_;
  const std::unique_ptr<UploadPacer> pacer_ =
      options_.max_upload_bytes_per_second > 0
          ? std::make_unique<UploadPacer>(options_.max_upload_bytes_per_second)
          : nullptr;
};

absl::StatusOr<std::unique_ptr<GrpcGroupComm>> GrpcGroupComm::Create(
    const GrpcGroupOptions& options, SwarmView* view, common::Clock* clock) {
  if (options.credentials == nullptr) {
    return absl::InvalidArgumentError(
        "GrpcGroupOptions.credentials is not set (TLS from the node identity, or "
        "PeerCredentials::Insecure() behind --insecure)");
  }
  if (!options.credentials->insecure() && options.credentials->id() != options.self) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GrpcGroupOptions.self ", options.self.ShortString(),
        " is not the node id of the TLS identity (", options.credentials->id().ShortString(), ")"));
  }
  auto impl = std::make_shared<Impl>(options, view, clock);
  absl::Status started = impl->Start();
  if (!started.ok()) return started;
  return std::unique_ptr<GrpcGroupComm>(new GrpcGroupComm(std::move(impl)));
}

GrpcGroupComm::GrpcGroupComm(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

GrpcGroupComm::~GrpcGroupComm() { impl_->Shutdown(); }

int GrpcGroupComm::port() const { return impl_->port_; }

absl::Status GrpcGroupComm::AwaitPeers(absl::Duration timeout,
                                       const std::function<bool()>& cancelled) {
  const absl::Duration end = impl_->clock_->SteadyNow() + timeout;
  std::vector<std::string> missing;
  for (const PeerInfo& p : impl_->view_->Members()) {
    if (p.id == impl_->options_.self) continue;
    auto stub = proto::StageService::NewStub(impl_->ProbeChannel(p.group_address, p.id));
    proto::HealthRequest request;
    request.set_protocol_version(proto::kProtocolVersion);
    proto::HealthResponse response;
    grpc::Status s;
    // Short waits in a loop, so a stop is seen within ~200 ms.
    while (true) {
      if (cancelled && cancelled()) {
        return absl::CancelledError("stopped while waiting for the swarm's peers to answer");
      }
      const absl::Duration left = end - impl_->clock_->SteadyNow();
      grpc::ClientContext context;
      context.set_deadline(common::SystemDeadlineAfter(
          std::max(absl::ZeroDuration(), std::min(left, absl::Milliseconds(200)))));
      context.set_wait_for_ready(true);
      s = stub->Health(&context, request, &response);
      if (s.ok() || s.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED ||
          left <= absl::Milliseconds(200)) {
        break;
      }
    }
    if (!s.ok()) {
      // wait_for_ready hides why the channel never became ready (a refused
      // TLS handshake: the wrong node's certificate, or no TLS there); one
      // immediate call says it.
      grpc::ClientContext again;
      again.set_deadline(common::SystemDeadlineAfter(absl::Seconds(1)));
      grpc::Status why = stub->Health(&again, request, &response);
      if (!why.ok()) s = why;
    }
    if (!s.ok()) {
      missing.push_back(
          absl::StrCat(p.id.ShortString(), "@", p.group_address, " (", s.error_message(), ")"));
    } else if (response.node_id() != p.id.Bytes()) {
      absl::StatusOr<common::NodeId> other = common::NodeId::FromBytes(response.node_id());
      missing.push_back(absl::StrCat(p.id.ShortString(), "@", p.group_address,
                                     " (answered as node ",
                                     other.ok() ? other->ShortString() : "?", ")"));
    }
  }
  if (!missing.empty()) {
    return absl::DeadlineExceededError(
        absl::StrCat("peers not answering: ", absl::StrJoin(missing, ", ")));
  }
  return absl::OkStatus();
}

void GrpcGroupComm::Barrier(uint64_t iteration, const common::NodeId& self, bool data_node,
                            BarrierDone done) {
  {
    absl::MutexLock lock(&impl_->mu_);
    if (data_node) impl_->arrived_[iteration].insert(self);
    impl_->ReachedLocked(iteration);
    impl_->barrier_waiters_[iteration].push_back(std::move(done));
    impl_->barrier_since_.try_emplace(iteration, impl_->clock_->SteadyNow());
  }
  if (data_node) {
    for (const PeerInfo& p : impl_->view_->Members()) {
      if (p.id != self && impl_->view_->IsAlive(p.id)) {
        impl_->Push(p.id, /*phase=*/0, iteration, kBarrierStage, nullptr);
      }
    }
  }
  impl_->Sweep();
}

uint64_t GrpcGroupComm::pushes_refused() const {
  absl::MutexLock lock(&impl_->mu_);
  return impl_->stats_pushes_refused_;
}

uint64_t GrpcGroupComm::early_bytes() const {
  absl::MutexLock lock(&impl_->mu_);
  return impl_->early_bytes_;
}

void GrpcGroupComm::SetStateProvider(const common::NodeId&, StateProvider provider) {
  absl::MutexLock lock(&impl_->mu_);
  impl_->provider_ = std::move(provider);
}

void GrpcGroupComm::FetchState(uint64_t iteration, int stage, const common::NodeId& from,
                               StateDone done) {
  impl_->TryFetch(iteration, stage, from, std::make_shared<StateDone>(std::move(done)), 0);
}

void GrpcGroupComm::AllReduce(uint64_t iteration, int stage, GradientContribution contribution,
                              ReduceDone done) {
  std::vector<OutgoingReduce> out;
  const std::vector<common::NodeId> live = impl_->LiveMembers(stage);
  const uint64_t uplink = impl_->OwnUplink();  // outside mu_: a caller's function
  {
    absl::MutexLock lock(&impl_->mu_);
    const std::pair<uint64_t, int> key{iteration, stage};
    impl_->ReachedLocked(iteration);
    impl_->stage_elements_[stage] = contribution.flat.size();
    auto& pending = impl_->reduces_[key];
    if (pending.reduce == nullptr) {
      pending.reduce = std::make_unique<ShardedReduce>(impl_->options_.self, iteration, stage,
                                                       std::move(contribution), uplink);
      ShardLayout layout = impl_->LayoutFor(stage, live);
      VLOG(1) << "iteration " << iteration << " stage " << stage << ": own uplink " << uplink
              << " B/s, shard weights "
              << (layout.equal() ? std::string("equal") : absl::StrJoin(layout.weights, "/"));
      out = pending.reduce->Start(live, std::move(layout));
      auto early = impl_->early_.find(key);
      if (early != impl_->early_.end()) {
        for (ReduceMessage& m : early->second) {
          auto more = pending.reduce->Receive(std::move(m));
          if (!more.ok()) {
            LOG(WARNING) << "refused a gradient shard: " << more.status();
            continue;
          }
          out.insert(out.end(), std::make_move_iterator(more->begin()),
                     std::make_move_iterator(more->end()));
        }
        impl_->early_bytes_ = 0;  // (moved out above; recounted below)
        impl_->early_.erase(early);
        for (const auto& [k, msgs] : impl_->early_) {
          for (const ReduceMessage& m : msgs) impl_->early_bytes_ += m.data->size() * sizeof(float);
        }
      }
    }
    if (pending.waiters.empty() && !pending.delivered) {
      pending.since = impl_->clock_->SteadyNow();
    }
    pending.waiters.push_back(std::move(done));
    pending.delivered = false;
  }
  impl_->Send(std::move(out));
  impl_->Sweep();
}

}  // namespace skipswarm::node
