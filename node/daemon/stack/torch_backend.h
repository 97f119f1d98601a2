// TorchNodeBackend: the daemons' libtorch maths (node_backend.h), what
// `skipswarm node` passes to NodeDaemon::Create / GossipDaemon::Create.
//
//   SS_ASSIGN_OR_RETURN(auto daemon, GossipDaemon::Create(o, TorchNodeBackend()));
//
// prepare: model::ApplyRuntimeOptions. create_compute: CreateStageCompute
// (stage_computes.h; a TimedStageCompute under --wan timed compute, else a
// TorchStageCompute). create_data: CreateDataNodeData
// (data_source_factory.h), the source owning its corpus.
//
// Thread rule: the returned functions are pure (they read the corpus and
// tokenizer files) and may be called from any thread.
#ifndef SKIPSWARM_NODE_DAEMON_STACK_TORCH_BACKEND_H_
#define SKIPSWARM_NODE_DAEMON_STACK_TORCH_BACKEND_H_

#include "node/daemon/stack/node_backend.h"

namespace skipswarm::node {

NodeBackend TorchNodeBackend();

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_STACK_TORCH_BACKEND_H_
