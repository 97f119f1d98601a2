#include "node/transport/relay/relay_test_util.h"

#include <string>
#include <utility>

#include "absl/time/time.h"
#include "glog/logging.h"
#include "identity/test_identity.h"
#include "node/transport/test_util.h"
#include "proto/version.h"

namespace skipswarm::node::testutil {
namespace {

std::string Loopback(int port) { return "127.0.0.1:" + std::to_string(port); }

}  // namespace

RelayParty::RelayParty(char seed, common::Clock* clock, const RelayCandidate& relay,
                       const common::NodeId& relay_id)
    : key(identity::TestIdentity(seed)),
      creds(identity::PeerCredentials::Create({key.get()}, clock->Now()).value()) {
  grpc::ChannelArguments args;
  creds->ConfigureChannel(args);
  stub = proto::Relay::NewStub(
      grpc::CreateCustomChannel(relay.address, creds->ForChannel(relay_id), args));
}

proto::RelayBytes RelayParty::Opening() const {
  proto::RelayBytes m;
  m.set_protocol_version(proto::kProtocolVersion);
  m.set_node_id(key->id().Bytes());
  return m;
}

proto::RelayAttachRequest RelayParty::AttachRequest() const {
  proto::RelayAttachRequest attach;
  attach.set_protocol_version(proto::kProtocolVersion);
  attach.set_swarm_id(kTestSwarm);
  attach.set_node_id(key->id().Bytes());
  return attach;
}

proto::RelayBytes RelayData(size_t bytes) {
  proto::RelayBytes m;
  m.set_data(std::string(bytes, 'x'));
  return m;
}

TestRelay::TestRelay(char seed, common::Clock* clock, RelayServiceOptions ro)
    : key(identity::TestIdentity(seed)) {
  auto creds = identity::PeerCredentials::Create({key.get()}, clock->Now()).value();
  server = std::make_unique<NodeServer>(NodeServerOptions{"127.0.0.1:0"});
  ro.self = key->id();
  ro.credentials = creds;
  ro.swarm_id = kTestSwarm;
  service = std::make_unique<RelayService>(ro);
  server->builder()->RegisterService(service.get());
  CHECK(server->Start(creds).ok());
}

TestRelay::~TestRelay() {
  Kill();
  server.reset();
}

RelayCandidate TestRelay::candidate() const { return {key->id(), Loopback(server->port())}; }

void TestRelay::Kill() {
  service->Shutdown();
  server->Shutdown(absl::ZeroDuration());
}

RelayEnds::RelayEnds(common::Clock* clock, FrameHandler n_handler,
                     GrpcTransportOptions p_options)
    : clock(clock),
      n_key(identity::TestIdentity('n')),
      p_key(identity::TestIdentity('p')),
      n_creds(identity::PeerCredentials::Create({n_key.get()}, clock->Now()).value()),
      p_creds(identity::PeerCredentials::Create({p_key.get()}, clock->Now()).value()) {
  n_server = std::make_unique<NodeServer>(NodeServerOptions{"127.0.0.1:0"});
  GrpcTransportOptions no;
  no.self = n_key->id();
  no.credentials = n_creds;
  no.swarm_id = kTestSwarm;
  no.serve_on = n_server->builder();
  n = GrpcTransport::Create(no, clock).value();
  CHECK(n_server->Start(n_creds).ok());
  n->SetFrameHandler(std::move(n_handler));
  p_options.self = p_key->id();
  p_options.credentials = p_creds;
  p_options.swarm_id = kTestSwarm;
  p_options.listen_address = "";
  p = GrpcTransport::Create(p_options, clock).value();
}

RelayEnds::~RelayEnds() {
  dialer.reset();
  p.reset();
  attacher.reset();
  n_server->Shutdown(absl::ZeroDuration());
  n_server.reset();
  n.reset();
}

void RelayEnds::Attach(RelayAttacher::Candidates candidates, int relays,
                       RelayAttacher::Changed changed) {
  RelayAttacherOptions ao;
  ao.self = n_key->id();
  ao.credentials = n_creds;
  ao.swarm_id = kTestSwarm;
  ao.local_address = Loopback(n_server->port());
  ao.relays = relays;
  attacher = std::make_unique<RelayAttacher>(ao, clock, std::move(candidates), std::move(changed));
}

void RelayEnds::DialThrough(RelayDialer::RelaysOf relays_of) {
  dialer = std::make_unique<RelayDialer>(RelayDialerOptions{p_key->id(), p_creds},
                                         std::move(relays_of));
  p->SetPeerAddress(n_key->id(), dialer->EndpointFor(n_key->id()).value());
}

void RelayEnds::DialDirect() { p->SetPeerAddress(n_key->id(), Loopback(n_server->port())); }

}  // namespace skipswarm::node::testutil
