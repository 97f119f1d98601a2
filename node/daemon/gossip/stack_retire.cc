#include "node/daemon/gossip/stack_retire.h"

#include <utility>

namespace skipswarm::node {

void RetireStack(std::unique_ptr<TrainingStack> old) {
  if (old == nullptr) return;
  // Detached first: a frame admitted after the release would be dropped
  // unreported by the destruction. The release needs no handler (its
  // notices are sends); the destructor's own Detach is then a no-op.
  old->server()->Detach();
  old->server()->ReleaseAll();
  old.reset();  // waits out a trainer callback in progress (training_stack.h)
}

}  // namespace skipswarm::node
