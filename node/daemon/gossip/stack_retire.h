// RetireStack: how the gossip daemon ends a TrainingStack that no stack
// replaces yet (a re-entry, a move ahead, a stage move, a stop: Note
// [Stack hand-over] in gossip_daemon_parts.h).
#ifndef SKIPSWARM_NODE_DAEMON_GOSSIP_STACK_RETIRE_H_
#define SKIPSWARM_NODE_DAEMON_GOSSIP_STACK_RETIRE_H_

#include <memory>

#include "node/daemon/stack/training_stack.h"

namespace skipswarm::node {

// Detaches `old`'s server (later frames are refused, so their senders
// re-route), releases every micro-batch visit it holds (each origin hears
// of the drop at once instead of at its MB deadline; Note [Relay drops] in
// node/stage/stage_server.cc), then destroys the stack. Call it before a
// new stack is built over the same computes: the release discards the
// visits' state in them by the old server's local ids, which a new server
// reuses. Null: nothing. The daemon's main thread only, as TrainingStack's
// destruction.
void RetireStack(std::unique_ptr<TrainingStack> old);

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_GOSSIP_STACK_RETIRE_H_
