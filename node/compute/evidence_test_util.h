// Test-only pieces for checkable evidence (Note [Checkable evidence] in
// evidence.h) outside evidence_test.cc: a raw-fp32 judge without libtorch
// and signed pieces of evidence, honest or lying, between keys made from
// fixed seeds.
//
// Thread rule: pure helpers.
#ifndef SKIPSWARM_NODE_COMPUTE_EVIDENCE_TEST_UTIL_H_
#define SKIPSWARM_NODE_COMPUTE_EVIDENCE_TEST_UTIL_H_

#include <glog/logging.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/crc32c.h"
#include "identity/identity.h"
#include "model/output_sketch.h"
#include "node/compute/evidence.h"
#include "node/compute/sketch_wire.h"

namespace skipswarm::node::testing {

inline constexpr int64_t kEvidenceSamples = 2, kEvidenceTokens = 16, kEvidenceDModel = 32;
inline constexpr char kEvidenceSwarm[] = "swarm-a";

inline std::unique_ptr<identity::Identity> EvidenceKey(char c) {
  auto id = identity::Identity::FromSeed(std::string(32, c));
  CHECK(id.ok());
  return *std::move(id);
}

inline std::vector<float> EvidenceActivation(float scale) {
  std::vector<float> v(kEvidenceSamples * kEvidenceTokens * kEvidenceDModel);
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = scale * (static_cast<float>((i * 37) % 101) / 50.f - 1.f);
  }
  return v;
}

// Raw fp32 bytes of `v` (a frame's payload as codec CODEC_RAW_FP32 sends it).
inline absl::Cord EvidencePayload(const std::vector<float>& v) {
  return absl::Cord(
      absl::string_view(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)));
}

// What CheckOutputAgainstSketch does after decoding, for raw fp32 only
// (anything else is "undecodable").
inline absl::StatusOr<model::SketchVerdict> Fp32EvidenceJudge(
    const WireTensor& received, const model::OutputSketch& sketch,
    const model::SketchCheckOptions& options) {
  if (received.meta.codec() != proto::CODEC_RAW_FP32 || received.payload.size() % 4 != 0) {
    return absl::InvalidArgumentError("not raw fp32");
  }
  if (received.meta.payload_crc32c() != common::Crc32c(received.payload)) {
    return absl::DataLossError("payload CRC-32C does not match");
  }
  std::string bytes(received.payload);
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), bytes.size());
  std::vector<int64_t> shape(received.meta.shape().begin(), received.meta.shape().end());
  return model::CheckAgainstSketch(v, shape, model::EncodeOptions{}, sketch, options);
}

inline SketchLimits EvidenceLimits() {
  return SketchLimits{{4, kEvidenceTokens, kEvidenceDModel}};
}

// A piece: `x` produced its activation scaled by `x_scale` (1: honest) from
// `input_sha256`, and `y` signed the honest sketch of `y_input_sha256`.
inline Evidence MakeEvidence(const identity::Identity& x, const identity::Identity& y,
                             float x_scale, const std::string& input_sha256,
                             const std::string& y_input_sha256) {
  Evidence e;
  e.output = EvidencePayload(EvidenceActivation(x_scale));
  proto::OutputCommitment& c = e.commitment;
  c.set_swarm_id(kEvidenceSwarm);
  c.set_origin(common::NodeId::ForName("origin").Bytes());
  c.set_iteration(7);
  c.set_mb_id(3);
  c.set_hop_index(1);
  c.set_input_sha256(input_sha256);
  c.set_output_sha256(Sha256(e.output));
  c.mutable_output()->set_dtype(proto::DTYPE_FLOAT32);
  c.mutable_output()->set_codec(proto::CODEC_RAW_FP32);
  for (int64_t d : {kEvidenceSamples, kEvidenceTokens, kEvidenceDModel}) {
    c.mutable_output()->add_shape(d);
  }
  c.mutable_output()->set_payload_bytes(e.output.size());
  CHECK(SignCommitment(x, &c).ok());
  SketchAnswer answer;
  answer.visit = CheckedVisit{common::NodeId::ForName("origin"), 7, 3, 1, x.id()};
  answer.sketch = model::SketchOutput(EvidenceActivation(1.f),
                                      {kEvidenceSamples, kEvidenceTokens, kEvidenceDModel}, 99);
  e.answer = AnswerToProto(answer);
  CHECK(SignAnswer(y, kEvidenceSwarm, y_input_sha256, &e.answer).ok());
  return e;
}

// A piece of the input chain (Note [Checkable evidence]): `x` at hop 2
// binds the hop before `p`'s signed commitment to output `p_output` and
// signs `x_input` as its input (x_input != p_output: a false input); `y`
// answered for `input`.
inline Evidence MakeChainedEvidence(const identity::Identity& x, const identity::Identity& y,
                                    const identity::Identity& p, const std::string& input,
                                    const std::string& p_output, const std::string& x_input) {
  Evidence e = MakeEvidence(x, y, 1.05f, input, input);
  proto::OutputCommitment before = e.commitment;
  before.set_hop_index(1);
  before.set_input_sha256(Sha256(absl::Cord("P's input")));
  before.set_output_sha256(p_output);
  CHECK(SignCommitment(p, &before).ok());
  e.commitment.set_hop_index(2);
  e.commitment.set_input_sha256(x_input);
  e.commitment.set_input_commitment_sha256(CommitmentDigest(before));
  CHECK(SignCommitment(x, &e.commitment).ok());
  e.input_commitment = before;
  e.answer.set_hop_index(2);
  CHECK(SignAnswer(y, kEvidenceSwarm, input, &e.answer).ok());
  return e;
}

}  // namespace skipswarm::node::testing

#endif  // SKIPSWARM_NODE_COMPUTE_EVIDENCE_TEST_UTIL_H_
