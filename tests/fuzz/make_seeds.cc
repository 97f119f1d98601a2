// Writes the fuzzers' seed corpora (checked in under tests/fuzz/corpus/):
//   bazel run //tests/fuzz:make_seeds -- $PWD/tests/fuzz/corpus
// Valid inputs of each kind, so mutations start from deep inside the
// decoders rather than at their first check.
#include <cstdint>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/crc32c.h"
#include "common/node_id.h"
#include "identity/identity.h"
#include "identity/test_identity.h"
#include "membership/record.h"
#include "model/output_sketch.h"
#include "node/compute/sketch_wire.h"
#include "proto/gossip.pb.h"
#include "proto/pipeline.pb.h"
#include "proto/verify.pb.h"
#include "proto/version.h"

namespace skipswarm {
namespace {

void Write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// Frame fuzzer input (frame_fuzzer.cc): flags, header length, chunk KiB - 1,
// header, payload.
std::string FrameInput(uint8_t flags, const proto::FrameHeader& h, const std::string& payload) {
  const std::string header = h.SerializeAsString();
  std::string out;
  out.push_back(static_cast<char>(flags));
  out.push_back(static_cast<char>(header.size() & 0xff));
  out.push_back(static_cast<char>(header.size() >> 8));
  out.push_back(0);  // 1 KiB chunks
  return out + header + payload;
}

proto::FrameHeader Header(proto::Codec codec, proto::DType dtype, std::vector<int64_t> shape,
                          uint64_t bytes, uint32_t block) {
  proto::FrameHeader h;
  h.set_protocol_version(proto::kProtocolVersion);
  h.set_iteration(3);
  h.set_mb_id(7);
  h.set_origin(common::NodeId::ForName("origin").Bytes());
  for (const char* n : {"origin", "relay", "last"}) {
    proto::Hop* hop = h.add_route();
    hop->set_node_id(common::NodeId::ForName(n).Bytes());
    hop->set_stage(static_cast<uint32_t>(h.route_size() - 1));
  }
  h.set_hop_index(1);
  h.set_direction(proto::DIRECTION_FORWARD);
  h.mutable_tensor()->set_codec(codec);
  h.mutable_tensor()->set_dtype(dtype);
  for (int64_t d : shape) h.mutable_tensor()->add_shape(d);
  h.mutable_tensor()->set_payload_bytes(bytes);
  h.mutable_tensor()->set_block_size(block);
  h.set_chunk_count(static_cast<uint32_t>((bytes + 1023) / 1024));
  return h;
}

void FrameSeeds(const std::string& dir) {
  std::string fp32(2 * 3 * 4 * 4, '\0');
  for (size_t i = 0; i < fp32.size(); i += 4) fp32[i + 3] = 0x3f;  // 0.5f-ish values
  Write(dir + "/fp32", FrameInput(3, Header(proto::CODEC_RAW_FP32, proto::DTYPE_FLOAT32,
                                            {2, 3, 4}, fp32.size(), 0), fp32));
  std::string fp16(4 * 8 * 2, '\x3c');
  Write(dir + "/fp16", FrameInput(3, Header(proto::CODEC_FP16, proto::DTYPE_FLOAT32, {4, 8},
                                            fp16.size(), 0), fp16));
  // int8 blockwise: 2 blocks of 16 -> 2 scales (float 1.0) + 32 values.
  std::string int8;
  for (int b = 0; b < 2; ++b) int8 += std::string("\x00\x00\x80\x3f", 4);
  for (int i = 0; i < 32; ++i) int8.push_back(static_cast<char>(i - 16));
  Write(dir + "/int8", FrameInput(3, Header(proto::CODEC_INT8_BLOCKWISE, proto::DTYPE_FLOAT32,
                                            {2, 16}, int8.size(), 16), int8));
  std::string ids(2 * 5 * 8, '\0');
  for (size_t i = 0; i < ids.size(); i += 8) ids[i] = static_cast<char>(i);
  Write(dir + "/int64", FrameInput(7, Header(proto::CODEC_RAW_INT64, proto::DTYPE_INT64, {2, 5},
                                             ids.size(), 0), ids));
  // An abort notice with a stopping cause (Note [Stopping refusals] in
  // node/stage/stage_server.h): a BACKWARD frame with no tensor, so the
  // fuzzer mutates abort_cause past the header check (Note [Frame
  // validation] 1c).
  proto::FrameHeader notice = Header(proto::CODEC_RAW_FP32, proto::DTYPE_FLOAT32, {}, 0, 0);
  notice.set_direction(proto::DIRECTION_BACKWARD);
  notice.clear_tensor();
  notice.set_chunk_count(0);
  proto::AbortCause* cause = notice.mutable_abort_cause();
  cause->set_kind(proto::AbortCause::ABORT_CAUSE_STOPPING);
  cause->set_node(common::NodeId::ForName("last").Bytes());
  cause->set_stop_after(2);
  Write(dir + "/abort_notice", FrameInput(3, notice, ""));
  // A multi-chunk fp32 payload (3 KiB: three 1 KiB chunks).
  std::string big(768 * 4, '\0');
  Write(dir + "/fp32_chunks", FrameInput(3, Header(proto::CODEC_RAW_FP32, proto::DTYPE_FLOAT32,
                                                   {3, 256}, big.size(), 0), big));
}

void GossipSeeds(const std::string& dir) {
  auto other = identity::TestIdentity('\x09');
  const absl::Time now = absl::FromUnixMillis(1'800'000'000'000);
  proto::NodeRecord r;
  r.set_swarm_id("fuzz-swarm");
  r.add_addresses("127.0.0.1:7000");
  r.add_addresses("127.0.0.1:7001");
  r.add_stages(1);
  r.set_memory_slots(8);
  r.set_seconds_per_layer_per_sample(0.001);
  r.set_incarnation(3);
  (*r.mutable_stage_digests())[1] = 42;
  r.set_iteration(5);
  proto::SignedNodeRecord signed_r = *membership::SignRecord(*other, r, now);

  proto::PingRequest ping;
  ping.set_protocol_version(proto::kProtocolVersion);
  ping.set_swarm_id("fuzz-swarm");
  ping.set_from(other->id().Bytes());
  ping.set_seq(1);
  *ping.mutable_gossip()->add_records() = signed_r;
  proto::MembershipUpdate* u = ping.mutable_gossip()->add_updates();
  u->set_node_id(common::NodeId::ForName("someone").Bytes());
  u->set_state(proto::MEMBER_STATE_SUSPECT);
  u->set_incarnation(2);
  (void)membership::SignOpinion(*other, "fuzz-swarm", u);
  proto::LinkSample* l = ping.mutable_gossip()->add_links();
  l->set_from(other->id().Bytes());
  l->set_to(common::NodeId::ForName("someone").Bytes());
  l->set_rtt_us(800);
  Write(dir + "/ping", std::string(1, '\0') + ping.SerializeAsString());
  proto::PingRequest req = ping;
  req.set_target(common::NodeId::ForName("someone").Bytes());
  Write(dir + "/ping_req", std::string(1, '\1') + req.SerializeAsString());

  proto::PushPullRequest pp;
  pp.set_protocol_version(proto::kProtocolVersion);
  pp.set_swarm_id("fuzz-swarm");
  pp.set_from(other->id().Bytes());
  proto::RecordDigest* d = pp.add_digests();
  d->set_node_id(other->id().Bytes());
  d->set_incarnation(3);
  d->set_state(proto::MEMBER_STATE_ALIVE);
  *pp.mutable_gossip()->add_records() = signed_r;
  Write(dir + "/push_pull", std::string(1, '\2') + pp.SerializeAsString());
  Write(dir + "/record", std::string(1, '\3') + signed_r.SerializeAsString());
}

// Sketch fuzzer input (sketch_fuzzer.cc): flags, sketch length, the
// sketch, then the received output's float32 values.
std::string SketchInput(uint8_t flags, const model::OutputSketch& sketch,
                        const std::vector<float>& received) {
  // Bit 4: the sketch travels in a SketchAnswer.
  const std::string wire =
      (flags & 16) ? node::AnswerToProto(node::SketchAnswer{
                         node::CheckedVisit{common::NodeId::ForName("origin"), 3, 7, 1,
                                            common::NodeId::ForName("checked")},
                         sketch})
                         .SerializeAsString()
                   : node::SketchToProto(sketch).SerializeAsString();
  std::string out;
  out.push_back(static_cast<char>(flags));
  out.push_back(static_cast<char>(wire.size() & 0xff));
  out.push_back(static_cast<char>(wire.size() >> 8));
  out += wire;
  out.append(reinterpret_cast<const char*>(received.data()), received.size() * sizeof(float));
  return out;
}

void SketchSeeds(const std::string& dir) {
  std::vector<float> y(2 * 4 * 16);
  for (size_t i = 0; i < y.size(); ++i) y[i] = 0.01f * static_cast<float>(i % 37) - 0.15f;
  const std::vector<int64_t> shape = {2, 4, 16};
  const model::OutputSketch s16 = model::SketchOutput(y, shape, 11, 16);
  // Honest pairs under each codec the frame may declare (flags bits 0-1).
  Write(dir + "/raw_match", SketchInput(0, s16, y));
  Write(dir + "/fp16_match", SketchInput(1, s16, y));
  Write(dir + "/bf16_match", SketchInput(2, s16, y));
  Write(dir + "/int8_match", SketchInput(3, s16, y));
  // A liar's output (scaled by 1.5) and one of another shape.
  std::vector<float> scaled = y;
  for (float& v : scaled) v *= 1.5f;
  Write(dir + "/scaled", SketchInput(0, s16, scaled));
  Write(dir + "/other_shape", SketchInput(4, s16, y));
  // The default and the largest projection counts (bit 3 lifts the limit).
  Write(dir + "/k256", SketchInput(8, model::SketchOutput(y, shape, 12, 256), y));
  Write(dir + "/answer_match", SketchInput(16, s16, y));
  Write(dir + "/answer_int8_scaled", SketchInput(16 | 3, s16, scaled));
  Write(dir + "/k4096", SketchInput(8, model::SketchOutput(y, shape, 13, 4096), y));
}

}  // namespace
}  // namespace skipswarm

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: make_seeds CORPUS_DIR (holding frame/, gossip/ and sketch/)\n";
    return 2;
  }
  const std::string root = argv[1];
  skipswarm::FrameSeeds(root + "/frame");
  skipswarm::GossipSeeds(root + "/gossip");
  skipswarm::SketchSeeds(root + "/sketch");
  std::cout << "seeds written under " << root << "\n";
  return 0;
}
