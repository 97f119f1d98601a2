#include "sim/sim_network.h"

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace skipswarm::sim {

class SimNetwork::Endpoint final : public membership::GossipTransport {
 public:
  Endpoint(SimNetwork* net, std::string address, common::NodeId id)
      : net_(net), address_(std::move(address)), id_(id) {}

  void Ping(const membership::PeerRef& to, const proto::PingRequest& req,
            absl::Duration timeout, membership::AckCallback done) override {
    net_->Send<proto::PingRequest, proto::Ack>(
        this, to, req, timeout, std::move(done),
        [](membership::GossipHandler* h, const membership::PeerInfo& info,
           const proto::PingRequest& r, membership::AckCallback reply) {
          h->HandlePing(info, r, std::move(reply));
        });
  }
  void PingReq(const membership::PeerRef& to, const proto::PingRequest& req,
               absl::Duration timeout, membership::AckCallback done) override {
    net_->Send<proto::PingRequest, proto::Ack>(
        this, to, req, timeout, std::move(done),
        [](membership::GossipHandler* h, const membership::PeerInfo& info,
           const proto::PingRequest& r, membership::AckCallback reply) {
          h->HandlePingReq(info, r, std::move(reply));
        });
  }
  void PushPull(const membership::PeerRef& to, const proto::PushPullRequest& req,
                absl::Duration timeout, membership::PushPullCallback done) override {
    net_->Send<proto::PushPullRequest, proto::PushPullResponse>(
        this, to, req, timeout, std::move(done),
        [](membership::GossipHandler* h, const membership::PeerInfo& info,
           const proto::PushPullRequest& r, membership::PushPullCallback reply) {
          h->HandlePushPull(info, r, std::move(reply));
        });
  }

  SimNetwork* net_;
  std::string address_;
  common::NodeId id_;
  membership::GossipHandler* handler_ = nullptr;
  bool down_ = false;
  // Bumped by Detach; calls started under an older generation are forgotten.
  uint64_t generation_ = 0;
};

template <typename Resp>
struct SimNetwork::Call {
  absl::AnyInvocable<void(absl::StatusOr<Resp>)> done;
  Endpoint* from = nullptr;
  uint64_t generation = 0;
  bool finished = false;
  common::TimerId timer = common::kNoTimer;

  // Runs `done` once, unless the sender detached meanwhile.
  void Finish(absl::StatusOr<Resp> result) {
    if (finished) return;
    finished = true;
    auto callback = std::move(done);
    if (from->generation_ == generation) callback(std::move(result));
  }
};

SimNetwork::SimNetwork(common::Clock* clock, uint64_t seed, Options options)
    : clock_(clock), rng_(seed), options_(options) {}

SimNetwork::~SimNetwork() = default;

membership::GossipTransport* SimNetwork::AddEndpoint(const std::string& address,
                                         const common::NodeId& id) {
  auto& slot = endpoints_[address];
  CHECK(slot == nullptr) << "duplicate sim address " << address;
  slot = std::make_unique<Endpoint>(this, address, id);
  return slot.get();
}

SimNetwork::Endpoint* SimNetwork::Find(const std::string& address) {
  auto it = endpoints_.find(address);
  return it == endpoints_.end() ? nullptr : it->second.get();
}

void SimNetwork::Serve(const std::string& address, membership::GossipHandler* handler) {
  Endpoint* e = Find(address);
  CHECK(e != nullptr) << "unknown sim address " << address;
  e->handler_ = handler;
}

void SimNetwork::Detach(const std::string& address) {
  Endpoint* e = Find(address);
  if (e == nullptr) return;
  e->handler_ = nullptr;
  ++e->generation_;
}

void SimNetwork::SetDown(const std::string& address, bool down) {
  Endpoint* e = Find(address);
  if (e != nullptr) e->down_ = down;
}

void SimNetwork::SetLinkLatency(const std::string& a, const std::string& b,
                                absl::Duration latency) {
  link_latency_[{a, b}] = latency;
  link_latency_[{b, a}] = latency;
}

void SimNetwork::Partition(const std::vector<std::string>& side) {
  side_.clear();
  for (const std::string& a : side) side_[a] = 1;
}

void SimNetwork::Heal() { side_.clear(); }

bool SimNetwork::Deliverable(const std::string& from, const std::string& to) {
  ++sent_;
  Endpoint* src = Find(from);
  Endpoint* dst = Find(to);
  auto side = [&](const std::string& a) {
    auto it = side_.find(a);
    return it == side_.end() ? 0 : it->second;
  };
  bool ok = src != nullptr && dst != nullptr && !src->down_ && !dst->down_ &&
            side(from) == side(to) && (!link_filter_ || link_filter_(from, to));
  // Draw for loss on every message so the random sequence does not depend
  // on partitions and crashes.
  if (rng_.Bernoulli(options_.loss)) ok = false;
  if (!ok) ++dropped_;
  return ok;
}

absl::Duration SimNetwork::Latency(const std::string& from,
                                   const std::string& to) {
  absl::Duration d = options_.latency;
  auto it = link_latency_.empty() ? link_latency_.end()
                                  : link_latency_.find({from, to});
  if (it != link_latency_.end()) {
    d = it->second;
  } else if (latency_fn_) {
    d = latency_fn_(from, to);
  }
  if (options_.jitter > absl::ZeroDuration()) {
    d += options_.jitter * rng_.UniformDouble();
  }
  return d;
}

template <typename Req, typename Resp, typename Dispatch>
void SimNetwork::Send(Endpoint* from, const membership::PeerRef& to, const Req& req,
                      absl::Duration timeout,
                      absl::AnyInvocable<void(absl::StatusOr<Resp>)> done,
                      Dispatch dispatch) {
  auto call = std::make_shared<Call<Resp>>();
  call->done = std::move(done);
  call->from = from;
  call->generation = from->generation_;
  call->timer = clock_->RunAfter(timeout, [call] {
    call->Finish(absl::DeadlineExceededError("sim: no reply before deadline"));
  });
  if (Find(to.address) == nullptr) {
    // Like a DNS / connection failure: fails fast, but never inline.
    common::TimerId t = call->timer;
    clock_->RunAfter(absl::ZeroDuration(), [this, call, t, addr = to.address] {
      clock_->Cancel(t);
      call->Finish(absl::UnavailableError("sim: no host at " + addr));
    });
    return;
  }
  if (!Deliverable(from->address_, to.address)) return;
  const std::string src = from->address_;
  const common::NodeId src_id = from->id_;
  clock_->RunAfter(
      Latency(src, to.address),
      [this, call, src, src_id, to, req, dispatch]() mutable {
        Endpoint* dst = Find(to.address);
        if (dst == nullptr || dst->down_ || dst->handler_ == nullptr) return;
        const common::NodeId dst_id = dst->id_;
        auto reply = [this, call, src, to, dst_id](absl::StatusOr<Resp> r) {
          if (!Deliverable(to.address, src)) return;
          clock_->RunAfter(Latency(to.address, src), [this, call, to, dst_id,
                                                      r = std::move(r)] {
            if (call->finished) return;
            clock_->Cancel(call->timer);
            if (!to.id.IsZero() && to.id != dst_id) {
              call->Finish(absl::UnauthenticatedError(
                  "sim: peer at " + to.address + " is not " +
                  to.id.ShortString()));
              return;
            }
            call->Finish(std::move(r));
          });
        };
        dispatch(dst->handler_, membership::PeerInfo{src, src_id}, req, std::move(reply));
      });
}

std::unique_ptr<identity::Identity> SimIdentity(const common::Random& rng, int index) {
  std::string seed(32, '\0');
  common::Random key_rng = rng.Fork(absl::StrCat("key", index));
  for (char& c : seed) c = static_cast<char>(key_rng.UniformInt(0, 255));
  return *identity::Identity::FromSeed(seed);
}

}  // namespace skipswarm::sim
