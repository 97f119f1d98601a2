// NodeServer: the one gRPC server of a daemon. Every network-facing
// service (pipeline frames, replica group, gossip, state transfer, gRPC
// health) registers on it, so a node listens on exactly one TCP port: one
// port to open in a firewall, one address (`--advertise`) in its record.
// The metrics/status HTTP server stays on its own optional port.
//
//   NodeServer server(NodeServerOptions{"0.0.0.0:7000"});
//   GrpcTransportOptions to;  to.serve_on = server.builder();  ...
//   ...create every service with serve_on = server.builder()...
//   SS_RETURN_IF_ERROR(server.Start(creds)); // binds; server.port()
//   ...
//   server.Shutdown(absl::Seconds(1));       // before the services go
//
// The server-wide settings are the union of what the services need: the
// largest message any of them accepts (each service still checks its own
// bound), the pipeline's keepalive and its stream window (Note [Stream
// window]).
//
// Thread rule: builder() and Start on one thread before any call is
// served; SetServing, port and Shutdown are thread-safe. Services must
// outlive the server's Shutdown (gRPC calls into them until then).
#ifndef SKIPSWARM_NODE_TRANSPORT_NODE_SERVER_H_
#define SKIPSWARM_NODE_TRANSPORT_NODE_SERVER_H_

#include <grpcpp/grpcpp.h>
#include <grpcpp/resource_quota.h>

#include <atomic>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "identity/tls_credentials.h"

namespace skipswarm::node {

struct NodeServerOptions {
  // "host:port"; port 0 picks a free one (port() says which).
  std::string listen_address = "127.0.0.1:0";
  // The largest message any registered service accepts.
  int max_receive_message_bytes = 8 << 20;
  absl::Duration keepalive_time = absl::Seconds(10);
  absl::Duration keepalive_timeout = absl::Seconds(5);
  // Note [Stream window]: the per-stream HTTP/2 receive window gRPC starts
  // from, and whether its bandwidth probe may grow it (activations are MBs;
  // a long fat link needs the probe).
  int stream_receive_window_bytes = 16 << 20;
  bool bandwidth_probe = true;
  // Note [gRPC memory quota]: a bound on the memory gRPC itself uses for
  // all connections and calls together (0: none), and on the threads it
  // starts for the synchronous services (0: none).
  int64_t grpc_memory_quota_bytes = 0;
  int grpc_max_threads = 0;
};

// Note [gRPC memory quota]
// * Per-peer quotas (Note [Peer quotas] in common/peer_quota.h) bound what
//   each peer may ask of the services, but the bytes gRPC buffers before a
//   service sees them (each connection's read buffers, each stream's HTTP/2
//   receive window, messages waiting to be read) are gRPC's, per connection
//   and per stream: many connections add up.
// * gRPC's own mechanism bounds their sum: a grpc::ResourceQuota on the
//   server (ServerBuilder::SetResourceQuota; Debian 12's gRPC 1.51 has it
//   for the C++ server). Every connection's memory is allocated from it; as its use
//   nears the quota gRPC shrinks the HTTP/2 flow-control windows it offers
//   (peers must wait before sending more), reclaims idle connections'
//   buffers and, under high pressure, drops new connection attempts
//   ("Dropped ... new connection attempts due to high memory pressure").
//   It is a soft bound (gRPC converges to it; a message already admitted
//   is not taken back), which the stated ceiling (Note [Memory ceiling] in
//   node/daemon/reporting/memory_ceiling.h) counts whole.
// * Its thread limit (SetMaxThreads) bounds the threads the synchronous
//   services (state transfer, evidence, relay, manifest) start for
//   concurrent calls; a call beyond it waits for a thread.

// Note [Stream window]
// * The receive window of a new stream is what a peer may send before the
//   service reads: a stranger's stream that is refused at its opening, or
//   held (Note [Refusal hold] in common/peer_quota.h), still takes in bytes
//   until it ends. With gRPC's bandwidth probe the window grows to MBs.
// * Turning the probe off does not serve us: a reading service then gets
//   about one message (a chunk, at most 1 MiB) of window per round trip,
//   and BM_GrpcThroughputOverRtt (transport_benchmark.cc, through a
//   DelayProxy) measured one stream at about a twelfth of the probed
//   throughput on a 100 ms round trip; peers across continents are the
//   point of the swarm. Nor does it stop the bytes of held streams (they
//   took as much with the probe off), and cancelling refused streams at
//   once only helps with a small window (the peer reopens at once, and
//   each new stream again carries a window's worth).
// * So the probe stays on (`bandwidth_probe`), the window large; what
//   bounds a stranger's bytes is how often it may open a stream (Note
//   [Stream opens] in common/peer_quota.h). Figures:
//   tests/adversarial/README.md.


class NodeServer {
 public:
  explicit NodeServer(NodeServerOptions options);
  // Shutdown with no grace.
  ~NodeServer();
  NodeServer(const NodeServer&) = delete;
  NodeServer& operator=(const NodeServer&) = delete;

  // Where services register. REQUIRES: Start not called yet.
  grpc::ServerBuilder* builder() { return &builder_; }
  // Binds and starts serving with the node's TLS credentials (or
  // PeerCredentials::Insecure()). Unavailable (naming the address and the
  // flag) when the port is taken or the host is not one of ours.
  absl::Status Start(std::shared_ptr<const identity::PeerCredentials> credentials);
  // The bound port (0 before Start).
  int port() const { return port_; }
  const std::string& listen_address() const { return options_.listen_address; }
  // The gRPC health service's overall status (a paused or diverged node
  // reports NOT_SERVING).
  void SetServing(bool serving);
  // The quota gRPC allocates from (null without grpc_memory_quota_bytes).
  const grpc::ResourceQuota* resource_quota() const { return resource_quota_.get(); }
  // Cancels calls still running after `grace`, waits for their handlers.
  // Idempotent.
  void Shutdown(absl::Duration grace);

 private:
  const NodeServerOptions options_;
  std::unique_ptr<grpc::ResourceQuota> resource_quota_;
  grpc::ServerBuilder builder_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  absl::Mutex shutdown_mu_;
  bool shut_down_ ABSL_GUARDED_BY(shutdown_mu_) = false;
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRANSPORT_NODE_SERVER_H_
