#include "node/train/grpc_group.h"

#include <glog/logging.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/real_clock.h"
#include "common/status_macros.h"
#include "absl/synchronization/mutex.h"
#include "node/compute/task_runner.h"
#include "proto/grpc_status.h"
#include "proto/stage.grpc.pb.h"
#include "proto/version.h"

namespace skipswarm::node {
namespace {

constexpr size_t kChunkFloats = (size_t{1} << 20) / sizeof(float);
constexpr int kPushThreads = 4;

}  // namespace

class GrpcGroupComm::Impl : public proto::StageService::Service,
                            public std::enable_shared_from_this<GrpcGroupComm::Impl> {
 public:
  Impl(const GrpcGroupOptions& options, SwarmView* view, common::Clock* clock)
      : options_(options), view_(view), clock_(clock) {
    for (int i = 0; i < kPushThreads; ++i) pushers_.push_back(std::make_unique<ThreadTaskRunner>());
  }

  absl::Status Start() {
    grpc::ServerBuilder builder;
    builder.AddListeningPort(options_.listen_address, grpc::InsecureServerCredentials(), &port_);
    builder.SetMaxReceiveMessageSize(8 << 20);
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
    if (server_ == nullptr || port_ == 0) {
      return absl::UnavailableError(
          absl::StrCat("cannot serve StageService on ", options_.listen_address));
    }
    return absl::OkStatus();
  }

  void Shutdown() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    if (server_) server_->Shutdown(common::SystemDeadlineAfter(absl::ZeroDuration()));
    pushers_.clear();  // joins the push threads
  }

  // --- StageService (sync API; runs on gRPC's threads) ---
  grpc::Status PushGradients(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<proto::GradientAck, proto::GradientChunk>* stream) override {
    proto::GradientChunk chunk;
    GradientContribution c;
    uint32_t stage = 0, expected = 0, count = 0;
    uint64_t iteration = 0, total = 0;
    while (stream->Read(&chunk)) {
      absl::Status ok = CheckChunk(chunk, expected, c.flat.size());
      if (ok.ok() && expected == 0) {
        auto from = common::NodeId::FromBytes(chunk.from());
        stage = chunk.stage();
        iteration = chunk.iteration();
        count = chunk.chunk_count();
        total = chunk.tensor().shape_size() == 1 ? chunk.tensor().shape(0) : 0;
        c.from = *from;
        c.visits = chunk.visits();
        c.params_digest = chunk.params_digest();
        if (stage != kBarrierStage) c.flat.reserve(total);
      } else if (ok.ok() && (chunk.stage() != stage || chunk.iteration() != iteration ||
                             chunk.chunk_count() != count)) {
        ok = absl::InvalidArgumentError("chunks of one push disagree on stage/iteration/count");
      }
      if (!ok.ok()) {
        LOG(WARNING) << "refused gradient push from " << context->peer() << ": " << ok;
        return proto::ToGrpcStatus(ok);
      }
      const size_t n = chunk.data().size() / sizeof(float);
      const size_t at = c.flat.size();
      c.flat.resize(at + n);
      if (n > 0) std::memcpy(c.flat.data() + at, chunk.data().data(), n * sizeof(float));
      ++expected;
    }
    if (expected != count || c.flat.size() != total) {
      absl::Status bad = absl::InvalidArgumentError(
          absl::StrCat("push ended after ", expected, "/", count, " chunks, ", c.flat.size(), "/",
                       total, " elements"));
      LOG(WARNING) << "refused gradient push from " << context->peer() << ": " << bad;
      return proto::ToGrpcStatus(bad);
    }
    Receive(iteration, stage, std::move(c));
    proto::GradientAck ack;
    ack.set_chunk_index(count == 0 ? 0 : count - 1);
    stream->Write(ack);
    return grpc::Status::OK;
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
        chunk.tensor().shape(0) > options_.max_elements) {
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

  // --- bookkeeping ---
  void Receive(uint64_t iteration, uint32_t stage, GradientContribution c) {
    {
      absl::MutexLock lock(&mu_);
      if (stage == kBarrierStage) {
        arrived_[iteration].insert(c.from);
      } else {
        received_[{iteration, static_cast<int>(stage)}][c.from] = std::move(c);
      }
    }
    Sweep();
  }

  void Push(const common::NodeId& to, uint64_t iteration, uint32_t stage,
            std::shared_ptr<const GradientContribution> c) {
    std::string address;
    for (const PeerInfo& p : view_->Members()) {
      if (p.id == to) address = p.group_address;
    }
    std::weak_ptr<Impl> weak = weak_from_this();
    const size_t which = std::hash<std::string>()(to.Bytes()) % pushers_.size();
    pushers_[which]->Post([weak, to, address, iteration, stage, c] {
      auto self = weak.lock();
      if (!self) return;
      absl::Status s = self->PushNow(address, iteration, stage, *c);
      if (!s.ok()) {
        LOG(WARNING) << "gradient push to " << to << " (" << address << ") failed: " << s;
        self->view_->MarkDead(to);
        self->Sweep();
      }
    });
  }

  absl::Status PushNow(const std::string& address, uint64_t iteration, uint32_t stage,
                       const GradientContribution& c) {
    if (address.empty()) return absl::UnavailableError("no StageService address");
    auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
    auto stub = proto::StageService::NewStub(channel);
    grpc::ClientContext context;
    context.set_deadline(common::SystemDeadlineAfter(options_.push_deadline));
    // Fail fast on a dead peer (startup waits in AwaitPeers instead).
    auto stream = stub->PushGradients(&context);
    const size_t n = c.flat.size();
    const uint32_t count = static_cast<uint32_t>(std::max<size_t>(1, (n + kChunkFloats - 1) / kChunkFloats));
    for (uint32_t i = 0; i < count; ++i) {
      proto::GradientChunk chunk;
      chunk.set_protocol_version(proto::kProtocolVersion);
      chunk.set_swarm_id(options_.swarm_id);
      chunk.set_from(options_.self.Bytes());
      chunk.set_stage(stage);
      chunk.set_iteration(iteration);
      chunk.set_visits(static_cast<uint32_t>(c.visits));
      chunk.set_params_digest(c.params_digest);
      chunk.set_chunk_index(i);
      chunk.set_chunk_count(count);
      const size_t begin = std::min(n, i * kChunkFloats);
      const size_t end = std::min(n, begin + kChunkFloats);
      chunk.set_offset(begin);
      chunk.mutable_tensor()->set_dtype(proto::DTYPE_FLOAT32);
      chunk.mutable_tensor()->set_codec(proto::CODEC_RAW_FP32);
      chunk.mutable_tensor()->add_shape(static_cast<int64_t>(n));
      chunk.set_data(reinterpret_cast<const char*>(c.flat.data() + begin),
                     (end - begin) * sizeof(float));
      if (!stream->Write(chunk)) break;
    }
    stream->WritesDone();
    proto::GradientAck ack;
    stream->Read(&ack);
    return proto::ToAbslStatus(stream->Finish());
  }

  void Sweep() {
    std::vector<absl::AnyInvocable<void()>> calls;
    bool recheck = false;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
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
          ++it;
          continue;
        }
        for (BarrierDone& w : it->second) {
          calls.push_back([w = std::move(w)]() mutable { w(absl::OkStatus()); });
        }
        it = barrier_waiters_.erase(it);
      }
      for (auto it = reduces_.begin(); it != reduces_.end();) {
        const auto& [key, pending] = *it;
        auto& got = received_[key];
        bool complete = true;
        for (const common::NodeId& r : view_->Replicas(key.second)) {
          if (r != options_.self && !got.count(r)) {
            complete = false;
            missing.insert(r);
          }
        }
        if (!complete) {
          ++it;
          continue;
        }
        std::map<common::NodeId, const GradientContribution*> all;
        for (const auto& [id, c] : got) all[id] = &c;
        all[options_.self] = &pending.own;
        auto result = std::make_shared<absl::StatusOr<ReduceResult>>(Sum(all));
        for (ReduceDone& w : it->second.waiters) {
          calls.push_back([w = std::move(w), result]() mutable { w(*result); });
        }
        received_.erase(key);
        it = reduces_.erase(it);
      }
      recheck = !barrier_waiters_.empty() || !reduces_.empty();
      // Forget messages of rounds long over.
      while (arrived_.size() > 8) arrived_.erase(arrived_.begin());
      while (received_.size() > 64) received_.erase(received_.begin());
      if (recheck && recheck_armed_) recheck = false;
      if (recheck) recheck_armed_ = true;
    }
    for (auto& call : calls) clock_->RunAfter(absl::ZeroDuration(), std::move(call));
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
  // not answer is marked dead and the round finishes without it.
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
      const size_t which = std::hash<std::string>()(m.Bytes()) % pushers_.size();
      pushers_[which]->Post([weak, m, address] {
        auto self = weak.lock();
        if (!self) return;
        auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
        auto stub = proto::StageService::NewStub(channel);
        grpc::ClientContext context;
        context.set_deadline(common::SystemDeadlineAfter(self->options_.probe_timeout));
        proto::HealthRequest request;
        request.set_protocol_version(proto::kProtocolVersion);
        proto::HealthResponse response;
        grpc::Status s = stub->Health(&context, request, &response);
        if (!s.ok()) {
          LOG(WARNING) << "member " << m << " (" << address
                       << ") does not answer; dropping it from the group: " << s.error_message();
          self->view_->MarkDead(m);
          self->Sweep();
        }
      });
    }
  }

  static absl::StatusOr<ReduceResult> Sum(
      const std::map<common::NodeId, const GradientContribution*>& all) {
    ReduceResult r;
    bool first = true;
    uint64_t digest = 0;
    for (const auto& [id, c] : all) {
      if (first) {
        r.sum = c->flat;
        digest = c->params_digest;
        first = false;
      } else {
        if (c->flat.size() != r.sum.size()) {
          return absl::InvalidArgumentError(absl::StrCat("replica ", id.ShortString(), " sent ",
                                                         c->flat.size(), " elements, expected ",
                                                         r.sum.size()));
        }
        for (size_t i = 0; i < r.sum.size(); ++i) r.sum[i] += c->flat[i];
        if (c->params_digest != digest) r.digests_agree = false;
      }
      r.visits += c->visits;
      ++r.contributors;
    }
    return r;
  }

  struct PendingReduce {
    GradientContribution own;
    std::vector<ReduceDone> waiters;
  };

  const GrpcGroupOptions options_;
  SwarmView* const view_;
  common::Clock* const clock_;
  std::vector<std::unique_ptr<ThreadTaskRunner>> pushers_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool recheck_armed_ ABSL_GUARDED_BY(mu_) = false;
  // Members a pending barrier or reduce still waits for (last sweep).
  std::set<common::NodeId> missing ABSL_GUARDED_BY(mu_);
  // When each member was last probed (clock time).
  std::map<common::NodeId, absl::Duration> probed_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, std::set<common::NodeId>> arrived_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<uint64_t, int>, std::map<common::NodeId, GradientContribution>> received_
      ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, std::vector<BarrierDone>> barrier_waiters_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<uint64_t, int>, PendingReduce> reduces_ ABSL_GUARDED_BY(mu_);
};

absl::StatusOr<std::unique_ptr<GrpcGroupComm>> GrpcGroupComm::Create(
    const GrpcGroupOptions& options, SwarmView* view, common::Clock* clock) {
  auto impl = std::make_shared<Impl>(options, view, clock);
  absl::Status started = impl->Start();
  if (!started.ok()) return started;
  return std::unique_ptr<GrpcGroupComm>(new GrpcGroupComm(std::move(impl)));
}

GrpcGroupComm::GrpcGroupComm(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

GrpcGroupComm::~GrpcGroupComm() { impl_->Shutdown(); }

int GrpcGroupComm::port() const { return impl_->port_; }

absl::Status GrpcGroupComm::AwaitPeers(absl::Duration timeout) {
  const auto deadline = common::SystemDeadlineAfter(timeout);
  std::vector<std::string> missing;
  for (const PeerInfo& p : impl_->view_->Members()) {
    if (p.id == impl_->options_.self) continue;
    auto channel = grpc::CreateChannel(p.group_address, grpc::InsecureChannelCredentials());
    auto stub = proto::StageService::NewStub(channel);
    grpc::ClientContext context;
    context.set_deadline(deadline);
    context.set_wait_for_ready(true);
    proto::HealthRequest request;
    request.set_protocol_version(proto::kProtocolVersion);
    proto::HealthResponse response;
    grpc::Status s = stub->Health(&context, request, &response);
    if (!s.ok() || response.node_id() != p.id.Bytes()) {
      missing.push_back(absl::StrCat(p.id.ShortString(), "@", p.group_address));
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
    impl_->barrier_waiters_[iteration].push_back(std::move(done));
  }
  if (data_node) {
    auto empty = std::make_shared<const GradientContribution>();
    for (const PeerInfo& p : impl_->view_->Members()) {
      if (p.id != self && impl_->view_->IsAlive(p.id)) {
        impl_->Push(p.id, iteration, kBarrierStage, empty);
      }
    }
  }
  impl_->Sweep();
}

void GrpcGroupComm::AllReduce(uint64_t iteration, int stage, GradientContribution contribution,
                              ReduceDone done) {
  auto shared = std::make_shared<const GradientContribution>(contribution);
  {
    absl::MutexLock lock(&impl_->mu_);
    auto& pending = impl_->reduces_[{iteration, stage}];
    pending.own = std::move(contribution);
    pending.waiters.push_back(std::move(done));
  }
  for (const common::NodeId& r : impl_->view_->Replicas(stage)) {
    if (r != impl_->options_.self) impl_->Push(r, iteration, static_cast<uint32_t>(stage), shared);
  }
  impl_->Sweep();
}

}  // namespace skipswarm::node
