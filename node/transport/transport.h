// The narrow seam through which node code reaches its peers (docs/DESIGN.md §3):
// send a frame to a peer id, receive frames, learn of peer failures, keep an
// address book. Implementations: GrpcTransport (production),
// InProcessTransport (tests, simulator); wrappers add faults
// (FaultInjectingTransport) and WAN shaping / bandwidth caps
// (ShapingTransport). Wrappers own the transport they wrap.
//
//   transport->SetFrameHandler(AdmitWith([&](const PeerId& from, Frame f) {
//     if (!slots.TryTake()) return absl::ResourceExhaustedError("no slot");
//     queue.Push(std::move(f));
//     return absl::OkStatus();
//   }));
//   transport->Send(next, std::move(frame), [](absl::Status ack) {
//     if (IsRetryElsewhere(ack)) Reroute();
//   });
//
// Ack statuses (the peer's verdict, or the transport's when there is none):
//   OK                   admitted; the receiver now owns the micro-batch.
//   RESOURCE_EXHAUSTED   refused for memory (receiver) or local send queue
//                        full: retry elsewhere or later.
//   UNAVAILABLE          no stream / stream broke / peer unknown or dead:
//                        retry elsewhere.
//   DEADLINE_EXCEEDED    no ack within header.deadline_ms (or the default):
//                        retry elsewhere (the frame may still have arrived;
//                        a retry to the same peer gets ALREADY_EXISTS).
//   INVALID_ARGUMENT     the frame is malformed (route, sizes, chunks).
//   FAILED_PRECONDITION  protocol version mismatch.
//   PERMISSION_DENIED    wrong swarm id.
//   DATA_LOSS            payload checksum mismatch.
//   ALREADY_EXISTS       duplicate (origin, iteration, mb, direction, hop).
// The last five mean "do not retry this frame as is".
//
// Thread rule (all implementations): every method is thread-safe. `done`
// and the handlers never run inside the call that registered or triggered
// them, never with a transport lock held, and may call back into the
// transport. They run on the transport's threads (gRPC) or on clock timers
// (in-process, shaping, faults), so they must not block for long.
#ifndef SKIPSWARM_NODE_TRANSPORT_TRANSPORT_H_
#define SKIPSWARM_NODE_TRANSPORT_TRANSPORT_H_

#include <functional>
#include <string>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "common/node_id.h"
#include "node/transport/frame.h"

namespace skipswarm::node {

using PeerId = common::NodeId;

// Receives the ack status of one Send. Runs exactly once.
using SendDone = absl::AnyInvocable<void(absl::Status ack)>;
// Completes the admission of one received frame; its status becomes the
// sender's ack. Must be called exactly once, promptly (an unanswered frame
// holds up the acks of later frames on the same stream).
using AckFn = absl::AnyInvocable<void(absl::Status admission)>;
// Receives frames that passed validation (Note [Frame validation] in
// frame_validator.h). `from` is the sending peer as it identified itself.
using FrameHandler =
    std::function<void(const PeerId& from, Frame frame, AckFn ack)>;
// Told when a peer is lost: its stream broke, it was killed (fault wrapper),
// or it left the switchboard. Pending sends to it also fail UNAVAILABLE.
using PeerFailureHandler =
    std::function<void(const PeerId& peer, const absl::Status& why)>;

class Transport {
 public:
  virtual ~Transport() = default;

  // This node's id (what peers put in route[hop_index] for us).
  virtual PeerId self() const = 0;

  // Replaces the receive handler. Frames that arrive with no handler set
  // are refused with UNAVAILABLE.
  virtual void SetFrameHandler(FrameHandler handler) = 0;
  virtual void SetPeerFailureHandler(PeerFailureHandler handler) = 0;

  // Address book. `address` is "host:port" for gRPC; the in-process
  // transport ignores it (peers are found on the switchboard).
  virtual void SetPeerAddress(const PeerId& peer, std::string address) = 0;
  // Forgets the peer's address and closes its stream; pending sends to it
  // fail UNAVAILABLE (no failure event: the caller asked for it).
  virtual void ForgetPeer(const PeerId& peer) = 0;

  // Sends `frame` to `to`; `done` gets the peer's ack status (see above).
  // The frame should be sealed (SealFrame). Never blocks on the network;
  // never calls `done` inline.
  virtual void Send(const PeerId& to, Frame frame, SendDone done) = 0;
};

// Adapts a handler that decides admission at once into a FrameHandler.
FrameHandler AdmitWith(
    std::function<absl::Status(const PeerId& from, Frame frame)> admit);

// True for the ack codes after which the sender should try another peer
// (RESOURCE_EXHAUSTED, UNAVAILABLE, DEADLINE_EXCEEDED).
bool IsRetryElsewhere(const absl::Status& ack);

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRANSPORT_TRANSPORT_H_
