// Writes the fuzzers' seed corpora (checked in under tests/fuzz/corpus/):
//   bazel run //tests/fuzz:make_seeds -- $PWD/tests/fuzz/corpus
// Valid inputs of each kind, so mutations start from deep inside the
// decoders rather than at their first check.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/crc32c.h"
#include "common/sha256.h"
#include "common/node_id.h"
#include "identity/identity.h"
#include "identity/test_identity.h"
#include "membership/record.h"
#include "model/output_sketch.h"
#include "node/compute/sketch_wire.h"
#include "node/daemon/gossip/evidence.pb.h"
#include "node/daemon/gossip/state_chunks.h"
#include "proto/gossip.pb.h"
#include "proto/pipeline.pb.h"
#include "proto/stage.pb.h"
#include "proto/verify.pb.h"
#include "proto/version.h"
#include "tests/fuzz/evidence_world.h"

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

// Evidence fuzzer input (evidence_fuzzer.cc): flags, then a served reply.
// The file names say the verdict of the first piece (evidence_seeds_test).
void EvidenceSeeds(const std::string& dir) {
  const fuzz::EvidenceWorld w;
  auto write = [&](const std::string& name, uint8_t flags,
                   const std::vector<const node::Evidence*>& pieces) {
    proto::FetchEvidenceResponse r;
    for (const node::Evidence* e : pieces) fuzz::AddServedPiece(*e, &r);
    Write(dir + "/" + name, std::string(1, static_cast<char>(flags)) + r.SerializeAsString());
  };
  constexpr uint8_t kX = 0, kP = 1 << fuzz::kEvidenceAccusedShift,
                    kY = 2 << fuzz::kEvidenceAccusedShift;
  constexpr uint8_t kXTrusted = fuzz::kEvidenceXTrusted;
  write("match_honest", kX, {&w.hop2[0]});
  write("trusted_accused_honest", kX | kXTrusted, {&w.hop2[0]});
  write("match_hop1", kP, {&w.hop1[0]});
  write("convicts_mismatch", kX, {&w.hop2[1]});
  write("trusted_accused_mismatch", kX | kXTrusted, {&w.hop2[1]});
  write("false_input_trusted", kX | kXTrusted, {&w.hop2[2]});
  node::Evidence refused = w.hop2[2];  // kept by the receiver that refused it
  refused.answer.Clear();
  write("false_input_refused", kX, {&refused});
  write("not_the_accused_y", kY, {&w.hop2[1]});
  // Hostile Z with its key (kEvidenceZSigns): Z's answer to X's mismatch,
  // and Z's own false input at hop 2 (Z convicts itself).
  constexpr uint8_t kZ = 3 << fuzz::kEvidenceAccusedShift, kZSigns = fuzz::kEvidenceZSigns;
  node::Evidence z_answer = w.hop2[1];
  (void)node::SignAnswer(*w.z, z_answer.commitment.swarm_id(), z_answer.answer.input_sha256(),
                         &z_answer.answer);
  write("verifier_untrusted_z", kX | kZSigns, {&z_answer});
  const node::Evidence z_lie = w.Piece(*w.z, fuzz::kFalseInputMb, 2,
                                       node::Sha256(absl::Cord("not what P sent")), 1.f,
                                       w.hop1[2].commitment);
  write("false_input_z", kZ | kZSigns, {&z_lie});
  // A full reply (four pieces served; the rest dropped unread).
  write("match_reply", kX | fuzz::kEvidencePTrusted,
        {&w.hop2[0], &w.hop1[1], &w.hop2[1], &w.hop2[2], &w.hop1[0]});
}

// Rewrites the protocol_version (field 1, a varint, in FrameHeader and in
// the gossip requests) of the top-level message at data[begin, end) from an
// older version to kProtocolVersion, in place (a one-byte varint either
// way), leaving every other byte as it was. Returns how many it rewrote.
int BumpVersion(std::string* data, size_t begin, size_t end) {
  auto varint = [&](size_t* at, uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64 && *at < end; shift += 7) {
      const uint8_t b = static_cast<uint8_t>((*data)[(*at)++]);
      *v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return true;
    }
    return false;
  };
  int bumped = 0;
  size_t at = begin;
  while (at < end) {
    uint64_t tag, v;
    if (!varint(&at, &tag)) break;
    switch (tag & 7) {
      case 0:
        if (tag == 8 && at < end && static_cast<uint8_t>((*data)[at]) < proto::kProtocolVersion &&
            static_cast<uint8_t>((*data)[at]) >= proto::PROTOCOL_VERSION_1) {
          (*data)[at] = static_cast<char>(proto::kProtocolVersion);
          ++bumped;
        }
        if (!varint(&at, &v)) return bumped;
        break;
      case 1: at += 8; break;
      case 2:
        if (!varint(&at, &v) || v > end - at) return bumped;
        at += v;
        break;
      case 5: at += 4; break;
      default: return bumped;  // groups or garbage: stop
    }
  }
  return bumped;
}

// State fuzzer input (state_fuzzer.cc): flags, then per chunk its record
// flags, u16 length and the chunk. An honest source's stream of `bytes` in
// `chunk`-byte chunks for stage 1, iteration 5; `cut_after` > 0 ends the
// first stream after that many chunks (the rest resume it).
std::string StateInput(uint8_t flags, const std::string& bytes, size_t chunk, int cut_after) {
  std::string out(1, static_cast<char>(flags));
  const std::string sha = common::Sha256(bytes);
  int n = 0;
  for (size_t at = 0; at < bytes.size(); at += chunk) {
    proto::StateChunk c;
    c.set_stage(1);
    c.set_iteration(5);
    c.set_total_bytes(bytes.size());
    c.set_offset(at);
    c.set_data(bytes.substr(at, chunk));
    c.set_crc32c(common::Crc32c(c.data()));
    c.set_sha256(sha);
    c.set_params_digest(0x5eed);
    const std::string m = c.SerializeAsString();
    out.push_back(static_cast<char>(++n == cut_after ? 1 : 0));
    out.push_back(static_cast<char>(m.size() & 0xff));
    out.push_back(static_cast<char>(m.size() >> 8));
    out += m;
  }
  return out;
}

void StateSeeds(const std::string& dir) {
  std::filesystem::create_directories(dir);
  std::string bytes;
  for (int i = 0; i < 600; ++i) bytes.push_back(static_cast<char>(i * 37 + 11));
  Write(dir + "/one_stream", StateInput(0, bytes, 256, 0));
  Write(dir + "/bounded_resumed", StateInput(1, bytes, 200, 2));
  Write(dir + "/other_snapshot_held", StateInput(2, bytes, 600, 0));
}

// make_seeds --bump_version frame|gossip DIR: found inputs of an older
// protocol replay past the version check again (tests/fuzz/README.md).
int BumpVersions(const std::string& kind, const std::string& dir) {
  int files = 0, changed = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ++files;
    size_t begin = 0, end = 0;
    if (kind == "frame" && data.size() >= 4) {  // frame_fuzzer.cc: flags, length, chunk
      begin = 4;
      end = std::min(data.size(), begin + (static_cast<uint8_t>(data[1]) |
                                           (static_cast<size_t>(static_cast<uint8_t>(data[2])) << 8)));
    } else if (kind == "gossip" && !data.empty() && static_cast<uint8_t>(data[0]) % 4 != 3) {
      begin = 1;  // gossip_fuzzer.cc: kinds 0-2 carry a request, 3 a record
      end = data.size();
    }
    if (end > begin && BumpVersion(&data, begin, end) > 0) {
      Write(entry.path().string(), data);
      ++changed;
    }
  }
  std::cout << changed << " of " << files << " " << kind << " inputs rewritten to protocol "
            << proto::kProtocolVersion << "\n";
  return 0;
}

}  // namespace
}  // namespace skipswarm

int main(int argc, char** argv) {
  if (argc == 4 && std::string(argv[1]) == "--bump_version") {
    return skipswarm::BumpVersions(argv[2], argv[3]);
  }
  if (argc != 2) {
    std::cerr << "usage: make_seeds CORPUS_DIR (holding frame/, gossip/, sketch/, evidence/ and state/)\n"
                 "       make_seeds --bump_version frame|gossip DIR\n";
    return 2;
  }
  const std::string root = argv[1];
  skipswarm::FrameSeeds(root + "/frame");
  skipswarm::GossipSeeds(root + "/gossip");
  skipswarm::SketchSeeds(root + "/sketch");
  std::filesystem::create_directories(root + "/evidence");
  skipswarm::EvidenceSeeds(root + "/evidence");
  skipswarm::StateSeeds(root + "/state");
  std::cout << "seeds written under " << root << "\n";
  return 0;
}
