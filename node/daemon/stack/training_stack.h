// TrainingStack: what trains a node's hosted stages, over pieces its
// daemon owns: node/'s one recipe (NodeStack, node/train/node_stack.h: the
// StageServer attached to the transport, on a data node the DataNodeDriver
// as the server's origin listener, the NodeTrainer) with the daemon's
// options mapped onto its narrow ones and, on a data node, the daemon's
// planner (CreateDataNodePlanner). Shared by both daemons (NodeDaemon over a static --swarm list,
// GossipDaemon over gossip, which builds a new stack after a stage move),
// so a new serving or driving input is wired once.
//
//   TrainingStackInputs in;
//   in.transport = transport.get(); in.clock = clock; in.routing = view;
//   in.group = group.get(); in.repairer = repairer.get();
//   in.stages = BorrowComputes(computes); in.data = data.get();
//   in.swarm_id = options.swarm_id;
//   SS_ASSIGN_OR_RETURN(auto stack, TrainingStack::Create(options, in));
//   stack->trainer()->Run(...);
//
// What the daemons differ in stays with them and comes in as an input:
// the transport (gossip's is wrapped in a LinkTimingTransport that feeds
// the link stats), the routing view (a StaticSwarmView; gossip's
// TrainingMembers::routing()), the swarm id (a flag; gossip's), the
// computes (gossip's behind FirstWorkProbes) and the node names a routes
// file needs (static lists only).
//
// Ownership: everything in TrainingStackInputs is borrowed and must
// outlive the stack. Destruction is NodeStack's (detach first, then the
// trainer, driver, planner and server), then the SDP shadows.
//
// Thread rule: Create and destruction on the daemon's main thread, never
// from inside the trainer's iteration callback. Destruction while the
// trainer is mid-run (a drain that timed out) waits for an iteration
// callback in progress and makes later ones no-ops (node_trainer.h); the
// accessors' objects have their own rules.
#ifndef SKIPSWARM_NODE_DAEMON_STACK_TRAINING_STACK_H_
#define SKIPSWARM_NODE_DAEMON_STACK_TRAINING_STACK_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "identity/identity.h"
#include "node/compute/stage_compute.h"
#include "node/daemon/stack/node_daemon_options.h"
#include "node/stage/route_repair.h"
#include "node/stage/stage_server.h"
#include "node/stage/swarm_view.h"
#include "node/train/data_node_driver.h"
#include "node/train/data_source.h"
#include "node/train/group_comm.h"
#include "node/train/node_stack.h"
#include "node/train/node_trainer.h"
#include "node/train/route_planner.h"
#include "node/train/sdp_shadows.h"
#include "node/train/silent_deadline.h"
#include "node/transport/transport.h"

namespace skipswarm::node {

// Borrowed (see the file comment); all required unless marked otherwise.
struct TrainingStackInputs {
  Transport* transport = nullptr;  // pipeline frames; the server attaches to it
  common::Clock* clock = nullptr;
  SwarmView* routing = nullptr;    // whom the server and the driver route through
  GroupComm* group = nullptr;      // barrier and replica averaging
  // In-flight re-routes. Borrowed, not built here: GossipDaemon keeps one
  // across the stacks of its stage moves.
  RouteRepairer* repairer = nullptr;
  std::map<int, StageCompute*> stages;  // hosted, by stage; stage 0: a data node
  // SDP backward masking: frozen copies of the stages not hosted, served
  // to this node's own routes only, refreshed before every iteration by
  // the stack's SdpShadowStages (Note [SDP frozen stages]). Optional.
  std::map<int, StageCompute*> frozen;
  const DataSource* data = nullptr;     // required on a data node, else unused
  std::string swarm_id;
  // Node names for a routes file (CreateDataNodePlanner); empty with gossip.
  std::map<std::string, PeerId> names;
  // Optional: told when a data node's training pauses and resumes
  // (DriverOptions::on_pause_change); the daemons set their health.
  std::function<void(const absl::Status&)> on_pause_change;
  // Optional: whether a micro-batch origin is a member on probation (Note
  // [Newcomer micro-batches] in node/stage/stage_server.h); the server then
  // holds at most half its admission for such origins. Thread-safe.
  std::function<bool(const PeerId&)> origin_on_probation;
  // Optional, verified compute (Note [Sending checks] in
  // node/stage/stage_server_verify_send.cc): with `judge` and
  // `member_on_probation` both set, the server keeps the outputs of members
  // on probation, judges sketches against them and tells `on_check_verdict`
  // each verdict (thread-safe; no lock held), and samples its own checks at
  // o.verify_rate. Unset: no output is judged here (checks are still sent
  // at o.verify_rate and answered).
  OutputJudge judge;
  std::function<bool(const PeerId&)> member_on_probation;
  std::function<void(const PeerId& checked, bool match)> on_check_verdict;
  // Optional (Note [Trusted disputes] in node/stage/verify_trust.h): with
  // `judge` and `member_on_probation`, the verdicts on trusted members,
  // each with the replica whose sketch judged it; the server then checks
  // trusted next hops at kTrustedVerifyShare of o.verify_rate.
  std::function<void(const PeerId& checked, const PeerId& verifier, bool match)>
      on_trusted_verdict;
  // Note [Checkable evidence], used only with o.sign_frames: this node's key
  // (borrowed; outlives the stack), the raw public key of a member from its
  // signed record, and whether a member's record says it signs (both
  // thread-safe). With o.sign_frames all three are required; with
  // o.swarm_signs_frames too, `signs_frames` no longer decides (every
  // member must sign).
  const identity::Identity* signer = nullptr;
  std::function<std::optional<std::string>(const PeerId&)> public_key_of;
  std::function<bool(const PeerId&)> signs_frames;
  // Optional, with o.sign_frames (Note [Evidence bans] in
  // node/stage/evidence_bans.h): each producer a refused frame proved
  // signed a false input, whatever its trust (thread-safe; no lock held).
  // Unset: told to `on_check_verdict` as a mismatch.
  std::function<void(const PeerId& producer)> on_false_input;
};

// The share of o.verify_rate at which trusted members are checked.
inline constexpr double kTrustedVerifyShare = 0.25;

class TrainingStack {
 public:
  // Builds and attaches the server; on a data node also the planner
  // (o.planner, o.path_length, ...) and the driver (o.mbs_per_iteration
  // per iteration). allow_skip when o.path_length skips stages. The
  // planner's errors (CreateDataNodePlanner) are returned.
  static absl::StatusOr<std::unique_ptr<TrainingStack>> Create(const NodeDaemonOptions& o,
                                                               const TrainingStackInputs& in);
  ~TrainingStack();
  TrainingStack(const TrainingStack&) = delete;
  TrainingStack& operator=(const TrainingStack&) = delete;

  StageServer* server() const { return stack_->server(); }
  DataNodeDriver* driver() const { return stack_->driver(); }  // null on a relay
  NodeTrainer* trainer() const { return stack_->trainer(); }
  // Null without frozen stages.
  const SdpShadowStages* shadows() const { return shadows_.get(); }

  // The recipe's options for a daemon with options `o` (exposed for tests
  // that build the same node elsewhere).
  static NodeStackOptions StackOptions(const NodeDaemonOptions& o, const std::string& swarm_id);
  // Note [Stated bounds in the daemons] (node/train/grpc_group_sweep.cc):
  // the daemons' GrpcGroupOptions::max_stated_bound, the largest bound an
  // honest data node of this swarm states (MaxHonestIterationBound in
  // node/train/silent_deadline.h) from the driver options above.
  static absl::Duration MaxStatedBound(const NodeDaemonOptions& o);
  // Note [Stated pace] (node/train/silent_deadline.h): the daemons'
  // GrpcGroupOptions::stated_pace, from the same driver options.
  static StatedPaceOptions StatedPace(const NodeDaemonOptions& o);

 private:
  TrainingStack() = default;

  // Declaration order is destruction order reversed: the stack (whose
  // trainer's hook borrows the shadows) goes first.
  std::unique_ptr<SdpShadowStages> shadows_;
  std::unique_ptr<NodeStack> stack_;
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_STACK_TRAINING_STACK_H_
