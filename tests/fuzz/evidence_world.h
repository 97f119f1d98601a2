// The members and signed pieces evidence_fuzzer.cc judges and make_seeds.cc
// writes as seeds (tests/fuzz/README.md): four member keys made from fixed
// seeds and every statement they sign, made the same way each time (Ed25519
// signatures are deterministic), so the target knows exactly which signed
// commitments are lies.
//
// The swarm: the origin dispatches micro-batches 3, 4 and 5 along
// origin -> P (hop 1) -> X (hop 2); trusted Y checks each hop; Z is a member
// on probation that signs nothing. P is honest on every micro-batch. X is
// honest on 3, sends a x1.5 output on 4 (a mismatch against Y's sketch) and
// on 5 signs an input hash other than P's signed output while binding P's
// commitment (a false input). Honest outputs depend on the input only
// (P: EvidenceActivation(0.5), X: EvidenceActivation(1)), so no two honest
// statements disagree whichever visits a mutation pairs.
//
// Thread rule: pure helpers.
#ifndef SKIPSWARM_TESTS_FUZZ_EVIDENCE_WORLD_H_
#define SKIPSWARM_TESTS_FUZZ_EVIDENCE_WORLD_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/node_id.h"
#include "identity/identity.h"
#include "model/output_sketch.h"
#include "node/compute/evidence.h"
#include "node/compute/evidence_test_util.h"
#include "node/compute/sketch_wire.h"
#include "node/daemon/gossip/evidence.pb.h"
#include "node/stage/evidence_bans.h"

namespace skipswarm::fuzz {

inline constexpr char kEvidenceOrigin[] = "origin";
inline constexpr uint64_t kEvidenceIteration = 7;
inline constexpr uint64_t kHonestMb = 3, kMismatchMb = 4, kFalseInputMb = 5;

struct EvidenceWorld {
  std::unique_ptr<identity::Identity> p = node::testing::EvidenceKey('\x21');
  std::unique_ptr<identity::Identity> x = node::testing::EvidenceKey('\x22');
  std::unique_ptr<identity::Identity> y = node::testing::EvidenceKey('\x23');
  std::unique_ptr<identity::Identity> z = node::testing::EvidenceKey('\x24');

  // Every commitment P and X sign, as served pieces, by micro-batch.
  std::vector<node::Evidence> hop1;  // P's (honest), Y's answer
  std::vector<node::Evidence> hop2;  // X's, P's bound commitment, Y's answer
  // CommitmentSigningBytes of the commitments X signed falsely, by kind.
  std::set<std::string> x_mismatch_lies, x_false_input_lies;

  EvidenceWorld() {
    for (uint64_t mb : {kHonestMb, kMismatchMb, kFalseInputMb}) {
      node::Evidence before = Piece(*p, mb, 1, OriginOutputSha(), 0.5f, std::nullopt);
      const std::string x_input = mb == kFalseInputMb
                                      ? node::Sha256(absl::Cord("not what P sent"))
                                      : before.commitment.output_sha256();
      node::Evidence e = Piece(*x, mb, 2, x_input, mb == kMismatchMb ? 1.5f : 1.f,
                               before.commitment);
      if (mb == kMismatchMb) x_mismatch_lies.insert(node::CommitmentSigningBytes(e.commitment));
      if (mb == kFalseInputMb) x_false_input_lies.insert(node::CommitmentSigningBytes(e.commitment));
      hop1.push_back(std::move(before));
      hop2.push_back(std::move(e));
    }
  }

  static std::string OriginOutputSha() { return node::Sha256(absl::Cord("origin stage 0")); }

  // `producer` at `hop` of micro-batch `mb` received the input hashed
  // `true_input` (the hop before's signed output) and signed `input_sha256`
  // and the output EvidenceActivation(scale); Y answers with the honest
  // sketch of that input (the honest output of the hop).
  node::Evidence Piece(const identity::Identity& producer, uint64_t mb, uint32_t hop,
                       const std::string& input_sha256, float scale,
                       const std::optional<proto::OutputCommitment>& bound) const {
    namespace t = node::testing;
    node::Evidence e;
    e.output = t::EvidencePayload(t::EvidenceActivation(scale));
    proto::OutputCommitment& c = e.commitment;
    c.set_swarm_id(t::kEvidenceSwarm);
    c.set_origin(common::NodeId::ForName(kEvidenceOrigin).Bytes());
    c.set_iteration(kEvidenceIteration);
    c.set_mb_id(mb);
    c.set_hop_index(hop);
    c.set_input_sha256(input_sha256);
    c.set_output_sha256(node::Sha256(e.output));
    c.mutable_output()->set_dtype(proto::DTYPE_FLOAT32);
    c.mutable_output()->set_codec(proto::CODEC_RAW_FP32);
    for (int64_t d : {t::kEvidenceSamples, t::kEvidenceTokens, t::kEvidenceDModel}) {
      c.mutable_output()->add_shape(d);
    }
    c.mutable_output()->set_payload_bytes(e.output.size());
    if (bound.has_value()) {
      c.set_input_commitment_sha256(node::CommitmentDigest(*bound));
      e.input_commitment = *bound;
    }
    CHECK(node::SignCommitment(producer, &c).ok());
    // Y's input is the hop before's true output (X's false input hash aside).
    const std::string y_input =
        bound.has_value() ? bound->output_sha256() : OriginOutputSha();
    const float honest_scale = hop == 1 ? 0.5f : 1.f;
    node::SketchAnswer answer;
    answer.visit = node::CheckedVisit{common::NodeId::ForName(kEvidenceOrigin),
                                      kEvidenceIteration, mb, hop, producer.id()};
    answer.sketch = model::SketchOutput(
        t::EvidenceActivation(honest_scale),
        {t::kEvidenceSamples, t::kEvidenceTokens, t::kEvidenceDModel}, 99);
    e.answer = node::AnswerToProto(answer);
    CHECK(node::SignAnswer(*y, t::kEvidenceSwarm, y_input, &e.answer).ok());
    return e;
  }
};

// evidence_fuzzer's input byte 0.
inline constexpr uint8_t kEvidenceXTrusted = 1;      // bit 0: X is trusted
inline constexpr uint8_t kEvidenceAccusedShift = 1;  // bits 1-2: accused X, P, Y, Z
inline constexpr uint8_t kEvidencePTrusted = 8;      // bit 3: P is trusted
// Bit 4: Z is hostile and holds its key: after decoding, every commitment
// whose producer is Z and every answer whose answerer is Z is signed by Z
// afresh (SignAsZ), so mutations of Z's statements stay validly signed.
inline constexpr uint8_t kEvidenceZSigns = 16;

// Z signs whatever of `e` names it (kEvidenceZSigns): a member's power over
// its own statements.
inline void SignAsZ(const EvidenceWorld& w, node::Evidence* e) {
  const std::string z = w.z->id().Bytes();
  if (e->commitment.producer() == z) (void)node::SignCommitment(*w.z, &e->commitment);
  if (e->input_commitment && e->input_commitment->producer() == z) {
    (void)node::SignCommitment(*w.z, &*e->input_commitment);
  }
  if (e->answer.answerer() == z) {
    const std::string input = e->answer.input_sha256();
    (void)node::SignAnswer(*w.z, e->commitment.swarm_id(), input, &e->answer);
  }
}

// The accused `flags` name.
inline const identity::Identity& Accused(const EvidenceWorld& w, uint8_t flags) {
  const identity::Identity* members[] = {w.x.get(), w.p.get(), w.y.get(), w.z.get()};
  return *members[(flags >> kEvidenceAccusedShift) & 3];
}

// The judging member's view: the four members' record keys; Y trusted, Z
// on probation, X and P as `flags` say. Holds `w` by reference.
inline node::EvidenceLookup Lookup(const EvidenceWorld& w, uint8_t flags) {
  node::EvidenceLookup lookup;
  lookup.public_key_of = [&w](const common::NodeId& id) -> std::optional<std::string> {
    for (const identity::Identity* m : {w.x.get(), w.p.get(), w.y.get(), w.z.get()}) {
      if (m->id() == id) return m->public_key();
    }
    return std::nullopt;
  };
  lookup.trusted = [&w, flags](const common::NodeId& id) {
    if (id == w.x->id()) return (flags & kEvidenceXTrusted) != 0;
    if (id == w.p->id()) return (flags & kEvidencePTrusted) != 0;
    return id == w.y->id();
  };
  return lookup;
}

// A piece as the evidence service serves it (evidence_service.cc).
inline void AddServedPiece(const node::Evidence& e, proto::FetchEvidenceResponse* response) {
  proto::EvidencePiece* piece = response->add_pieces();
  *piece->mutable_commitment() = e.commitment;
  piece->set_output(std::string(e.output));
  *piece->mutable_answer() = e.answer;
  if (e.input_commitment) *piece->mutable_input_commitment() = *e.input_commitment;
}

}  // namespace skipswarm::fuzz

#endif  // SKIPSWARM_TESTS_FUZZ_EVIDENCE_WORLD_H_
