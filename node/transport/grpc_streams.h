// Internal to GrpcTransport: the two ends of one PipelineService.Stream.
//
//   ServerStream  the receiving end (callback-API reactor): reassembles
//                 frames from header + chunks, validates them (Note [Frame
//                 validation]), hands them to the frame handler and writes
//                 one FrameAck per frame, in frame order.
//   PeerStream    the sending end towards one peer: a bounded queue of
//                 frames written one message at a time (header, then ≤ 1 MiB
//                 chunks), acks matched to frames in order.
//
// Lifetimes: both reactors delete / release themselves in OnDone. A
// PeerStream keeps a hold on its call until it is broken and no write is in
// flight, so StartWrite is never issued after OnDone. A ServerStream
// finishes only when no write is in flight and every frame it handed to the
// handler has been acked, so an AckFn never outlives its reactor.
//
// Thread rule: reactions run on gRPC's callback threads; each class guards
// its state with one mutex and never calls gRPC or a callback under it.
#ifndef SKIPSWARM_NODE_TRANSPORT_GRPC_STREAMS_H_
#define SKIPSWARM_NODE_TRANSPORT_GRPC_STREAMS_H_

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/peer_quota.h"
#include "identity/tls_credentials.h"
#include "node/transport/frame_validator.h"
#include "node/transport/pending_send.h"
#include "node/transport/transport.h"
#include "proto/pipeline.grpc.pb.h"

namespace skipswarm::node::internal {

// Metadata key carrying the sender's NodeId (hex) on every stream.
inline constexpr char kNodeIdMetadata[] = "ss-node-id";

struct ServerStreamEnv {
  std::shared_ptr<FrameValidator> validator;
  // Checks the sender's certificate against the id it claims (Note [Peer
  // authentication]). Borrowed: the transport outlives its streams.
  const identity::PeerCredentials* credentials = nullptr;
  // Current frame handler (may be null).
  std::function<std::shared_ptr<const FrameHandler>()> handler;
  // Called once from OnDone, just before the reactor deletes itself.
  std::function<void()> on_done;
  // The stream stops reading while this many frames wait for the handler's
  // verdict, so HTTP/2 flow control holds the sender back.
  int max_unacked_frames = 4;
  // Note [Peer quotas]; null: none. Borrowed: the transport outlives its
  // streams.
  common::PeerQuota* quota = nullptr;
};

class ServerStream final
    : public grpc::ServerBidiReactor<proto::PipelineMessage, proto::FrameAck> {
 public:
  ServerStream(grpc::CallbackServerContext* context, ServerStreamEnv env);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  // Message handling; returns a complete frame to admit, if any.
  std::optional<Frame> Consume(proto::PipelineMessage& message);
  // Charges a message that no frame header paid for to the peer's quota;
  // false (and the stream ending for its quota) when it is over.
  bool PayForUnframed(const proto::PipelineMessage& message) ABSL_LOCKS_EXCLUDED(mu_);
  // Queues the ack of a frame that failed a check, ends the current frame.
  // `quiet`: the peer's quota refused it (and logged that already).
  void RejectCurrent(const proto::FrameHeader& header, absl::Status why,
                     bool quiet = false);
  // Reserves the next ack slot; returns its sequence number.
  uint64_t ReserveAck() ABSL_LOCKS_EXCLUDED(mu_);
  void FillAck(uint64_t seq, proto::FrameAck ack, const absl::Status& status)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Starts the next ack write or finishes the stream, as the state allows.
  void Pump() ABSL_LOCKS_EXCLUDED(mu_);

  ServerStreamEnv env_;
  PeerId from_;
  common::PeerQuota::StreamSlot slot_;  // one of from_'s stream slots
  proto::PipelineMessage in_;  // owned by the single outstanding read

  // Frame being reassembled (touched only by OnReadDone, one at a time).
  std::optional<Frame> assembling_;
  uint32_t next_chunk_ = 0;
  uint64_t bytes_so_far_ = 0;
  uint32_t crc_so_far_ = 0;  // CRC-32C of the chunks so far, while cache-hot
  bool skipping_ = false;  // discarding chunks of a rejected frame

  absl::Mutex mu_;
  std::deque<std::optional<proto::FrameAck>> acks_ ABSL_GUARDED_BY(mu_);
  uint64_t first_seq_ ABSL_GUARDED_BY(mu_) = 0;
  int unfilled_ ABSL_GUARDED_BY(mu_) = 0;
  bool in_read_ ABSL_GUARDED_BY(mu_) = false;
  bool read_paused_ ABSL_GUARDED_BY(mu_) = false;  // too many unacked frames
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  // Over quota: no more reads; the acks owed go out, then finish_status_.
  bool ending_ ABSL_GUARDED_BY(mu_) = false;
  bool write_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status finish_status_ ABSL_GUARDED_BY(mu_);
  proto::FrameAck out_;  // owned by the single outstanding write
};

class PeerStream;

struct PeerStreamEnv {
  PeerId self;
  PeerId peer;
  // Borrowed; must outlive Start(). (The owner keeps stubs, and so their
  // channels, until it is destroyed on its own thread: destroying the last
  // channel on a gRPC callback thread crashes gRPC 1.51.)
  proto::PipelineService::Stub* stub = nullptr;
  size_t max_queued_frames = 8;
  // Called on every ack (the stream works).
  std::function<void()> on_ack;
  // Runs at the very end of the stream's destruction, after its
  // ClientContext (which holds a channel reference) is gone.
  std::function<void()> on_destroyed;
  // Called once from OnDone with the stream's final status and whether it
  // was closed on purpose (Close()). Runs with no lock held.
  std::function<void(PeerStream* stream, const absl::Status& status,
                     bool deliberate)>
      on_done;
};

class PeerStream final
    : public grpc::ClientBidiReactor<proto::PipelineMessage, proto::FrameAck>,
      public std::enable_shared_from_this<PeerStream> {
 public:
  // A stream that is not started yet (no gRPC calls: safe under a lock).
  static std::shared_ptr<PeerStream> Create(PeerStreamEnv env);
  // Starts the call; from now on the stream keeps itself alive until OnDone.
  // Call exactly once.
  void Start();

  // Queues a frame. RESOURCE_EXHAUSTED if the queue is full, UNAVAILABLE if
  // the stream is broken; otherwise `pending` completes with the peer's ack.
  absl::Status Enqueue(Frame frame, std::shared_ptr<PendingSend> pending);
  // Cancels the call; pending sends fail UNAVAILABLE; no failure event.
  void Close();

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  struct Outgoing {
    Frame frame;
    std::shared_ptr<PendingSend> pending;
  };
  struct AwaitingAck {
    proto::FrameHeader header;  // payload already written, not kept
    std::shared_ptr<PendingSend> pending;
  };

  // Runs a callback when destroyed; declared first, so destroyed last.
  struct RunOnDestroy {
    std::function<void()> fn;
    ~RunOnDestroy() {
      if (fn) fn();
    }
  };

  explicit PeerStream(PeerStreamEnv env);
  void Pump() ABSL_LOCKS_EXCLUDED(mu_);
  // Marks the stream broken; releases the call hold once writes are idle.
  void Break() ABSL_LOCKS_EXCLUDED(mu_);
  bool TakeHoldReleaseLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  RunOnDestroy on_destroyed_;
  const PeerStreamEnv env_;
  grpc::ClientContext context_;
  proto::FrameAck in_;            // owned by the single outstanding read
  proto::PipelineMessage out_;    // owned by the single outstanding write
  std::shared_ptr<PeerStream> self_;  // keeps the reactor alive until OnDone

  absl::Mutex mu_;
  std::deque<Outgoing> queue_ ABSL_GUARDED_BY(mu_);
  bool header_sent_ ABSL_GUARDED_BY(mu_) = false;  // for queue_.front()
  uint32_t next_chunk_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<AwaitingAck> awaiting_ ABSL_GUARDED_BY(mu_);
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool write_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool hold_released_ ABSL_GUARDED_BY(mu_) = false;
  bool deliberate_ ABSL_GUARDED_BY(mu_) = false;
  std::string break_reason_ ABSL_GUARDED_BY(mu_);
};

}  // namespace skipswarm::node::internal

#endif  // SKIPSWARM_NODE_TRANSPORT_GRPC_STREAMS_H_
