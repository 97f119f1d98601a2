// The reachability check at join: can other nodes open a connection to the
// address this node advertises? A node behind NAT (a home router without a
// port forward) can dial out but cannot be dialed, so everything a peer
// would send on a connection of its own (pipeline frames, gradient pushes,
// gossip probes) fails there.
//
// Every node serves ReachabilityService on its one port. A node asks two or
// more live peers to DialBack its advertised address: each opens a new
// connection (no shared subchannel) and calls Identify there, which must
// answer with the asker's id (with TLS the handshake itself must prove it).
// The verdict (Judge): reachable if any peer got through; behind NAT if
// every answering peer failed; unknown if no peer answered.
//
//   ReachabilityServiceOptions so{self, credentials, swarm_id};
//   ReachabilityService service(so);
//   builder->RegisterService(&service);          // the daemon's NodeServer
//   ...
//   ReachabilityReport r = CheckReachability({peer_a, peer_b}, ask_options);
//   std::cout << DescribeReachability(r) << "\n";  // "reachable at ..."
//
// A dial-back makes this node connect where a peer says: the service dials
// only for an authenticated caller (TLS), one address per call, with a
// short deadline and at most kMaxConcurrentDials at once
// (RESOURCE_EXHAUSTED beyond).
//
// Thread rule: the service is thread-safe (gRPC's threads); CheckReachability
// blocks its caller for at most options.timeout.
#ifndef SKIPSWARM_NODE_DAEMON_GOSSIP_REACHABILITY_H_
#define SKIPSWARM_NODE_DAEMON_GOSSIP_REACHABILITY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/node_id.h"
#include "identity/tls_credentials.h"
#include "node/daemon/gossip/reachability.grpc.pb.h"

namespace skipswarm::node {

struct ReachabilityOptions {
  common::NodeId self;
  // TLS from the node's key, or PeerCredentials::Insecure() (--insecure).
  std::shared_ptr<const identity::PeerCredentials> credentials;
  std::string swarm_id;  // empty: any (tests)
  // A dial-back's deadline (connect + handshake + Identify).
  absl::Duration dial_timeout = absl::Seconds(3);
};

class ReachabilityService final : public proto::Reachability::Service {
 public:
  static constexpr int kMaxConcurrentDials = 4;
  explicit ReachabilityService(ReachabilityOptions options);

  grpc::Status DialBack(grpc::ServerContext* context, const proto::DialBackRequest* request,
                        proto::DialBackResponse* response) override;
  grpc::Status Identify(grpc::ServerContext* context, const proto::IdentifyRequest* request,
                        proto::IdentifyResponse* response) override;
  // Answers anyone (it dials nothing, and tells a caller only its own
  // address).
  grpc::Status Observe(grpc::ServerContext* context, const proto::ObserveRequest* request,
                       proto::ObserveResponse* response) override;

 private:
  const ReachabilityOptions options_;
  absl::Mutex mu_;
  int dialing_ ABSL_GUARDED_BY(mu_) = 0;
};

// One peer's answer.
struct DialBackAnswer {
  std::string peer;       // the peer's address
  bool answered = false;  // the peer answered the request at all
  bool reached = false;   // ... and got through to us
  std::string detail;     // why not
  std::string observed_address;  // where the peer saw us come from
};

struct ReachabilityReport {
  enum class Verdict { kUnknown, kReachable, kBehindNat };
  Verdict verdict = Verdict::kUnknown;
  std::string advertised;
  std::vector<DialBackAnswer> answers;
  int answered() const;
  int reached() const;
};

// The verdict from the answers (see the file comment).
ReachabilityReport::Verdict Judge(const std::vector<DialBackAnswer>& answers);

// Asks every peer in `peers` ("host:port", concurrently) to dial back
// `options.self` at `advertised`; returns within `timeout`.
ReachabilityReport CheckReachability(const std::vector<std::string>& peers,
                                     const std::string& advertised,
                                     const ReachabilityOptions& options, absl::Duration timeout);

// The one line a node prints: "reachable at X (...)", "behind NAT:
// outbound-only mode (...)" or "reachability unknown (...)".
std::string DescribeReachability(const ReachabilityReport& report);

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_GOSSIP_REACHABILITY_H_
