#include "node/transport/node_server.h"

#include <grpcpp/health_check_service_interface.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/real_clock.h"

namespace skipswarm::node {
namespace {

int Ms(absl::Duration d) { return static_cast<int>(absl::ToInt64Milliseconds(d)); }

}  // namespace

NodeServer::NodeServer(NodeServerOptions options) : options_(std::move(options)) {}

NodeServer::~NodeServer() { Shutdown(absl::ZeroDuration()); }

absl::Status NodeServer::Start(std::shared_ptr<const identity::PeerCredentials> credentials) {
  if (credentials == nullptr) return absl::InvalidArgumentError("no server credentials");
  grpc::EnableDefaultHealthCheckService(true);
  // Exclusive ports: gRPC sets SO_REUSEPORT by default, which let a second
  // daemon on the same port start a second swarm silently.
  builder_.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder_.AddListeningPort(options_.listen_address, credentials->ForServer(), &port_);
  builder_.SetMaxReceiveMessageSize(options_.max_receive_message_bytes);
  builder_.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, Ms(options_.keepalive_time));
  builder_.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, Ms(options_.keepalive_timeout));
  builder_.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // Let peers ping as often as our own keepalive asks them to.
  builder_.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                              Ms(options_.keepalive_time) / 2);
  builder_.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  builder_.AddChannelArgument(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES,
                              options_.stream_receive_window_bytes);
  builder_.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, options_.bandwidth_probe ? 1 : 0);
  // Note [gRPC memory quota].
  if (options_.grpc_memory_quota_bytes > 0 || options_.grpc_max_threads > 0) {
    resource_quota_ = std::make_unique<grpc::ResourceQuota>("skipswarm-node-server");
    if (options_.grpc_memory_quota_bytes > 0) {
      resource_quota_->Resize(static_cast<size_t>(options_.grpc_memory_quota_bytes));
    }
    if (options_.grpc_max_threads > 0) resource_quota_->SetMaxThreads(options_.grpc_max_threads);
    builder_.SetResourceQuota(*resource_quota_);
  }
  server_ = builder_.BuildAndStart();
  if (server_ == nullptr || port_ == 0) {
    server_.reset();
    return absl::UnavailableError(absl::StrCat(
        "cannot serve on ", options_.listen_address,
        " (port in use, or not an address of this host?); see --listen"));
  }
  return absl::OkStatus();
}

void NodeServer::SetServing(bool serving) {
  if (server_ == nullptr || server_->GetHealthCheckService() == nullptr) return;
  server_->GetHealthCheckService()->SetServingStatus(serving);
}

void NodeServer::Shutdown(absl::Duration grace) {
  {
    absl::MutexLock lock(&shutdown_mu_);
    if (shut_down_ || server_ == nullptr) return;
    shut_down_ = true;
  }
  server_->Shutdown(common::SystemDeadlineAfter(grace));
  server_->Wait();
}

}  // namespace skipswarm::node
