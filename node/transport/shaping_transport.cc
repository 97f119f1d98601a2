#include "node/transport/shaping_transport.h"

#include <algorithm>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "node/transport/token_bucket.h"

namespace skipswarm::node {

// Everything the clock callbacks touch. Callbacks hold a weak_ptr, so a
// timer that fires after the wrapper is gone finds nothing to use.
struct ShapingTransport::State {
  struct Link {
    LinkShape shape;
    TokenBucket bucket;
  };

  State(std::shared_ptr<Transport> inner, common::Clock* clock,
        ShapingOptions options)
      : inner(std::move(inner)),
        clock(clock),
        options(options),
        uplink(options.uplink_bytes_per_second, options.burst_bytes),
        downlink(options.downlink_bytes_per_second, options.burst_bytes) {}

  Link& LinkTo(const PeerId& peer) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    auto it = links.find(peer);
    if (it == links.end()) {
      it = links
               .emplace(peer, Link{options.default_link,
                                   TokenBucket(options.default_link.bytes_per_second,
                                               options.burst_bytes)})
               .first;
    }
    return it->second;
  }

  // The base's inner transport, shared so that a frame waiting for its
  // bucket still has it after the decorator is gone.
  const std::shared_ptr<Transport> inner;
  common::Clock* const clock;
  const ShapingOptions options;

  absl::Mutex mu;
  TokenBucket uplink ABSL_GUARDED_BY(mu);
  TokenBucket downlink ABSL_GUARDED_BY(mu);
  absl::flat_hash_map<PeerId, Link> links ABSL_GUARDED_BY(mu);
  std::shared_ptr<const FrameHandler> handler ABSL_GUARDED_BY(mu);
};

namespace {

uint64_t WireBytes(const Frame& frame) {
  return frame.payload.size() + frame.header.ByteSizeLong();
}

}  // namespace

ShapingTransport::ShapingTransport(std::unique_ptr<Transport> inner,
                                   common::Clock* clock, ShapingOptions options)
    : ForwardingTransport(std::move(inner)),
      state_(std::make_shared<State>(shared_inner(), clock, options)) {
  std::weak_ptr<State> weak = state_;
  state_->inner->SetFrameHandler([weak](const PeerId& from, Frame frame,
                                        AckFn ack) {
    auto state = weak.lock();
    if (state == nullptr) {
      ack(absl::UnavailableError("node is shutting down"));
      return;
    }
    const absl::Duration now = state->clock->SteadyNow();
    absl::Duration ready;
    {
      absl::MutexLock lock(&state->mu);
      ready = state->downlink.Reserve(now, WireBytes(frame));
    }
    auto deliver = [weak, from, frame = std::move(frame),
                    ack = std::move(ack)]() mutable {
      auto state = weak.lock();
      std::shared_ptr<const FrameHandler> handler;
      if (state != nullptr) {
        absl::MutexLock lock(&state->mu);
        handler = state->handler;
      }
      if (handler == nullptr || !*handler) {
        ack(absl::UnavailableError("node has no frame handler"));
        return;
      }
      (*handler)(from, std::move(frame), std::move(ack));
    };
    if (ready <= now) {
      deliver();
    } else {
      state->clock->RunAt(ready, std::move(deliver));
    }
  });
}

ShapingTransport::~ShapingTransport() = default;

void ShapingTransport::SetLink(const PeerId& peer, LinkShape shape) {
  absl::MutexLock lock(&state_->mu);
  state_->links.insert_or_assign(
      peer, State::Link{shape, TokenBucket(shape.bytes_per_second,
                                           state_->options.burst_bytes)});
}

void ShapingTransport::SetFrameHandler(FrameHandler handler) {
  auto shared = std::make_shared<const FrameHandler>(std::move(handler));
  absl::MutexLock lock(&state_->mu);
  state_->handler = std::move(shared);
}

void ShapingTransport::Send(const PeerId& to, Frame frame, SendDone done) {
  common::Clock* clock = state_->clock;
  const absl::Duration now = clock->SteadyNow();
  const uint64_t bytes = WireBytes(frame);
  absl::Duration arrive;
  absl::Duration latency;
  {
    absl::MutexLock lock(&state_->mu);
    State::Link& link = state_->LinkTo(to);
    const absl::Duration up_done = state_->uplink.Reserve(now, bytes);
    const absl::Duration link_done = link.bucket.Reserve(now, bytes);
    latency = link.shape.latency;
    arrive = std::max(up_done, link_done) + latency;
  }
  std::weak_ptr<State> weak = state_;
  clock->RunAt(arrive, [weak, clock, latency, to, frame = std::move(frame),
                        done = std::move(done)]() mutable {
    auto state = weak.lock();
    if (state == nullptr) {
      done(absl::UnavailableError("transport shut down before sending"));
      return;
    }
    // The ack travels back over the same link.
    state->inner->Send(
        to, std::move(frame),
        [clock, latency, done = std::move(done)](absl::Status ack) mutable {
          if (latency <= absl::ZeroDuration()) {
            done(std::move(ack));
            return;
          }
          clock->RunAfter(latency, [done = std::move(done),
                                    ack = std::move(ack)]() mutable {
            done(std::move(ack));
          });
        });
  });
}

}  // namespace skipswarm::node
