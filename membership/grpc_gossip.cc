#include "membership/grpc_gossip.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "membership/bootstrap_diagnostics.h"
#include "proto/grpc_status.h"

namespace skipswarm::membership {
namespace {

// Gossip messages are small (≤ 64 records of ≤ 8 KiB each, plus digests).
constexpr int kMaxMessageBytes = 4 << 20;

}  // namespace

// ---------------------------------------------------------------- server

class GrpcGossipServer::Service final
    : public proto::GossipService::CallbackService {
 public:
  Service(GossipHandler* handler, bool insecure)
      : handler_(handler), insecure_(insecure) {}

  grpc::ServerUnaryReactor* Ping(grpc::CallbackServerContext* ctx,
                                 const proto::PingRequest* req,
                                 proto::Ack* resp) override {
    return Serve<proto::Ack>(ctx, *req, resp, [&](const PeerInfo& peer, auto reply) {
      handler_->HandlePing(peer, *req, std::move(reply));
    });
  }
  grpc::ServerUnaryReactor* PingReq(grpc::CallbackServerContext* ctx,
                                    const proto::PingRequest* req,
                                    proto::Ack* resp) override {
    return Serve<proto::Ack>(ctx, *req, resp, [&](const PeerInfo& peer, auto reply) {
      handler_->HandlePingReq(peer, *req, std::move(reply));
    });
  }
  grpc::ServerUnaryReactor* PushPull(grpc::CallbackServerContext* ctx,
                                     const proto::PushPullRequest* req,
                                     proto::PushPullResponse* resp) override {
    return Serve<proto::PushPullResponse>(
        ctx, *req, resp, [&](const PeerInfo& peer, auto reply) {
          handler_->HandlePushPull(peer, *req, std::move(reply));
        });
  }

 private:
  template <typename Resp, typename Dispatch>
  grpc::ServerUnaryReactor* Serve(grpc::CallbackServerContext* ctx,
                                  const google::protobuf::Message& req, Resp* resp,
                                  Dispatch dispatch) {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    // On a daemon's one server (Register) the server-wide bound is the
    // largest any service takes; gossip keeps its own.
    if (req.ByteSizeLong() > static_cast<size_t>(kMaxMessageBytes)) {
      reactor->Finish(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                   "gossip message over 4 MiB"));
      return reactor;
    }
    PeerInfo peer;
    peer.address = ctx->peer();
    if (!insecure_) {
      absl::StatusOr<common::NodeId> id =
          identity::PeerIdFromAuthContext(*ctx->auth_context());
      if (!id.ok()) {
        reactor->Finish(proto::ToGrpcStatus(id.status()));
        return reactor;
      }
      peer.authenticated_id = *id;
    }
    dispatch(peer, absl::AnyInvocable<void(absl::StatusOr<Resp>)>(
                       [reactor, resp](absl::StatusOr<Resp> result) {
                         if (!result.ok()) {
                           reactor->Finish(proto::ToGrpcStatus(result.status()));
                           return;
                         }
                         *resp = *std::move(result);
                         reactor->Finish(grpc::Status::OK);
                       }));
    return reactor;
  }

  GossipHandler* const handler_;
  const bool insecure_;
};

absl::StatusOr<std::unique_ptr<GrpcGossipServer>> GrpcGossipServer::Start(
    const std::string& address, GossipHandler* handler,
    const identity::GrpcSecurity& security, absl::Time now) {
  auto credentials = identity::PeerCredentials::Create(security, now);
  if (!credentials.ok()) return credentials.status();
  std::unique_ptr<GrpcGossipServer> server(new GrpcGossipServer());
  server->service_ = std::make_unique<Service>(handler, security.insecure);
  grpc::ServerBuilder builder;
  // Exclusive ports: gRPC sets SO_REUSEPORT by default, which let a second
  // daemon on the same port start a second swarm silently.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(address, (*credentials)->ForServer(), &server->port_);
  builder.RegisterService(server->service_.get());
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", address,
        " (address in use, or not an address of this host?); see --gossip_listen"));
  }
  return server;
}

std::unique_ptr<GrpcGossipServer> GrpcGossipServer::Register(
    grpc::ServerBuilder* builder, GossipHandler* handler,
    const identity::GrpcSecurity& security) {
  std::unique_ptr<GrpcGossipServer> server(new GrpcGossipServer());
  server->service_ = std::make_unique<Service>(handler, security.insecure);
  builder->RegisterService(server->service_.get());
  return server;
}

GrpcGossipServer::~GrpcGossipServer() { Shutdown(); }

void GrpcGossipServer::Shutdown() {
  if (server_ != nullptr) {
    server_->Shutdown();
    server_->Wait();
    server_.reset();
  }
}

// ---------------------------------------------------------------- client

GrpcGossipTransport::GrpcGossipTransport(identity::GrpcSecurity security,
                                         common::Clock* clock)
    : security_(security), clock_(clock) {}

GrpcGossipTransport::~GrpcGossipTransport() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](int* n) { return *n == 0; }, &in_flight_));
}

void GrpcGossipTransport::CallStarted() {
  absl::MutexLock lock(&mu_);
  ++in_flight_;
}

void GrpcGossipTransport::CallFinished() {
  absl::MutexLock lock(&mu_);
  --in_flight_;
}

absl::StatusOr<GrpcGossipTransport::Peer*> GrpcGossipTransport::PeerFor(
    const std::string& address) {
  absl::MutexLock lock(&mu_);
  auto it = peers_.find(address);
  if (it != peers_.end()) return it->second.get();
  if (credentials_ == nullptr) {
    auto credentials = identity::PeerCredentials::Create(security_, clock_->Now());
    if (!credentials.ok()) return credentials.status();
    credentials_ = *std::move(credentials);
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  credentials_->ConfigureChannel(args);
  // Fail fast and retry at our level (SWIM probes have their own deadline).
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  auto peer = std::make_unique<Peer>();
  peer->channel =
      grpc::CreateCustomChannel(address, credentials_->ForChannel(), args);
  peer->stub = proto::GossipService::NewStub(peer->channel);
  Peer* raw = peer.get();
  peers_[address] = std::move(peer);
  return raw;
}

absl::Duration GrpcGossipTransport::Budget(Peer* peer, absl::Duration timeout) {
  // try_to_connect: an idle channel starts connecting now. A call on a
  // CONNECTING channel waits for the attempt; a TRANSIENT_FAILURE one
  // (refused, or backing off) fails at once whatever the deadline.
  if (peer->channel->GetState(/*try_to_connect=*/true) == GRPC_CHANNEL_READY) {
    return timeout;
  }
  return std::max(timeout, kConnectBudget);
}

template <typename Resp>
absl::Status GrpcGossipTransport::CheckPeer(const PeerRef& to,
                                            grpc::ClientContext& ctx,
                                            const Resp& resp) {
  if (security_.insecure) return absl::OkStatus();
  std::shared_ptr<const grpc::AuthContext> auth = ctx.auth_context();
  if (auth == nullptr) return absl::UnauthenticatedError("no TLS context");
  absl::StatusOr<common::NodeId> id = identity::PeerIdFromAuthContext(*auth);
  if (!id.ok()) return id.status();
  if (!to.id.IsZero() && *id != to.id) {
    return absl::UnauthenticatedError(absl::StrCat(
        "peer's certificate is node ", id->ShortString(), ", expected ",
        to.id.ShortString()));
  }
  if (resp.from() != id->Bytes()) {
    return absl::UnauthenticatedError(absl::StrCat(
        "peer's certificate is node ", id->ShortString(),
        " but its reply claims another id"));
  }
  return absl::OkStatus();
}

namespace {

template <typename Req, typename Resp>
struct ClientCall {
  grpc::ClientContext ctx;
  Req req;
  Resp resp;
  absl::AnyInvocable<void(absl::StatusOr<Resp>)> done;
};

}  // namespace

#define SS_GOSSIP_CALL(Method, Req, Resp)                                     \
  do {                                                                        \
    auto peer = PeerFor(to.address);                                          \
    if (!peer.ok()) {                                                         \
      clock_->RunAfter(absl::ZeroDuration(),                                  \
                       [done = std::move(done), s = peer.status()]() mutable { \
                         done(s);                                             \
                       });                                                    \
      return;                                                                 \
    }                                                                         \
    auto* call = new ClientCall<Req, Resp>();                                 \
    call->req = req;                                                          \
    call->done = std::move(done);                                             \
    call->ctx.set_deadline(                                                   \
        absl::ToChronoTime(clock_->Now() + Budget(*peer, timeout)));          \
    CallStarted();                                                            \
    (*peer)->stub->async()->Method(                                           \
        &call->ctx, &call->req, &call->resp, [this, call, to](grpc::Status s) { \
          absl::StatusOr<Resp> result;                                        \
          if (!s.ok()) {                                                      \
            result = ExplainGossipError(proto::ToAbslStatus(s), to.address);  \
          } else if (absl::Status c = CheckPeer(to, call->ctx, call->resp);   \
                     !c.ok()) {                                               \
            result = ExplainGossipError(c, to.address);                       \
          } else {                                                            \
            result = std::move(call->resp);                                   \
          }                                                                   \
          auto cb = std::move(call->done);                                    \
          delete call;                                                        \
          cb(std::move(result));                                              \
          CallFinished();                                                     \
        });                                                                   \
  } while (false)

void GrpcGossipTransport::Ping(const PeerRef& to, const proto::PingRequest& req,
                               absl::Duration timeout, AckCallback done) {
  SS_GOSSIP_CALL(Ping, proto::PingRequest, proto::Ack);
}

void GrpcGossipTransport::PingReq(const PeerRef& to,
                                  const proto::PingRequest& req,
                                  absl::Duration timeout, AckCallback done) {
  SS_GOSSIP_CALL(PingReq, proto::PingRequest, proto::Ack);
}

void GrpcGossipTransport::PushPull(const PeerRef& to,
                                   const proto::PushPullRequest& req,
                                   absl::Duration timeout,
                                   PushPullCallback done) {
  SS_GOSSIP_CALL(PushPull, proto::PushPullRequest, proto::PushPullResponse);
}

#undef SS_GOSSIP_CALL

}  // namespace skipswarm::membership
