#include "node/transport/grpc_transport.h"

#include <algorithm>
#include <utility>
#include <vector>

#include <grpc/support/time.h>
#include <grpcpp/ext/health_check_service_server_builder_option.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/resource_quota.h>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "glog/logging.h"
#include "node/transport/frame_validator.h"
#include "node/transport/grpc_streams.h"
#include "node/transport/pending_send.h"
#include "proto/pipeline.grpc.pb.h"

namespace skipswarm::node {
namespace {

// Largest PipelineMessage we accept: one full chunk plus a generous header.
constexpr int kMaxMessageBytes = static_cast<int>(kMaxChunkBytes) + (256 << 10);

// Per-stream HTTP/2 receive window.
constexpr int kReceiveWindowBytes = 16 << 20;

int Ms(absl::Duration d) { return static_cast<int>(absl::ToInt64Milliseconds(d)); }

}  // namespace

class GrpcTransport::Impl final : public proto::PipelineService::CallbackService {
 public:
  Impl(GrpcTransportOptions options, common::Clock* clock)
      : options_(std::move(options)),
        clock_(clock),
        validator_(std::make_shared<FrameValidator>(ValidatorOptions{
            options_.self, options_.swarm_id, options_.max_payload_bytes,
            options_.duplicate_window, options_.check_tensor_shape}, clock)) {}

  ~Impl() override {
    std::vector<std::shared_ptr<internal::PeerStream>> streams;
    {
      absl::MutexLock lock(&mu_);
      shutting_down_ = true;
      for (auto& [id, peer] : peers_) {
        if (peer.stream) streams.push_back(std::move(peer.stream));
      }
    }
    for (auto& stream : streams) stream->Close();
    streams.clear();  // a stream counts as live until it is destroyed
    // Cancels the calls peers have open to us at once (no grace period).
    if (server_) server_->Shutdown(gpr_inf_past(GPR_CLOCK_MONOTONIC));
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](int* live) { return *live == 0; }, &live_streams_));
    }
    if (server_) server_->Wait();
  }

  void SetServing(bool serving) {
    if (server_ == nullptr || server_->GetHealthCheckService() == nullptr) return;
    server_->GetHealthCheckService()->SetServingStatus(serving);
  }

  absl::Status StartServer() {
    if (options_.serve_on != nullptr) {
      options_.serve_on->RegisterService(this);
      return absl::OkStatus();
    }
    if (options_.listen_address.empty()) return absl::OkStatus();
    grpc::EnableDefaultHealthCheckService(true);
    grpc::ServerBuilder builder;
    // Exclusive ports: gRPC sets SO_REUSEPORT by default, which let a second
    // daemon on the same port start a second swarm silently.
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    builder.AddListeningPort(options_.listen_address,
                             options_.credentials->ForServer(), &port_);
    builder.RegisterService(this);
    builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, Ms(options_.keepalive_time));
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                               Ms(options_.keepalive_timeout));
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    // Let peers ping as often as our own keepalive asks them to.
    builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                               Ms(options_.keepalive_time) / 2);
    builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
    // Activations are MBs: a large per-stream receive window keeps a
    // long fat link busy (BDP probing would get there, slowly).
    builder.AddChannelArgument(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, kReceiveWindowBytes);
    if (options_.resource_quota != nullptr) builder.SetResourceQuota(*options_.resource_quota);
    server_ = builder.BuildAndStart();
    if (server_ == nullptr || port_ == 0) {
      return absl::UnavailableError(absl::StrCat(
          "could not serve the pipeline service on ", options_.listen_address,
          " (port in use, or not an address of this host?); see --listen"));
    }
    return absl::OkStatus();
  }

  // PipelineService: a peer opened a stream to us.
  grpc::ServerBidiReactor<proto::PipelineMessage, proto::FrameAck>* Stream(
      grpc::CallbackServerContext* context) override {
    {
      absl::MutexLock lock(&mu_);
      ++live_streams_;
      ++stats_.streams_accepted;
    }
    internal::ServerStreamEnv env;
    env.validator = validator_;
    env.credentials = options_.credentials.get();
    env.max_unacked_frames = options_.max_frames_awaiting_admission;
    env.quota = options_.quota.get();
    env.handler = [this] {
      absl::MutexLock lock(&mu_);
      return handler_;
    };
    env.on_done = [this] {
      absl::MutexLock lock(&mu_);
      --live_streams_;
    };
    return new internal::ServerStream(context, std::move(env));
  }

  void Send(const PeerId& to, Frame frame, SendDone done) {
    auto pending = std::make_shared<PendingSend>(clock_, std::move(done));
    const proto::FrameHeader& header = frame.header;
    if (header.tensor().payload_bytes() != frame.payload.size() ||
        header.chunk_count() != ChunkCountFor(frame.payload.size())) {
      pending->CompleteSoon(absl::InvalidArgumentError(
          "frame not sealed: payload_bytes / chunk_count do not match the "
          "payload (call SealFrame)"));
      return;
    }
    pending->ArmDeadline(FrameDeadline(header, options_.default_deadline));
    EnsureStub(to);
    std::shared_ptr<internal::PeerStream> stream;
    bool start = false;
    absl::Status error;
    {
      absl::MutexLock lock(&mu_);
      error = StreamToLocked(to, stream, start);
    }
    if (!error.ok()) {
      pending->CompleteSoon(std::move(error));
      return;
    }
    if (start) stream->Start();
    absl::Status queued = stream->Enqueue(std::move(frame), pending);
    if (!queued.ok()) pending->CompleteSoon(std::move(queued));
  }

  void SetPeerAddress(const PeerId& peer, std::string address) {
    std::shared_ptr<internal::PeerStream> old;
    {
      absl::MutexLock lock(&mu_);
      Peer& p = peers_[peer];
      if (p.address == address) return;
      p.address = std::move(address);
      old = std::move(p.stream);
    }
    if (old) old->Close();
  }

  void ForgetPeer(const PeerId& peer) {
    std::shared_ptr<internal::PeerStream> old;
    {
      absl::MutexLock lock(&mu_);
      auto it = peers_.find(peer);
      if (it == peers_.end()) return;
      old = std::move(it->second.stream);
      peers_.erase(it);
    }
    if (old) old->Close();
  }

  void SetFrameHandler(FrameHandler handler) {
    auto shared = std::make_shared<const FrameHandler>(std::move(handler));
    absl::MutexLock lock(&mu_);
    handler_ = std::move(shared);
  }

  void SetPeerFailureHandler(PeerFailureHandler handler) {
    auto shared = std::make_shared<const PeerFailureHandler>(std::move(handler));
    absl::MutexLock lock(&mu_);
    on_failure_ = std::move(shared);
  }

  const GrpcTransportOptions& options() const { return options_; }
  GrpcTransportStats stats() {
    GrpcTransportStats s;
    {
      absl::MutexLock lock(&mu_);
      s = stats_;
    }
    s.frames_refused = validator_->rejected_by_reason();
    return s;
  }
  int port() const { return port_; }

 private:
  struct Peer {
    std::string address;
    std::shared_ptr<internal::PeerStream> stream;
    int failures = 0;  // consecutive broken streams
    absl::Duration retry_at = absl::ZeroDuration();
  };

  // The stream to `to`, creating it (not started: `start` = true) if the
  // back-off allows.
  absl::Status StreamToLocked(const PeerId& to,
                              std::shared_ptr<internal::PeerStream>& stream,
                              bool& start) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (shutting_down_) return absl::UnavailableError("transport is shutting down");
    auto it = peers_.find(to);
    if (it == peers_.end() || it->second.address.empty()) {
      return absl::UnavailableError(
          absl::StrCat("no address known for peer ", to.ShortString()));
    }
    Peer& peer = it->second;
    if (peer.stream == nullptr) {
      const absl::Duration now = clock_->SteadyNow();
      if (now < peer.retry_at) {
        return absl::UnavailableError(absl::StrCat(
            "peer ", to.ShortString(), " failed recently; reconnecting in ",
            absl::FormatDuration(peer.retry_at - now)));
      }
      auto stub = stubs_.find(StubKey(peer.address, to));
      if (stub == stubs_.end()) {
        return absl::UnavailableError("peer address changed; retry");
      }
      internal::PeerStreamEnv env;
      env.self = options_.self;
      env.peer = to;
      env.stub = stub->second.get();
      env.max_queued_frames = options_.max_queued_frames_per_peer;
      env.on_ack = [this, to] { OnAck(to); };
      env.on_done = [this, to](internal::PeerStream* stream,
                               const absl::Status& why, bool deliberate) {
        OnStreamDone(to, stream, why, deliberate);
      };
      // The destructor waits for this: the stream's ClientContext holds a
      // channel reference, and the last one must go on our own thread.
      env.on_destroyed = [this] {
        absl::MutexLock lock(&mu_);
        --live_streams_;
      };
      peer.stream = internal::PeerStream::Create(std::move(env));
      ++live_streams_;
      ++stats_.streams_opened;
      start = true;
    }
    stream = peer.stream;
    return absl::OkStatus();
  }

  // Channels are per (address, node): a TLS channel only talks to the node
  // it was made for (Note [Peer authentication]).
  static std::string StubKey(const std::string& address, const PeerId& peer) {
    return absl::StrCat(address, "/", peer.Hex());
  }

  // Makes sure a stub (channel) for `to`'s address exists. Channels are
  // created outside the lock and kept until the transport is destroyed
  // (see PeerStreamEnv::stub); an unused channel goes idle and closes its
  // connection on its own.
  void EnsureStub(const PeerId& to) {
    std::string address;
    {
      absl::MutexLock lock(&mu_);
      auto it = peers_.find(to);
      if (it == peers_.end() || it->second.address.empty() ||
          stubs_.contains(StubKey(it->second.address, to))) {
        return;
      }
      address = it->second.address;
    }
    std::unique_ptr<proto::PipelineService::Stub> stub = NewStub(address, to);
    absl::MutexLock lock(&mu_);
    stubs_.try_emplace(StubKey(address, to), std::move(stub));  // a racing twin is unused
  }

  std::unique_ptr<proto::PipelineService::Stub> NewStub(const std::string& address,
                                                        const PeerId& peer) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, Ms(options_.keepalive_time));
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, Ms(options_.keepalive_timeout));
    args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, Ms(options_.initial_backoff));
    // gRPC 1.51 also uses this as the minimum connect timeout: keep it long
    // enough for a TLS handshake over a slow, far link.
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, Ms(options_.connect_timeout));
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, Ms(options_.max_backoff));
    args.SetMaxSendMessageSize(kMaxMessageBytes);
    args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, kReceiveWindowBytes);
    // Each transport owns its connections (several transports share a
    // process in tests and the local swarm).
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    options_.credentials->ConfigureChannel(args);
    return proto::PipelineService::NewStub(grpc::CreateCustomChannel(
        address, options_.credentials->ForChannel(peer), args));
  }

  // A stream to `peer` ended; its pending sends have failed already.
  void OnStreamDone(const PeerId& peer, internal::PeerStream* stream,
                    const absl::Status& why, bool deliberate) {
    std::shared_ptr<const PeerFailureHandler> on_failure;
    {
      absl::MutexLock lock(&mu_);
      auto it = peers_.find(peer);
      if (it != peers_.end() && it->second.stream.get() == stream) {
        Peer& p = it->second;
        p.stream.reset();
        if (!deliberate) {
          ++p.failures;
          absl::Duration backoff = options_.initial_backoff;
          for (int i = 1; i < p.failures && backoff < options_.max_backoff; ++i) {
            backoff *= 2;
          }
          p.retry_at = clock_->SteadyNow() + std::min(backoff, options_.max_backoff);
        }
      }
      if (!deliberate && !shutting_down_) on_failure = on_failure_;
    }
    if (!deliberate) {
      LOG(WARNING) << "lost stream to peer " << peer << ": " << why;
    }
    if (on_failure != nullptr && *on_failure) (*on_failure)(peer, why);
  }

  void OnAck(const PeerId& peer) {
    absl::MutexLock lock(&mu_);
    auto it = peers_.find(peer);
    if (it != peers_.end()) it->second.failures = 0;
  }

  const GrpcTransportOptions options_;
  common::Clock* const clock_;
  const std::shared_ptr<FrameValidator> validator_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;

  absl::Mutex mu_;
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  int live_streams_ ABSL_GUARDED_BY(mu_) = 0;  // client and server reactors
  GrpcTransportStats stats_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<PeerId, Peer> peers_ ABSL_GUARDED_BY(mu_);
  // By StubKey(address, peer).
  absl::flat_hash_map<std::string, std::unique_ptr<proto::PipelineService::Stub>>
      stubs_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const FrameHandler> handler_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const PeerFailureHandler> on_failure_ ABSL_GUARDED_BY(mu_);
};

GrpcTransport::GrpcTransport(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

GrpcTransport::~GrpcTransport() = default;

absl::StatusOr<std::unique_ptr<GrpcTransport>> GrpcTransport::Create(
    GrpcTransportOptions options, common::Clock* clock) {
  if (options.self.IsZero()) {
    return absl::InvalidArgumentError("GrpcTransportOptions.self is not set");
  }
  if (options.credentials == nullptr) {
    return absl::InvalidArgumentError(
        "GrpcTransportOptions.credentials is not set (TLS from the node identity, or "
        "PeerCredentials::Insecure() behind --insecure)");
  }
  if (!options.credentials->insecure() && options.credentials->id() != options.self) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GrpcTransportOptions.self ", options.self.ShortString(),
        " is not the node id of the TLS identity (", options.credentials->id().ShortString(),
        ")"));
  }
  auto impl = std::make_unique<Impl>(std::move(options), clock);
  absl::Status started = impl->StartServer();
  if (!started.ok()) return started;
  return std::unique_ptr<GrpcTransport>(new GrpcTransport(std::move(impl)));
}

int GrpcTransport::port() const { return impl_->port(); }

void GrpcTransport::SetServing(bool serving) { impl_->SetServing(serving); }

std::string GrpcTransport::loopback_address() const {
  return absl::StrCat("127.0.0.1:", impl_->port());
}

GrpcTransportStats GrpcTransport::stats() const { return impl_->stats(); }

PeerId GrpcTransport::self() const { return impl_->options().self; }

void GrpcTransport::SetFrameHandler(FrameHandler handler) {
  impl_->SetFrameHandler(std::move(handler));
}

void GrpcTransport::SetPeerFailureHandler(PeerFailureHandler handler) {
  impl_->SetPeerFailureHandler(std::move(handler));
}

void GrpcTransport::SetPeerAddress(const PeerId& peer, std::string address) {
  impl_->SetPeerAddress(peer, std::move(address));
}

void GrpcTransport::ForgetPeer(const PeerId& peer) { impl_->ForgetPeer(peer); }

void GrpcTransport::Send(const PeerId& to, Frame frame, SendDone done) {
  impl_->Send(to, std::move(frame), std::move(done));
}

}  // namespace skipswarm::node
