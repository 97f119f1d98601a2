#include "node/train/node_stack.h"

#include <glog/logging.h>

#include <utility>

namespace skipswarm::node {

std::unique_ptr<NodeStack> NodeStack::Create(const NodeStackOptions& o, NodeStackInputs in) {
  std::unique_ptr<NodeStack> stack(new NodeStack());
  StageServerOptions so = o.server;
  so.repairer = in.repairer;
  std::map<int, StageCompute*> served = in.stages;
  served.insert(in.frozen.begin(), in.frozen.end());
  stack->server_ =
      std::make_unique<StageServer>(in.transport, in.clock, in.routing, served, so);
  stack->server_->Attach();
  if (in.stages.count(0) > 0) {
    CHECK(in.planner != nullptr) << "a data node needs a planner";
    stack->planner_ = std::move(in.planner);
    stack->driver_ = std::make_unique<DataNodeDriver>(stack->server_.get(), in.clock, in.routing,
                                                      stack->planner_.get(), in.data, o.driver);
    OriginListener* listener = stack->driver_.get();
    if (in.origin_tap) {
      stack->tap_ = in.origin_tap(stack->driver_.get());
      listener = stack->tap_.get();
    }
    stack->server_->SetOriginListener(listener);
  }
  stack->trainer_ = std::make_unique<NodeTrainer>(stack->server_.get(), in.stages,
                                                  stack->driver_.get(), in.group, in.clock);
  return stack;
}

NodeStack::~NodeStack() {
  if (server_) {
    server_->Detach();
    // Waits for a driver call in progress on a compute thread: the driver
    // goes before the server.
    if (driver_) server_->SetOriginListener(nullptr);
  }
}

}  // namespace skipswarm::node
