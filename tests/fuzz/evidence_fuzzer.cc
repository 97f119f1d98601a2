// Fuzz target: a catcher's reply to FetchEvidence (proto::FetchEvidenceResponse,
// node/daemon/gossip/evidence.proto) as a member that fetched it judges it
// (Note [Evidence bans] in node/stage/evidence_bans.h): decoded by
// PiecesFromResponse as FetchEvidence decodes it, then every piece through
// JudgeServedPiece with the real sketch judge (CheckOutputAgainstSketch,
// libtorch) and the members of evidence_world.h as the view.
//
// The security property, asserted (abort) and not only "no crash": a piece
// convicts an accused A (Convicts: kProvenFalseInput or kConvicts) only if
//   1. A's commitment signature verifies under A's record key over exactly
//      the commitment the piece carries (VerifyCommitment), and
//   2. those signed bytes are one of the commitments A really signed as a
//      lie in evidence_world.h: a false input for kProvenFalseInput, a
//      mismatch (or false input) for kConvicts, and
//   3. a kConvicts accused is not trusted (a trusted member is convicted
//      only by a proof, Note [Evidence bans]).
// With flag bit 4 the hostile member Z also holds its own key: what names
// Z is signed by Z afresh after decoding (evidence_world.h SignAsZ), so the
// fuzzer can make any statement Z can; 2 then holds for X, P and Y still,
// and Z's own convictions need only 1 and 3 (Z signed them).
// Why this never fires on honest input: the target and its seeds hold the
// only signatures any input can carry (the fuzzer has no private key, and
// forging Ed25519 is out of reach of mutation), the world's honest
// statements agree with each other by construction (honest outputs depend
// on the input only), and X's two lies are the only false statements any
// key signed. So a conviction of P, Y or Z, of X on an honest commitment,
// or on bytes whose signature does not verify, is the judge convicting
// without a lie: a forged or mismatched piece got through.
//
// Input: byte 0 = flags (evidence_world.h: bit 0 X trusted, bits 1-2 the
// accused X / P / Y / Z, bit 3 P trusted, bit 4 Z signs; Y is always
// trusted, Z never);
// the rest is the serialized reply.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include <google/protobuf/stubs/logging.h>

#include "node/compute/evidence.h"
#include "node/compute/output_check.h"
#include "node/daemon/gossip/evidence_service.h"
#include "node/stage/evidence_bans.h"
#include "tests/fuzz/evidence_world.h"

namespace {

namespace fuzz = skipswarm::fuzz;
namespace node = skipswarm::node;
namespace proto = skipswarm::proto;
using skipswarm::common::NodeId;

void Fail(const char* what) {
  std::fprintf(stderr, "evidence_fuzzer: %s\n", what);
  std::abort();
}

// How far inputs got (printed at exit with FUZZ_STATS=1).
struct Reached {
  long inputs = 0, parsed = 0, pieces = 0;
  std::map<std::string, long> verdicts;
  ~Reached() {
    if (std::getenv("FUZZ_STATS") == nullptr) return;
    std::fprintf(stderr, "evidence_fuzzer: %ld inputs, %ld parsed, %ld pieces:", inputs, parsed,
                 pieces);
    for (const auto& [name, n] : verdicts) std::fprintf(stderr, " %s %ld", name.c_str(), n);
    std::fprintf(stderr, "\n");
  }
};
Reached reached;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const fuzz::EvidenceWorld* world = [] {
    google::protobuf::SetLogHandler([](google::protobuf::LogLevel, const char*, int,
                                       const std::string&) {});
    return new fuzz::EvidenceWorld();
  }();
  ++reached.inputs;
  if (size < 1) return 0;
  const uint8_t flags = data[0];
  proto::FetchEvidenceResponse response;
  if (!response.ParseFromArray(data + 1, static_cast<int>(size - 1))) return 0;
  ++reached.parsed;

  const skipswarm::identity::Identity& accused = fuzz::Accused(*world, flags);
  const node::EvidenceLookup lookup = fuzz::Lookup(*world, flags);
  const node::SketchLimits limits = skipswarm::node::testing::EvidenceLimits();
  const node::EvidenceJudge judge = [](const node::WireTensor& received,
                                       const skipswarm::model::OutputSketch& sketch,
                                       const skipswarm::model::SketchCheckOptions& options) {
    return node::CheckOutputAgainstSketch(received, sketch, options);
  };

  for (node::Evidence& piece :
       node::PiecesFromResponse(response, node::kMaxServedEvidencePieces)) {
    ++reached.pieces;
    if (flags & fuzz::kEvidenceZSigns) fuzz::SignAsZ(*world, &piece);
    const node::PieceVerdict v = node::JudgeServedPiece(piece, accused.id(), lookup, limits, judge);
    ++reached.verdicts[node::PieceVerdictName(v)];
    if (!node::Convicts(v)) continue;
    // 1. A's signature over exactly these bytes.
    if (!node::VerifyCommitment(piece.commitment, *lookup.public_key_of(accused.id())).ok()) {
      Fail("a piece convicted on a commitment that does not verify under the accused's key");
    }
    // Z signs whatever it likes under kEvidenceZSigns: its convictions are
    // its own signed lies (1 and 3 hold it still).
    const bool z_signs = (flags & fuzz::kEvidenceZSigns) && &accused == world->z.get();
    // 3. A trusted member falls to a proof only.
    if (v == node::PieceVerdict::kConvicts && lookup.trusted(accused.id())) {
      Fail("a trusted member convicted on a mismatch");
    }
    if (z_signs) continue;
    // 2. One of A's real lies (only X lies).
    const std::string signed_bytes = node::CommitmentSigningBytes(piece.commitment);
    const bool is_x = &accused == world->x.get();
    const bool false_input = is_x && world->x_false_input_lies.count(signed_bytes) > 0;
    const bool mismatch = is_x && world->x_mismatch_lies.count(signed_bytes) > 0;
    if (v == node::PieceVerdict::kProvenFalseInput && !false_input) {
      Fail("a false-input conviction on a commitment the accused never signed as a false input");
    }
    if (v == node::PieceVerdict::kConvicts && !mismatch && !false_input) {
      Fail("a mismatch conviction on a commitment the accused never signed as a lie");
    }
  }
  return 0;
}
