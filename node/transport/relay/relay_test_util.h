// Test helpers for relayed connections on loopback (testonly): the nodes
// that relay_test and relay_benchmark both build, with ports picked by the
// kernel and the seeded test identities.
//
//   RelayEnds ends(clock, [](const PeerId&, Frame, AckFn ack) { ack(absl::OkStatus()); });
//   TestRelay r('r', clock);
//   ends.Attach([c = r.candidate()] { return std::vector<RelayCandidate>{c}; }, 1, on_change);
//   ends.DialThrough([c = r.candidate()](const common::NodeId&) { ... });
//   ends.p->Send(ends.n_key->id(), frame, done);
//
// Thread rule: built, used and destroyed on the test's thread; the
// callbacks given run on the transports' and relay clients' threads.
#ifndef SKIPSWARM_NODE_TRANSPORT_RELAY_RELAY_TEST_UTIL_H_
#define SKIPSWARM_NODE_TRANSPORT_RELAY_RELAY_TEST_UTIL_H_

#include <memory>

#include "common/clock.h"
#include "identity/identity.h"
#include "identity/tls_credentials.h"
#include "node/transport/grpc_transport.h"
#include "node/transport/node_server.h"
#include "node/transport/relay/relay.grpc.pb.h"
#include "node/transport/relay/relay_client.h"
#include "node/transport/relay/relay_service.h"
#include "node/transport/transport.h"

namespace skipswarm::node::testutil {

// A reachable node that relays: a NodeServer with the relay service, keyed
// TestIdentity(seed). `clock` must outlive it. `options` carries the
// relay's tuning (quota, pacing clock, bounds); its identity, credentials
// and swarm are set here.
struct TestRelay {
  TestRelay(char seed, common::Clock* clock, RelayServiceOptions options = RelayServiceOptions());
  ~TestRelay();  // the server goes before the service it calls
  TestRelay(const TestRelay&) = delete;
  TestRelay& operator=(const TestRelay&) = delete;

  RelayCandidate candidate() const;
  // Shuts the service and the server down (idempotent).
  void Kill();

  std::unique_ptr<identity::Identity> key;
  std::unique_ptr<NodeServer> server;
  std::unique_ptr<RelayService> service;
};

// One node's own client of the relay `relay` (id `relay_id`), keyed
// TestIdentity(seed): for tests that drive the relay's streams by hand
// (Attach, Connect, Accept). `clock` gives the certificate's start.
struct RelayParty {
  RelayParty(char seed, common::Clock* clock, const RelayCandidate& relay,
             const common::NodeId& relay_id);
  // The first message of a Connect or Accept: the protocol and this id.
  proto::RelayBytes Opening() const;
  // An Attach request for this id in swarm kTestSwarm.
  proto::RelayAttachRequest AttachRequest() const;

  std::unique_ptr<identity::Identity> key;
  std::shared_ptr<const identity::PeerCredentials> creds;
  std::unique_ptr<proto::Relay::Stub> stub;
};

// A circuit message of `bytes` data bytes.
proto::RelayBytes RelayData(size_t bytes);

// N, a node that only dials out: a pipeline transport on its own NodeServer
// (nobody is told its address), its frames going to `n_handler`; and P, a
// sender with a send-only transport. Keys TestIdentity('n') and ('p').
// Attach and DialThrough add the relay legs, DialDirect the direct one.
// `clock` must outlive it, and so must whatever the callbacks given to
// Attach and DialThrough use.
struct RelayEnds {
  // `p_options` carries P's tuning (back-off); its identity, credentials,
  // swarm and listen address are set here.
  RelayEnds(common::Clock* clock, FrameHandler n_handler,
            GrpcTransportOptions p_options = GrpcTransportOptions());
  ~RelayEnds();  // P's dialer, P, N's attacher, N's server, N: in that order
  RelayEnds(const RelayEnds&) = delete;
  RelayEnds& operator=(const RelayEnds&) = delete;

  // N attaches to `relays` of `candidates` (replacing any attacher), and
  // reports each change to `changed`.
  void Attach(RelayAttacher::Candidates candidates, int relays, RelayAttacher::Changed changed);
  // P reaches N through its own RelayDialer (replacing any), which asks
  // `relays_of` for N's relays.
  void DialThrough(RelayDialer::RelaysOf relays_of);
  // P dials N's server directly.
  void DialDirect();

  common::Clock* const clock;
  std::unique_ptr<identity::Identity> n_key, p_key;
  std::shared_ptr<const identity::PeerCredentials> n_creds, p_creds;
  std::unique_ptr<NodeServer> n_server;
  std::unique_ptr<GrpcTransport> n, p;
  std::unique_ptr<RelayAttacher> attacher;
  std::unique_ptr<RelayDialer> dialer;
};

}  // namespace skipswarm::node::testutil

#endif  // SKIPSWARM_NODE_TRANSPORT_RELAY_RELAY_TEST_UTIL_H_
