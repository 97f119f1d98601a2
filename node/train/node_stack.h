// NodeStack: the recipe that puts a node's training classes together, for
// the daemons (TrainingStack, node/daemon/stack/training_stack.h, maps
// their options onto NodeStackOptions) and the harnesses that run them: the
// in-process TestSwarm (test_swarm.h) and the simulator's real-node backend
// (sim/node_swarm.h).
// It builds the StageServer and attaches it to the transport; on a data
// node (one that hosts stage 0) the DataNodeDriver over the given planner,
// as the server's origin listener; and the NodeTrainer over both. What the
// harnesses differ in (transport and its wrappers, view, computes, planner,
// repairer, group communication, data) comes in as inputs. No libtorch.
//
//   NodeStackInputs in;
//   in.transport = transport.get(); in.clock = clock; in.routing = view;
//   in.group = hub; in.stages = {{0, compute.get()}}; in.data = &data;
//   in.planner = std::make_unique<InOrderPlanner>();
//   NodeStackOptions o;
//   o.server.memory_slots = 4; o.driver.mbs_per_iteration = 8;
//   std::unique_ptr<NodeStack> stack = NodeStack::Create(o, std::move(in));
//   stack->trainer()->Run(first, count, on_report, on_done);
//
// Ownership: everything in NodeStackInputs is borrowed and must outlive the
// stack, except the planner and the origin tap, which the stack owns.
// Destruction detaches the server from the transport first (no more frames
// reach it), then clears its origin listener, then the trainer, tap,
// driver, planner and server go, in that order (each borrows the ones
// after it).
//
// Thread rule: Create and destruction on one thread, never from inside the
// trainer's iteration callback. Destruction while the trainer is mid-run
// waits for an iteration callback in progress and makes later ones no-ops
// (node_trainer.h); the accessors' objects have their own rules.
#ifndef SKIPSWARM_NODE_TRAIN_NODE_STACK_H_
#define SKIPSWARM_NODE_TRAIN_NODE_STACK_H_

#include <functional>
#include <map>
#include <memory>

#include "common/clock.h"
#include "node/compute/stage_compute.h"
#include "node/stage/route_repair.h"
#include "node/stage/stage_server.h"
#include "node/stage/swarm_view.h"
#include "node/train/data_node_driver.h"
#include "node/train/data_source.h"
#include "node/train/group_comm.h"
#include "node/train/node_trainer.h"
#include "node/train/route_planner.h"
#include "node/transport/transport.h"

namespace skipswarm::node {

// The narrow options of the recipe: the server's and, on a data node, the
// driver's. `server.repairer` is ignored (NodeStackInputs::repairer).
struct NodeStackOptions {
  StageServerOptions server;
  DriverOptions driver;
};

// What the caller chooses; all required unless marked otherwise.
struct NodeStackInputs {
  Transport* transport = nullptr;  // pipeline frames; the server attaches to it
  common::Clock* clock = nullptr;
  SwarmView* routing = nullptr;    // whom the server and the driver route through
  GroupComm* group = nullptr;      // barrier and replica averaging
  // Optional: in-flight re-routes (null: the server's ReplicaRouteRepairer).
  RouteRepairer* repairer = nullptr;
  std::map<int, StageCompute*> stages;  // hosted, by stage; stage 0: a data node
  // Optional: stages the server also serves but the trainer does not train
  // (SDP's frozen copies, Note [SDP frozen stages] in sdp_shadows.h).
  std::map<int, StageCompute*> frozen;
  // Data node only (required there, else unused): where MBs come from and
  // who plans their routes (owned by the stack).
  const DataSource* data = nullptr;
  std::unique_ptr<RoutePlanner> planner;
  // Optional, data node: wraps the driver as the server's origin listener
  // (the simulator watches MBs end on the way); owned by the stack.
  std::function<std::unique_ptr<OriginListener>(OriginListener* driver)> origin_tap;
};

class NodeStack {
 public:
  // REQUIRES: a planner and data when `in.stages` has stage 0.
  static std::unique_ptr<NodeStack> Create(const NodeStackOptions& o, NodeStackInputs in);
  ~NodeStack();
  NodeStack(const NodeStack&) = delete;
  NodeStack& operator=(const NodeStack&) = delete;

  StageServer* server() const { return server_.get(); }
  RoutePlanner* planner() const { return planner_.get(); }  // null on a relay
  DataNodeDriver* driver() const { return driver_.get(); }  // null on a relay
  NodeTrainer* trainer() const { return trainer_.get(); }

 private:
  NodeStack() = default;

  // Declaration order is destruction order reversed (see the file comment).
  std::unique_ptr<StageServer> server_;
  std::unique_ptr<RoutePlanner> planner_;
  std::unique_ptr<DataNodeDriver> driver_;
  std::unique_ptr<OriginListener> tap_;
  std::unique_ptr<NodeTrainer> trainer_;
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRAIN_NODE_STACK_H_
