// TestBarrierChunk: the single chunk of an iteration barrier message
// (Note [Barrier message] in grpc_group.h: phase 0, stage kBarrierStage,
// an empty float tensor) as a client built from proto/stage.proto alone
// would send it, for tests that push barriers straight at a StageService:
// forged senders, floods.
//
//   stream->Write(TestBarrierChunk(claimed_sender, /*iteration=*/1));
//
// Thread rule: none (builds a value).
#ifndef SKIPSWARM_NODE_TRAIN_TEST_BARRIER_CHUNK_H_
#define SKIPSWARM_NODE_TRAIN_TEST_BARRIER_CHUNK_H_

#include <cstdint>

#include "common/node_id.h"
#include "node/train/grpc_group.h"
#include "proto/stage.pb.h"
#include "proto/version.h"

namespace skipswarm::node {

// A barrier for `iteration` claiming to come from `from`.
inline proto::GradientChunk TestBarrierChunk(const common::NodeId& from, uint64_t iteration) {
  proto::GradientChunk chunk;
  chunk.set_protocol_version(proto::kProtocolVersion);
  chunk.set_from(from.Bytes());
  chunk.set_stage(kBarrierStage);
  chunk.set_iteration(iteration);
  chunk.set_phase(0);
  chunk.set_chunk_index(0);
  chunk.set_chunk_count(1);
  chunk.mutable_tensor()->set_dtype(proto::DTYPE_FLOAT32);
  chunk.mutable_tensor()->set_codec(proto::CODEC_RAW_FP32);
  chunk.mutable_tensor()->add_shape(0);
  return chunk;
}

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRAIN_TEST_BARRIER_CHUNK_H_
