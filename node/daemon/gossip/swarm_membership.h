// SwarmMembership: the daemon's gossip side (membership/ wired for a real
// `skipswarm node`): its Identity (key file, or an in-memory key with
// --insecure), a GrpcGossipServer, the GrpcGossipTransport and the
// Membership, advertising the daemon's endpoints (Note [Daemon records] in
// training_members.h), plus the blocking steps main needs: join the
// bootstrap addresses (failures name the step: dns, tcp, tls, identity,
// version, swarm, admission, timeout, with a hint), announce, leave.
//
//   SwarmMembershipOptions o = ...;                 // from flags
//   o.serve_on = node_server.builder();
//   SS_ASSIGN_OR_RETURN(auto gossip, SwarmMembership::Start(o, clock));
//   ...node_server.Start()...
//   SS_RETURN_IF_ERROR(gossip->CreateMembership(endpoints));
//   gossip->membership()->AddListener(...);         // REQUIRES: before Join
//   SS_RETURN_IF_ERROR(gossip->Join());             // no-op for a first node
//   ...
//   gossip->Leave();                                // announces LEFT
//
// Thread rule: Start/Join/Announce/Leave block their caller (main's
// thread); membership() is thread-safe. Destroy after everything that
// listens to the membership.
#ifndef SKIPSWARM_NODE_DAEMON_GOSSIP_SWARM_MEMBERSHIP_H_
#define SKIPSWARM_NODE_DAEMON_GOSSIP_SWARM_MEMBERSHIP_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "common/peer_quota.h"
#include "membership/membership.h"
#include "node/daemon/gossip/training_members.h"

namespace grpc {
class ServerBuilder;
class Service;
}  // namespace grpc

namespace skipswarm::membership {
class GrpcGossipServer;
class GrpcGossipTransport;
}  // namespace skipswarm::membership

namespace skipswarm::node {

struct SwarmMembershipOptions {
  std::string key_file;       // empty: an in-memory key (only with insecure)
  // A missing key_file is an error (a typo would silently make a new node
  // identity) unless this asks to create it.
  bool create_key = false;
  bool insecure = false;      // plain-text gossip, local tests only
  std::string swarm_name = "skipswarm";
  std::string swarm_secret;   // private swarm (membership/record.h)
  // Required: the daemon's one server (node/transport/node_server.h), on
  // which Start registers GossipService; shut it down before destroying
  // this.
  grpc::ServerBuilder* serve_on = nullptr;
  std::vector<std::string> join;            // bootstrap "host:port"s; empty: new swarm
  absl::Duration join_timeout = absl::Seconds(30);
  uint64_t seed = 1;
  uint32_t memory_slots = 4;  // a GossipDaemon sets it from its NodeDaemonOptions
  // The model this node trains (model::ModelConfig::ConfigHash) and its
  // stage count: records of another model, or naming a stage outside it,
  // are refused (membership/record.h), so planners never see them. Empty /
  // 0: unchecked (tests).
  std::string model_id;
  uint32_t num_stages = 0;
  // How replicas average (model::AveragingIdentity): records that average
  // otherwise are refused likewise. Empty: unchecked (tests).
  std::string averaging_id;
  // The swarm manifest says frames are signed: records that do not sign
  // are refused likewise (Note [Checkable evidence], "Signed swarms").
  bool sign_frames = false;
  // Who may be a member, from the swarm manifest, and this node's own
  // invite (Note [Admission] in membership/admission.h). Default: open.
  membership::AdmissionPolicy admission;
  proto::SignedInvite invite;
  // Where the search for this key's join work starts: the nonce the
  // manifest step already solved (Note [Manifest joiners] in
  // manifest/manifest_service.h), so it costs one hash here; 0: none.
  uint64_t join_work_first = 0;
  // The founder's revocation list file (`skipswarm revoke`, Note
  // [Revocation] in membership/revocation.h): loaded by CreateMembership (a
  // missing file is an empty list; one that does not verify is an error)
  // and re-read every revocations_poll; a newer list it holds then is
  // applied and gossiped. Empty: none.
  std::string revocations_file;
  absl::Duration revocations_poll = absl::Seconds(5);
  // Timers (defaults: membership.h); a daemon holds repeated refusals
  // (Note [Refusal hold] in common/peer_quota.h).
  membership::MembershipOptions tuning = [] {
    membership::MembershipOptions o;
    o.quota_max_hold = common::kDaemonMaxHold;
    return o;
  }();
  // More services for the gossip server (the swarm manifest's,
  // manifest/manifest_service.h). Borrowed: they must outlive this.
  std::vector<grpc::Service*> extra_services;
};

class SwarmMembership {
 public:
  // Loads (or makes) the identity and registers the gossip service; the
  // Membership comes with CreateMembership once the daemon's server is
  // bound and its advertised address known. `clock` must outlive this.
  static absl::StatusOr<std::unique_ptr<SwarmMembership>> Start(
      const SwarmMembershipOptions& options, common::Clock* clock);
  // `endpoints`: our advertised addresses (with one port, all the same).
  absl::Status CreateMembership(DaemonEndpoints endpoints);
  ~SwarmMembership();

  membership::Membership* membership() { return membership_.get(); }
  const common::NodeId& id() const;
  const std::string& swarm_id() const { return swarm_id_; }
  // Our key (for the other services' mutual TLS). Lives as long as this.
  const identity::Identity* identity() const { return identity_.get(); }
  bool insecure() const { return options_.insecure; }
  // Thread-safe.
  DaemonEndpoints endpoints() const;
  // Note [Advertise auto] (advertise_auto.h): every endpoint becomes
  // `address`; our record is re-signed with it and gossiped.
  // REQUIRES: CreateMembership done. Thread-safe.
  absl::Status Readvertise(const std::string& address);

  // REQUIRES: CreateMembership done.
  // Starts the protocol and joins the bootstrap addresses. The error names
  // every address with the step that failed and a hint. `cancelled`, when
  // set, is polled while the bootstrap is waited for: true ends the wait
  // with CANCELLED (a stop signal during start-up).
  absl::Status Join(std::function<bool()> cancelled = nullptr);
  // Announce (membership.h); returns how many of the live members answered.
  absl::StatusOr<int> Announce(absl::Duration timeout);
  // Signs LEFT, with `exit_iteration` (the last iteration this node
  // trains in, Note [Leaving]) as the record's iteration, and tells a few
  // members; returns once they answered or `timeout` passed, and the
  // outbound-only members were answered since (at most the tuning's
  // leave_linger more). Only the first call counts.
  void Leave(absl::Duration timeout, uint64_t exit_iteration);

 private:
  class Forwarder;
  struct RevocationsPoll;
  SwarmMembership() = default;
  // Re-reads options_.revocations_file now and every revocations_poll.
  static void PollRevocations(std::weak_ptr<RevocationsPoll> weak);

  SwarmMembershipOptions options_;
  common::Clock* clock_ = nullptr;
  std::string swarm_id_;
  mutable absl::Mutex endpoints_mu_;
  DaemonEndpoints endpoints_ ABSL_GUARDED_BY(endpoints_mu_);
  std::unique_ptr<identity::Identity> identity_;
  std::unique_ptr<Forwarder> forwarder_;
  std::unique_ptr<membership::GrpcGossipTransport> transport_;
  std::unique_ptr<membership::GrpcGossipServer> server_;
  std::unique_ptr<membership::Membership> membership_;
  std::shared_ptr<RevocationsPoll> revocations_poll_;
  std::atomic<bool> left_{false};
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_GOSSIP_SWARM_MEMBERSHIP_H_
