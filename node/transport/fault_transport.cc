#include "node/transport/fault_transport.h"

#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/random.h"
#include "node/transport/pending_send.h"

namespace skipswarm::node {

struct FaultInjectingTransport::State {
  State(std::shared_ptr<Transport> inner, common::Clock* clock, uint64_t seed,
        absl::Duration drop_timeout)
      : inner(std::move(inner)), clock(clock), drop_timeout(drop_timeout),
        rng(seed) {}

  // Why traffic with `peer` is cut, or "" if it is not.
  std::string CutReason(const PeerId& peer) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (killed.contains(peer)) return "killed";
    if (partitioned.contains(peer)) return "partitioned";
    return "";
  }

  // The base's inner transport, shared so that a delayed send still has it
  // after the decorator is gone.
  const std::shared_ptr<Transport> inner;
  common::Clock* const clock;
  const absl::Duration drop_timeout;

  absl::Mutex mu;
  common::Random rng ABSL_GUARDED_BY(mu);
  double drop_rate ABSL_GUARDED_BY(mu) = 0;
  int64_t dropped ABSL_GUARDED_BY(mu) = 0;
  absl::flat_hash_map<PeerId, int> drop_next ABSL_GUARDED_BY(mu);
  absl::flat_hash_map<PeerId, absl::Duration> delay ABSL_GUARDED_BY(mu);
  absl::flat_hash_set<PeerId> partitioned ABSL_GUARDED_BY(mu);
  absl::flat_hash_set<PeerId> killed ABSL_GUARDED_BY(mu);
  std::shared_ptr<const FrameHandler> handler ABSL_GUARDED_BY(mu);
  std::shared_ptr<const PeerFailureHandler> on_failure ABSL_GUARDED_BY(mu);
};

FaultInjectingTransport::FaultInjectingTransport(
    std::unique_ptr<Transport> inner, common::Clock* clock, uint64_t seed,
    absl::Duration drop_timeout)
    : ForwardingTransport(std::move(inner)),
      state_(std::make_shared<State>(shared_inner(), clock, seed, drop_timeout)) {
  std::weak_ptr<State> weak = state_;
  state_->inner->SetFrameHandler([weak](const PeerId& from, Frame frame,
                                        AckFn ack) {
    auto state = weak.lock();
    std::shared_ptr<const FrameHandler> handler;
    std::string cut = "shutting down";
    if (state != nullptr) {
      absl::MutexLock lock(&state->mu);
      cut = state->CutReason(from);
      handler = state->handler;
    }
    if (!cut.empty()) {
      ack(absl::UnavailableError(
          absl::StrCat("fault injection: ", from.ShortString(), " is ", cut)));
      return;
    }
    if (handler == nullptr || !*handler) {
      ack(absl::UnavailableError("node has no frame handler"));
      return;
    }
    (*handler)(from, std::move(frame), std::move(ack));
  });
  state_->inner->SetPeerFailureHandler(
      [weak](const PeerId& peer, const absl::Status& why) {
        auto state = weak.lock();
        if (state == nullptr) return;
        std::shared_ptr<const PeerFailureHandler> on_failure;
        {
          absl::MutexLock lock(&state->mu);
          // A cut peer already had its failure event.
          if (!state->CutReason(peer).empty()) return;
          on_failure = state->on_failure;
        }
        if (on_failure != nullptr && *on_failure) (*on_failure)(peer, why);
      });
}

FaultInjectingTransport::~FaultInjectingTransport() = default;

void FaultInjectingTransport::SetDropRate(double p) {
  absl::MutexLock lock(&state_->mu);
  state_->drop_rate = p;
}

void FaultInjectingTransport::DropNext(const PeerId& peer, int count) {
  absl::MutexLock lock(&state_->mu);
  state_->drop_next[peer] += count;
}

void FaultInjectingTransport::SetDelay(const PeerId& peer,
                                       absl::Duration delay) {
  absl::MutexLock lock(&state_->mu);
  if (delay <= absl::ZeroDuration()) {
    state_->delay.erase(peer);
  } else {
    state_->delay[peer] = delay;
  }
}

void FaultInjectingTransport::Partition(const std::vector<PeerId>& peers) {
  for (const PeerId& peer : peers) {
    bool newly_cut;
    {
      absl::MutexLock lock(&state_->mu);
      newly_cut = state_->CutReason(peer).empty();
      state_->partitioned.insert(peer);
    }
    if (newly_cut) Cut(peer, "partitioned");
  }
}

void FaultInjectingTransport::KillPeer(const PeerId& peer) {
  bool newly_cut;
  {
    absl::MutexLock lock(&state_->mu);
    newly_cut = state_->CutReason(peer).empty();
    state_->killed.insert(peer);
  }
  if (newly_cut) Cut(peer, "killed");
}

void FaultInjectingTransport::RevivePeer(const PeerId& peer) {
  absl::MutexLock lock(&state_->mu);
  state_->killed.erase(peer);
}

void FaultInjectingTransport::Heal() {
  absl::MutexLock lock(&state_->mu);
  state_->killed.clear();
  state_->partitioned.clear();
}

int64_t FaultInjectingTransport::dropped() {
  absl::MutexLock lock(&state_->mu);
  return state_->dropped;
}

void FaultInjectingTransport::Cut(const PeerId& peer, const char* why) {
  std::shared_ptr<const PeerFailureHandler> on_failure;
  {
    absl::MutexLock lock(&state_->mu);
    on_failure = state_->on_failure;
  }
  if (on_failure == nullptr || !*on_failure) return;
  state_->clock->RunAfter(absl::ZeroDuration(), [on_failure, peer, why] {
    (*on_failure)(peer, absl::UnavailableError(absl::StrCat(
                            "fault injection: ", peer.ShortString(), " ", why)));
  });
}

void FaultInjectingTransport::SetFrameHandler(FrameHandler handler) {
  auto shared = std::make_shared<const FrameHandler>(std::move(handler));
  absl::MutexLock lock(&state_->mu);
  state_->handler = std::move(shared);
}

void FaultInjectingTransport::SetPeerFailureHandler(PeerFailureHandler handler) {
  auto shared = std::make_shared<const PeerFailureHandler>(std::move(handler));
  absl::MutexLock lock(&state_->mu);
  state_->on_failure = std::move(shared);
}

void FaultInjectingTransport::Send(const PeerId& to, Frame frame,
                                   SendDone done) {
  enum class Fate { kSend, kCut, kDrop, kDelay };
  Fate fate = Fate::kSend;
  std::string cut;
  absl::Duration delay;
  {
    absl::MutexLock lock(&state_->mu);
    cut = state_->CutReason(to);
    auto next = state_->drop_next.find(to);
    auto held = state_->delay.find(to);
    if (!cut.empty()) {
      fate = Fate::kCut;
    } else if (next != state_->drop_next.end() && next->second > 0) {
      if (--next->second == 0) state_->drop_next.erase(next);
      fate = Fate::kDrop;
    } else if (state_->drop_rate > 0 && state_->rng.Bernoulli(state_->drop_rate)) {
      fate = Fate::kDrop;
    } else if (held != state_->delay.end()) {
      fate = Fate::kDelay;
      delay = held->second;
    }
    if (fate == Fate::kDrop) ++state_->dropped;
  }
  switch (fate) {
    case Fate::kSend:
      state_->inner->Send(to, std::move(frame), std::move(done));
      return;
    case Fate::kCut: {
      auto pending = std::make_shared<PendingSend>(state_->clock, std::move(done));
      pending->CompleteSoon(absl::UnavailableError(
          absl::StrCat("fault injection: ", to.ShortString(), " is ", cut)));
      return;
    }
    case Fate::kDrop: {
      auto pending = std::make_shared<PendingSend>(state_->clock, std::move(done));
      pending->CompleteSoon(
          absl::DeadlineExceededError(absl::StrCat(
              "no ack from ", to.ShortString(), " (frame dropped by fault injection)")),
          FrameDeadline(frame.header, state_->drop_timeout));
      return;
    }
    case Fate::kDelay: {
      std::weak_ptr<State> weak = state_;
      state_->clock->RunAfter(delay, [weak, to, frame = std::move(frame),
                                      done = std::move(done)]() mutable {
        auto state = weak.lock();
        if (state == nullptr) {
          done(absl::UnavailableError("transport shut down before sending"));
          return;
        }
        state->inner->Send(to, std::move(frame), std::move(done));
      });
      return;
    }
  }
}

}  // namespace skipswarm::node
