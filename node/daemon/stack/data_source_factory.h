// The data node's micro-batches, built from the daemon's options: the one
// recipe of both daemons (NodeDaemon, GossipDaemon).
//
//   SS_ASSIGN_OR_RETURN(DataNodeData data, CreateDataNodeData(options));
//   DataNodeDriver driver(..., data.source.get(), ...);
//
// What it builds:
//   wan.timed_forward_s > 0 -> SyntheticDataSource (timed compute reads no
//                              corpus; vocabulary 256)
//   otherwise               -> the --tokenizer, the vocabulary check, the
//                              corpus (model.corpus) and a SamplerDataSource
//                              over its training split (model.seed)
//
// Thread rule: CreateDataNodeData is a pure function (it reads the corpus
// and tokenizer files); the source is thread-safe.
#ifndef SKIPSWARM_NODE_DAEMON_STACK_DATA_SOURCE_FACTORY_H_
#define SKIPSWARM_NODE_DAEMON_STACK_DATA_SOURCE_FACTORY_H_

#include <memory>

#include "absl/status/statusor.h"
#include "model/corpus.h"
#include "node/daemon/stack/node_daemon_options.h"
#include "node/train/data_source.h"

namespace skipswarm::node {

// A data source and what it borrows. The sampler borrows the corpus's
// token stream, so `source` is declared after `corpus` (it goes first) and
// the corpus sits behind a pointer (moving this struct moves neither).
struct DataNodeData {
  std::unique_ptr<model::Corpus> corpus;  // null for synthetic data
  std::unique_ptr<DataSource> source;
};

// See the file comment. InvalidArgument when --vocab is smaller than the
// tokenizer's vocabulary; the tokenizer's, corpus's and sampler's errors
// otherwise.
absl::StatusOr<DataNodeData> CreateDataNodeData(const NodeDaemonOptions& o);

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_STACK_DATA_SOURCE_FACTORY_H_
