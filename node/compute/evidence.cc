#include "node/compute/evidence.h"

#include <glog/logging.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/crc32c.h"
#include "common/node_id.h"

namespace skipswarm::node {
namespace {

// The fixed encoding of Note [Checkable evidence]: integers as 8 bytes
// little-endian, byte strings length-prefixed, so no two field lists
// encode alike.
class SignedBytes {
 public:
  explicit SignedBytes(absl::string_view tag) { Bytes(tag); }
  void U64(uint64_t v) {
    for (int i = 0; i < 8; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  void Bytes(absl::string_view b) {
    U64(b.size());
    out_.append(b.data(), b.size());
  }
  void Double(double d) {
    uint64_t bits = 0;
    std::memcpy(&bits, &d, sizeof(bits));
    U64(bits);
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

absl::Status Exact(absl::string_view what, absl::string_view bytes, size_t size) {
  if (bytes.size() == size) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(what, ": ", bytes.size(), " bytes, want ", size));
}

// `public_key` must be the key of `id` (its SHA-256), then sign `bytes`.
absl::Status VerifyBy(absl::string_view id, absl::string_view public_key,
                      absl::string_view bytes, absl::string_view signature) {
  if (common::NodeId::FromPublicKey(public_key).Bytes() != id) {
    return absl::UnauthenticatedError("the public key is not the named node's");
  }
  return identity::VerifySignature(public_key, bytes, signature);
}

EvidenceVerdict Verdict(EvidenceVerdict::Kind kind, std::string reason) {
  EvidenceVerdict v;
  v.kind = kind;
  v.reason = std::move(reason);
  return v;
}

}  // namespace

std::string CommitmentSigningBytes(const proto::OutputCommitment& c) {
  // v2 adds the bound input commitment; without one the bytes are v1's, so
  // a signer that received no commitment signs what an older peer does. v3
  // adds the route prefix and carries the binding (empty or not) always.
  const bool routed = !c.route_sha256().empty();
  const bool bound = !c.input_commitment_sha256().empty();
  SignedBytes b(routed  ? "skipswarm.output_commitment.v3"
                : bound ? "skipswarm.output_commitment.v2"
                        : "skipswarm.output_commitment.v1");
  b.Bytes(c.swarm_id());
  b.Bytes(c.origin());
  b.U64(c.iteration());
  b.U64(c.mb_id());
  b.U64(c.hop_index());
  b.Bytes(c.producer());
  b.Bytes(c.input_sha256());
  b.Bytes(c.output_sha256());
  const proto::TensorMeta& m = c.output();
  b.U64(static_cast<uint64_t>(m.dtype()));
  b.U64(static_cast<uint64_t>(m.codec()));
  b.U64(m.payload_bytes());
  b.U64(m.block_size());
  b.U64(m.shape_size());
  for (int64_t d : m.shape()) b.U64(static_cast<uint64_t>(d));
  if (bound || routed) b.Bytes(c.input_commitment_sha256());
  if (routed) b.Bytes(c.route_sha256());
  return b.Take();
}

std::string CommitmentDigest(const proto::OutputCommitment& commitment) {
  return Sha256(absl::Cord(CommitmentSigningBytes(commitment)));
}

std::string RouteDigest(const google::protobuf::RepeatedPtrField<proto::Hop>& route, int hops) {
  CHECK(hops >= 0 && hops <= route.size()) << hops << " of " << route.size();
  SignedBytes b("skipswarm.route_prefix.v1");
  b.U64(static_cast<uint64_t>(hops));
  for (int i = 0; i < hops; ++i) {
    b.Bytes(route.Get(i).node_id());
    b.U64(route.Get(i).stage());
  }
  return Sha256(absl::Cord(b.Take()));
}

int SignedRouteHops(uint32_t hop_index, int route_size) {
  return static_cast<int>(std::min<int64_t>(static_cast<int64_t>(hop_index) + 2, route_size));
}

std::string SignedRouteDigest(const google::protobuf::RepeatedPtrField<proto::Hop>& route,
                              uint32_t hop_index) {
  CHECK_LT(hop_index, static_cast<uint32_t>(route.size()));
  return RouteDigest(route, SignedRouteHops(hop_index, route.size()));
}

std::string AnswerSigningBytes(absl::string_view swarm_id, const proto::SketchAnswer& a) {
  SignedBytes b("skipswarm.sketch_answer.v1");
  b.Bytes(swarm_id);
  b.Bytes(a.origin());
  b.U64(a.iteration());
  b.U64(a.mb_id());
  b.U64(a.hop_index());
  b.Bytes(a.checked());
  b.Bytes(a.answerer());
  b.Bytes(a.input_sha256());
  const proto::OutputSketch& s = a.sketch();
  b.U64(s.shape_size());
  for (int64_t d : s.shape()) b.U64(static_cast<uint64_t>(d));
  b.U64(s.seed());
  b.Double(s.norm());
  b.U64(s.projections_size());
  for (double p : s.projections()) b.Double(p);
  return b.Take();
}

absl::Status SignCommitment(const identity::Identity& signer,
                            proto::OutputCommitment* commitment) {
  commitment->set_producer(signer.id().Bytes());
  absl::StatusOr<std::string> sig = signer.Sign(CommitmentSigningBytes(*commitment));
  if (!sig.ok()) return sig.status();
  commitment->set_signature(*std::move(sig));
  return absl::OkStatus();
}

absl::Status SignAnswer(const identity::Identity& signer, absl::string_view swarm_id,
                        absl::string_view input_sha256, proto::SketchAnswer* answer) {
  answer->set_answerer(signer.id().Bytes());
  answer->set_input_sha256(std::string(input_sha256));
  absl::StatusOr<std::string> sig = signer.Sign(AnswerSigningBytes(swarm_id, *answer));
  if (!sig.ok()) return sig.status();
  answer->set_signature(*std::move(sig));
  return absl::OkStatus();
}

absl::Status CheckCommitmentShape(const proto::OutputCommitment& c) {
  if (c.swarm_id().size() > kMaxCommitmentSwarmIdBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("commitment swarm_id: ", c.swarm_id().size(), " bytes"));
  }
  for (auto [what, bytes] : {std::pair<const char*, const std::string*>{"origin", &c.origin()},
                             {"producer", &c.producer()},
                             {"input_sha256", &c.input_sha256()},
                             {"output_sha256", &c.output_sha256()}}) {
    absl::Status s = Exact(absl::StrCat("commitment ", what), *bytes, 32);
    if (!s.ok()) return s;
  }
  if (c.hop_index() == 0 || c.hop_index() >= kMaxCheckedHops) {
    return absl::InvalidArgumentError(absl::StrCat("commitment hop_index ", c.hop_index()));
  }
  if (!c.has_output() || c.output().shape_size() < 1 ||
      c.output().shape_size() > kMaxCommitmentRank) {
    return absl::InvalidArgumentError("commitment output: no meta or rank out of 1..8");
  }
  for (int64_t d : c.output().shape()) {
    if (d < 1) return absl::InvalidArgumentError(absl::StrCat("commitment output dim ", d));
  }
  if (!c.input_commitment_sha256().empty()) {
    absl::Status s =
        Exact("commitment input_commitment_sha256", c.input_commitment_sha256(), kSha256Bytes);
    if (!s.ok()) return s;
  }
  if (!c.route_sha256().empty()) {
    absl::Status s = Exact("commitment route_sha256", c.route_sha256(), kSha256Bytes);
    if (!s.ok()) return s;
  }
  return Exact("commitment signature", c.signature(), identity::kSignatureBytes);
}

absl::Status VerifyCommitment(const proto::OutputCommitment& c,
                              absl::string_view public_key) {
  absl::Status shape = CheckCommitmentShape(c);
  if (!shape.ok()) return shape;
  return VerifyBy(c.producer(), public_key, CommitmentSigningBytes(c), c.signature());
}

std::string OriginSigningBytes(const proto::OriginCommitment& o) {
  SignedBytes b("skipswarm.origin_commitment.v1");
  b.Bytes(o.swarm_id());
  b.Bytes(o.origin());
  b.U64(o.iteration());
  b.U64(o.mb_id());
  b.U64(o.route_size());
  for (const proto::Hop& hop : o.route()) {
    b.Bytes(hop.node_id());
    b.U64(hop.stage());
  }
  b.Bytes(o.output_sha256());
  return b.Take();
}

absl::Status SignOrigin(const identity::Identity& signer, proto::OriginCommitment* origin) {
  origin->set_origin(signer.id().Bytes());
  absl::StatusOr<std::string> sig = signer.Sign(OriginSigningBytes(*origin));
  if (!sig.ok()) return sig.status();
  origin->set_signature(*std::move(sig));
  return absl::OkStatus();
}

absl::Status CheckOriginShape(const proto::OriginCommitment& o) {
  if (o.swarm_id().size() > kMaxCommitmentSwarmIdBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("origin commitment swarm_id: ", o.swarm_id().size(), " bytes"));
  }
  if (absl::Status s = Exact("origin commitment origin", o.origin(), 32); !s.ok()) return s;
  if (absl::Status s = Exact("origin commitment output_sha256", o.output_sha256(), kSha256Bytes);
      !s.ok()) {
    return s;
  }
  if (o.route_size() < 1 || o.route_size() > static_cast<int>(kMaxCheckedHops)) {
    return absl::InvalidArgumentError(absl::StrCat("origin commitment route: ", o.route_size(),
                                                   " hops, want 1..", kMaxCheckedHops));
  }
  for (const proto::Hop& hop : o.route()) {
    if (absl::Status s = Exact("origin commitment hop", hop.node_id(), 32); !s.ok()) return s;
  }
  if (o.route(0).node_id() != o.origin() || o.route(0).stage() != 0) {
    return absl::InvalidArgumentError("origin commitment route does not start at the origin");
  }
  return Exact("origin commitment signature", o.signature(), identity::kSignatureBytes);
}

absl::Status VerifyOrigin(const proto::OriginCommitment& o, absl::string_view public_key) {
  absl::Status shape = CheckOriginShape(o);
  if (!shape.ok()) return shape;
  return VerifyBy(o.origin(), public_key, OriginSigningBytes(o), o.signature());
}

EvidenceVerdict CheckEvidence(const Evidence& e, absl::string_view x_public_key,
                              absl::string_view y_public_key, const SketchLimits& limits,
                              const EvidenceJudge& judge,
                              const model::SketchCheckOptions& options) {
  const proto::OutputCommitment& c = e.commitment;
  const proto::SketchAnswer& a = e.answer;
  if (absl::Status s = CheckCommitmentShape(c); !s.ok()) {
    return Verdict(EvidenceVerdict::kMalformed, std::string(s.message()));
  }
  absl::StatusOr<SketchAnswer> answer = AnswerFromProto(a, limits);
  if (!answer.ok()) {
    return Verdict(EvidenceVerdict::kMalformed, std::string(answer.status().message()));
  }
  absl::Status fields = Exact("answer answerer", a.answerer(), 32);
  fields.Update(Exact("answer input_sha256", a.input_sha256(), kSha256Bytes));
  fields.Update(Exact("answer signature", a.signature(), identity::kSignatureBytes));
  if (!fields.ok()) return Verdict(EvidenceVerdict::kMalformed, std::string(fields.message()));
  if (absl::Status s =
          VerifyBy(c.producer(), x_public_key, CommitmentSigningBytes(c), c.signature());
      !s.ok()) {
    return Verdict(EvidenceVerdict::kBadXSignature, std::string(s.message()));
  }
  // Y's answer is verified under the commitment's swarm: an answer signed
  // for another swarm does not fit.
  if (absl::Status s = VerifyBy(a.answerer(), y_public_key,
                                AnswerSigningBytes(c.swarm_id(), a), a.signature());
      !s.ok()) {
    return Verdict(EvidenceVerdict::kBadYSignature, std::string(s.message()));
  }
  if (a.origin() != c.origin() || a.iteration() != c.iteration() || a.mb_id() != c.mb_id() ||
      a.hop_index() != c.hop_index() || a.checked() != c.producer()) {
    return Verdict(EvidenceVerdict::kVisitsDiffer,
                   "the answer checks another visit than the commitment's");
  }
  if (a.answerer() == c.producer()) {
    return Verdict(EvidenceVerdict::kVisitsDiffer, "X answered its own check");
  }
  if (e.output.size() != c.output().payload_bytes() || Sha256(e.output) != c.output_sha256()) {
    return Verdict(EvidenceVerdict::kPayloadHashDiffers,
                   "the payload is not the output X committed to");
  }
  // The commitment X bound (its signature names the digest), if the piece
  // carries it: X's own word on what the hop before said it sent X.
  const bool carried = !c.input_commitment_sha256().empty() && e.input_commitment.has_value() &&
                       CommitmentDigest(*e.input_commitment) == c.input_commitment_sha256();
  if (carried && e.input_commitment->output_sha256() != c.input_sha256()) {
    return Verdict(EvidenceVerdict::kFalseInput,
                   "X signed an input hash other than the output of the commitment it bound");
  }
  if (a.input_sha256() != c.input_sha256()) {
    return Verdict(EvidenceVerdict::kInputsDiffer,
                   carried ? "X and Y signed different inputs; X's is the hop before's "
                             "committed output (the hop before or Y lied)"
                           : "X and Y signed different inputs (X, Y or the hop before lied)");
  }
  // The CRC is not signed (the SHA-256 covers the bytes), but the decoder
  // checks it: the one of the payload whose hash was just checked.
  WireTensor received{c.output(), e.output};
  received.meta.set_payload_crc32c(common::Crc32c(e.output));
  absl::StatusOr<model::SketchVerdict> v = judge(received, answer->sketch, options);
  if (!v.ok()) return Verdict(EvidenceVerdict::kUndecodable, std::string(v.status().message()));
  EvidenceVerdict out = Verdict(v->match ? EvidenceVerdict::kMatch : EvidenceVerdict::kMismatch,
                                v->reason);
  out.sketch = *std::move(v);
  return out;
}

EvidenceVerdict CheckFalseInput(const Evidence& e, absl::string_view x_public_key,
                                absl::string_view before_public_key) {
  const proto::OutputCommitment& c = e.commitment;
  if (absl::Status s = CheckCommitmentShape(c); !s.ok()) {
    return Verdict(EvidenceVerdict::kMalformed, std::string(s.message()));
  }
  if (c.input_commitment_sha256().empty() || !e.input_commitment.has_value()) {
    return Verdict(EvidenceVerdict::kMalformed, "X bound no input commitment, or none is carried");
  }
  const proto::OutputCommitment& in = *e.input_commitment;
  if (absl::Status s = CheckCommitmentShape(in); !s.ok()) {
    return Verdict(EvidenceVerdict::kMalformed, absl::StrCat("input ", s.message()));
  }
  if (absl::Status s =
          VerifyBy(c.producer(), x_public_key, CommitmentSigningBytes(c), c.signature());
      !s.ok()) {
    return Verdict(EvidenceVerdict::kBadXSignature, std::string(s.message()));
  }
  if (CommitmentDigest(in) != c.input_commitment_sha256()) {
    return Verdict(EvidenceVerdict::kMalformed,
                   "the carried input commitment is not the one X bound");
  }
  if (absl::Status s =
          VerifyBy(in.producer(), before_public_key, CommitmentSigningBytes(in), in.signature());
      !s.ok()) {
    return Verdict(EvidenceVerdict::kBadInputSignature, std::string(s.message()));
  }
  if (in.output_sha256() == c.input_sha256()) {
    return Verdict(EvidenceVerdict::kMatch,
                   "X's input hash is the output of the commitment it bound");
  }
  return Verdict(EvidenceVerdict::kFalseInput,
                 "X signed an input hash other than the output of the commitment it bound");
}

}  // namespace skipswarm::node
