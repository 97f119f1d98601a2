// RelayDialer (relay_client.h): every node's side towards outbound-only
// peers.
#include <glog/logging.h>
#include <grpcpp/grpcpp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "node/transport/relay/relay_client.h"
#include "node/transport/relay/splice.h"
#include "proto/version.h"

namespace skipswarm::node {

RelayDialer::RelayDialer(RelayDialerOptions options, RelaysOf relays_of)
    : options_(std::move(options)),
      relays_of_(std::move(relays_of)),
      channels_(options_.credentials) {}

RelayDialer::~RelayDialer() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    // Wakes the accept loops (accept() fails on a shut-down socket).
    for (auto& [target, endpoint] : endpoints_) ::shutdown(endpoint.first, SHUT_RDWR);
    for (auto& [key, context] : contexts_) context->TryCancel();
  }
  workers_.JoinAll();
  workers_.JoinAll();  // circuits the accept loops started meanwhile
  absl::MutexLock lock(&mu_);
  for (auto& [target, endpoint] : endpoints_) ::close(endpoint.first);
}

RelayDialerStats RelayDialer::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

absl::StatusOr<std::string> RelayDialer::EndpointFor(const common::NodeId& target) {
  absl::MutexLock lock(&mu_);
  if (stop_) return absl::UnavailableError("relay dialer stopped");
  if (auto it = endpoints_.find(target); it != endpoints_.end()) return it->second.second;
  absl::StatusOr<LoopbackListener> listener = ListenOnLoopback();
  if (!listener.ok()) return listener.status();
  std::string address = absl::StrCat("127.0.0.1:", listener->port);
  endpoints_[target] = {listener->fd, address};
  const int fd = listener->fd;
  workers_.Start([this, target, fd] { AcceptLoop(target, fd); });
  LOG(INFO) << "relay: node " << target << " (outbound-only) is dialed through "
            << address << ", carried by its relays";
  return address;
}

void RelayDialer::AcceptLoop(common::NodeId target, int listen_fd) {
  while (true) {
    const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0 && errno == EINTR) continue;
    absl::MutexLock lock(&mu_);
    if (stop_ || fd < 0) {
      if (fd >= 0) ::close(fd);
      return;
    }
    workers_.Start([this, target, fd] { Carry(target, fd); });
  }
}

// Tries the target's relays in order, this node first if it is one of them
// (Note [Own relay first]); the first that splices the circuit carries this
// connection until either end closes it.
//
// Note [Own relay first]
// A member that is itself one of the target's relays carries its own
// connections to the target: the circuit's first leg is then a loopback
// connection to its own Relay service, and only the target's Attach stream
// crosses the network. Through the target's first-listed relay instead
// (another member), every byte would cross a second network link and a
// third process, as a replica's gradient pushes to a relayed replica that
// it relays did (netns home layout, tests/netns/README.md).
void RelayDialer::Carry(const common::NodeId& target, int fd) {
  uint64_t key = 0;
  std::string failures;
  std::vector<RelayCandidate> relays = relays_of_(target);
  std::stable_partition(relays.begin(), relays.end(),
                        [this](const RelayCandidate& r) { return r.id == options_.self; });
  for (const RelayCandidate& relay : relays) {
    std::shared_ptr<grpc::Channel> channel = channels_.Get(relay);
    // A relative deadline (GPR_TIMESPAN): gRPC adds its own clock's time.
    if (!channel->WaitForConnected(gpr_time_from_millis(
            absl::ToInt64Milliseconds(options_.connect_timeout), GPR_TIMESPAN))) {
      absl::StrAppend(&failures, " ", relay.id.ShortString(), ": no connection;");
      continue;
    }
    grpc::ClientContext context;
    {
      absl::MutexLock lock(&mu_);
      if (stop_) break;
      key = ++next_key_;
      contexts_[key] = &context;
    }
    auto stub = proto::Relay::NewStub(channel);
    auto stream = stub->Connect(&context);
    proto::RelayBytes first;
    first.set_protocol_version(proto::kProtocolVersion);
    first.set_node_id(options_.self.Bytes());
    first.set_target(target.Bytes());
    proto::RelayBytes spliced;
    if (stream->Write(first) && stream->Read(&spliced)) {
      {
        absl::MutexLock lock(&mu_);
        ++stats_.circuits;
      }
      Splice(fd, stream.get(), &context);  // closes fd
      absl::MutexLock lock(&mu_);
      contexts_.erase(key);
      return;
    }
    // Read failed: the call is over and Finish has the relay's reason.
    const grpc::Status status = stream->Finish();
    absl::StrAppend(&failures, " ", relay.id.ShortString(), ": ", status.error_message(), ";");
    absl::MutexLock lock(&mu_);
    contexts_.erase(key);
  }
  {
    absl::MutexLock lock(&mu_);
    ++stats_.failed;
  }
  ::close(fd);  // the dialer's gRPC channel sees the connection fail: UNAVAILABLE
  LOG_EVERY_N(WARNING, 20) << "relay: no relay carried a connection to " << target << ":"
                           << (failures.empty() ? " it has no relay" : failures);
}

}  // namespace skipswarm::node
