#include "node/transport/inproc_transport.h"

#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "node/transport/frame_validator.h"
#include "node/transport/pending_send.h"

namespace skipswarm::node {

// One endpoint's receiving side. Shared with the clock callbacks that
// deliver to it, so a delivery that races the endpoint's destruction finds
// `attached == false` instead of a dangling pointer.
struct Switchboard::Core {
  Core(PeerId id, std::shared_ptr<FrameValidator> validator)
      : id(id), validator(std::move(validator)) {}

  const PeerId id;
  const std::shared_ptr<FrameValidator> validator;

  absl::Mutex mu;
  bool attached ABSL_GUARDED_BY(mu) = true;
  std::shared_ptr<const FrameHandler> handler ABSL_GUARDED_BY(mu);
  std::shared_ptr<const PeerFailureHandler> on_failure ABSL_GUARDED_BY(mu);
  // Peers this endpoint sent to (its "open streams").
  absl::flat_hash_set<PeerId> contacted ABSL_GUARDED_BY(mu);
};

class InProcessEndpoint final : public Transport {
 public:
  InProcessEndpoint(Switchboard* board, std::shared_ptr<Switchboard::Core> core)
      : board_(board), core_(std::move(core)) {}
  ~InProcessEndpoint() override { board_->Detach(core_->id); }

  PeerId self() const override { return core_->id; }

  void SetFrameHandler(FrameHandler handler) override {
    auto shared = std::make_shared<const FrameHandler>(std::move(handler));
    absl::MutexLock lock(&core_->mu);
    core_->handler = std::move(shared);
  }

  void SetPeerFailureHandler(PeerFailureHandler handler) override {
    auto shared = std::make_shared<const PeerFailureHandler>(std::move(handler));
    absl::MutexLock lock(&core_->mu);
    core_->on_failure = std::move(shared);
  }

  void SetPeerAddress(const PeerId&, std::string) override {}

  void ForgetPeer(const PeerId& peer) override {
    absl::MutexLock lock(&core_->mu);
    core_->contacted.erase(peer);
  }

  void Send(const PeerId& to, Frame frame, SendDone done) override {
    common::Clock* clock = board_->clock_;
    const absl::Duration latency = board_->options_.latency;
    auto pending = std::make_shared<PendingSend>(clock, std::move(done));
    pending->ArmDeadline(
        FrameDeadline(frame.header, board_->options_.default_deadline));
    std::shared_ptr<Switchboard::Core> target = board_->Find(to);
    if (target == nullptr) {
      pending->CompleteSoon(absl::UnavailableError(
          absl::StrCat("peer ", to.ShortString(), " is not on the switchboard")));
      return;
    }
    {
      absl::MutexLock lock(&core_->mu);
      core_->contacted.insert(to);
    }
    clock->RunAfter(latency, [latency, from = core_->id,
                              target = std::move(target), pending,
                              frame = std::move(frame)]() mutable {
      AckFn ack = [latency, pending](absl::Status status) {
        pending->CompleteSoon(std::move(status), latency);
      };
      std::shared_ptr<const FrameHandler> handler;
      {
        absl::MutexLock lock(&target->mu);
        if (!target->attached) {
          ack(absl::UnavailableError(absl::StrCat(
              "peer ", target->id.ShortString(), " left the switchboard")));
          return;
        }
        handler = target->handler;
      }
      absl::Status header = target->validator->CheckHeader(frame.header);
      if (!header.ok()) {
        target->validator->LogRejected(from, frame.header, header);
        ack(std::move(header));
        return;
      }
      AdmitFrame(target->validator, handler, from, std::move(frame),
                 std::move(ack));
    });
  }

 private:
  Switchboard* const board_;
  const std::shared_ptr<Switchboard::Core> core_;
};

Switchboard::Switchboard(common::Clock* clock, SwitchboardOptions options)
    : clock_(clock), options_(std::move(options)) {}

Switchboard::~Switchboard() {
  absl::MutexLock lock(&mu_);
  CHECK(cores_.empty()) << "Switchboard destroyed before its endpoints";
}

absl::StatusOr<std::unique_ptr<Transport>> Switchboard::Attach(const PeerId& id) {
  ValidatorOptions vopts;
  vopts.self = id;
  vopts.swarm_id = options_.swarm_id;
  auto core = std::make_shared<Core>(
      id, std::make_shared<FrameValidator>(std::move(vopts), clock_));
  {
    absl::MutexLock lock(&mu_);
    if (!cores_.emplace(id, core).second) {
      return absl::AlreadyExistsError(
          absl::StrCat("node ", id.ShortString(), " is already attached"));
    }
  }
  return std::unique_ptr<Transport>(new InProcessEndpoint(this, std::move(core)));
}

size_t Switchboard::size() {
  absl::MutexLock lock(&mu_);
  return cores_.size();
}

std::shared_ptr<Switchboard::Core> Switchboard::Find(const PeerId& id) {
  absl::MutexLock lock(&mu_);
  auto it = cores_.find(id);
  return it == cores_.end() ? nullptr : it->second;
}

void Switchboard::Detach(const PeerId& id) {
  std::shared_ptr<Core> gone;
  std::vector<std::shared_ptr<Core>> others;
  {
    absl::MutexLock lock(&mu_);
    auto it = cores_.find(id);
    if (it == cores_.end()) return;
    gone = std::move(it->second);
    cores_.erase(it);
    for (auto& [other_id, core] : cores_) others.push_back(core);
  }
  {
    absl::MutexLock lock(&gone->mu);
    gone->attached = false;
    gone->handler = nullptr;
    gone->on_failure = nullptr;
  }
  // Peers with an "open stream" to the departed node learn of it, as they
  // would when a gRPC stream breaks.
  for (auto& core : others) {
    std::shared_ptr<const PeerFailureHandler> on_failure;
    {
      absl::MutexLock lock(&core->mu);
      if (!core->contacted.erase(id)) continue;
      on_failure = core->on_failure;
    }
    if (on_failure == nullptr || !*on_failure) continue;
    clock_->RunAfter(absl::ZeroDuration(), [on_failure, id] {
      (*on_failure)(id, absl::UnavailableError(absl::StrCat(
                            "peer ", id.ShortString(), " left the switchboard")));
    });
  }
}

}  // namespace skipswarm::node
