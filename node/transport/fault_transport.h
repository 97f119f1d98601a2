// Fault injection around any Transport: drop, delay, partition and kill,
// as seen from this node. Used by tests, chaos runs and the simulator.
//
//   FaultInjectingTransport faulty(std::move(inner), &clock, /*seed=*/7);
//   faulty.SetDelay(peer, absl::Milliseconds(200));
//   faulty.DropNext(peer, 1);      // next frame to peer vanishes
//   faulty.KillPeer(peer);         // peer-failure event; sends UNAVAILABLE
//   faulty.Partition({a, b});      // cut both directions with a and b
//   faulty.Heal();
//
// Semantics: a dropped frame never reaches the peer and its Send completes
// with DEADLINE_EXCEEDED once the frame's deadline (header.deadline_ms, else
// `drop_timeout`) passes, as a lost frame would. Sends to a killed or
// partitioned peer fail UNAVAILABLE (asynchronously) and frames from it are
// refused with UNAVAILABLE; killing or cutting off a peer raises one
// peer-failure event for it. Delays hold a frame before the wrapped
// transport sends it.
//
// Thread rule: thread-safe; see transport.h. The clock must outlive the
// wrapper's timers (delayed sends whose wrapper is gone fail UNAVAILABLE).
#ifndef SKIPSWARM_NODE_TRANSPORT_FAULT_TRANSPORT_H_
#define SKIPSWARM_NODE_TRANSPORT_FAULT_TRANSPORT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/clock.h"
#include "node/transport/forwarding_transport.h"

namespace skipswarm::node {

class FaultInjectingTransport final : public ForwardingTransport {
 public:
  // `seed` drives SetDropRate's coin flips.
  FaultInjectingTransport(std::unique_ptr<Transport> inner,
                          common::Clock* clock, uint64_t seed,
                          absl::Duration drop_timeout = absl::Seconds(30));
  ~FaultInjectingTransport() override;

  // Drops each outgoing frame with probability `p` (0 disables).
  void SetDropRate(double p);
  // Drops the next `count` frames sent to `peer`.
  void DropNext(const PeerId& peer, int count);
  // Holds every frame to `peer` for `delay` (zero removes the delay).
  void SetDelay(const PeerId& peer, absl::Duration delay);
  // Cuts traffic with `peers` both ways (adds to the current cut).
  void Partition(const std::vector<PeerId>& peers);
  // The peer is dead to this node until RevivePeer.
  void KillPeer(const PeerId& peer);
  void RevivePeer(const PeerId& peer);
  // Undoes every Partition and KillPeer.
  void Heal();

  // Frames dropped so far.
  int64_t dropped();

  void SetFrameHandler(FrameHandler handler) override;
  void SetPeerFailureHandler(PeerFailureHandler handler) override;
  void Send(const PeerId& to, Frame frame, SendDone done) override;

 private:
  struct State;
  void Cut(const PeerId& peer, const char* why);
  std::shared_ptr<State> state_;
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRANSPORT_FAULT_TRANSPORT_H_
