// In-process transport: many endpoints attach to one Switchboard and
// exchange frames through timers on an injected clock, so delivery is
// deterministic on a SimClock (tests, the simulator) and real-time on a
// RealClock. Frames pass the same receiver checks as over gRPC (Note
// [Frame validation]), without serialisation.
//
//   common::SimClock clock;
//   Switchboard board(&clock, {.latency = absl::Milliseconds(5)});
//   auto a = board.Attach(NodeId::ForName("a")).value();
//   auto b = board.Attach(NodeId::ForName("b")).value();
//   b->SetFrameHandler(...);
//   a->Send(b->self(), std::move(frame), done);
//   clock.Advance(absl::Milliseconds(10));   // delivered at 5 ms, acked at 10
//
// Killing a node = destroying its endpoint: later sends to it fail
// UNAVAILABLE, and endpoints that had sent to it get a peer-failure event.
//
// Thread rule: thread-safe. Deliveries, acks and failure events run as
// clock callbacks, one after another. The clock must outlive the switchboard
// and every endpoint; the switchboard must outlive its endpoints.
#ifndef SKIPSWARM_NODE_TRANSPORT_INPROC_TRANSPORT_H_
#define SKIPSWARM_NODE_TRANSPORT_INPROC_TRANSPORT_H_

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "node/transport/transport.h"

namespace skipswarm::node {

struct SwitchboardOptions {
  // One-way latency of every link (frames and acks each take it).
  absl::Duration latency = absl::ZeroDuration();
  // Swarm id the endpoints' validators require (empty: any).
  std::string swarm_id;
  // Ack deadline for frames whose header names none.
  absl::Duration default_deadline = absl::Seconds(30);
};

class Switchboard {
 public:
  Switchboard(common::Clock* clock, SwitchboardOptions options = {});
  ~Switchboard();

  // A new endpoint for `id`. ALREADY_EXISTS if `id` is attached.
  absl::StatusOr<std::unique_ptr<Transport>> Attach(const PeerId& id);

  // Number of attached endpoints.
  size_t size();

 private:
  friend class InProcessEndpoint;
  struct Core;

  std::shared_ptr<Core> Find(const PeerId& id);
  void Detach(const PeerId& id);

  common::Clock* const clock_;
  const SwitchboardOptions options_;
  absl::Mutex mu_;
  absl::flat_hash_map<PeerId, std::shared_ptr<Core>> cores_ ABSL_GUARDED_BY(mu_);
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRANSPORT_INPROC_TRANSPORT_H_
