// Adopting a ban on checkable evidence (Note [Evidence bans]): the rule
// that turns one piece of evidence a catcher served (Note [Checkable
// evidence] in node/compute/evidence.h) into this member's ban of the
// accused, the set of bans so adopted (which VerifyQuorumBans, and so
// routing and averaging, read beside the quorum's), and the pacing of the
// fetches that bring pieces in.
//
//   EvidenceBans bans;                                  // the daemon's, shared
//   PieceVerdict v = JudgeServedPiece(piece, x, lookup, limits, judge);
//   if (Convicts(v)) bans.Adopt(x, accuser, v == PieceVerdict::kProvenFalseInput);
//   VerifiedRoutingView routing(&view, &trust, self, &bans);
//
// Note [Evidence bans]
// A catcher's verdict reaches other members as a ban in its record; the
// quorum (Note [Verify bans]) adopts it only when two trusted accusers name
// the same member, so a lone catcher could not get a liar out of anyone
// else's routes. A member that sees a ban of live X, not adopted by the
// quorum, asks that accuser for its evidence against X (the catcher
// serves the pieces it kept, node/daemon/gossip/evidence_service.h) and
// checks each piece itself; the accuser is not trusted at all. A piece
// whose commitment's producer is X convicts X here (JudgeServedPiece ==
// kProvenFalseInput) when CheckFalseInput proves it, with X's and the hop before's
// keys from their signed records: X signed an input hash beside a bound,
// validly signed commitment of the hop before whose output hash is another
// (Note [Checkable evidence], the input chain). That is X's own signature
// contradicting itself, so it convicts whatever X's trust and needs no Y
// (a receiver that refused the frame keeps it without an answer); a
// catcher cannot forge one: rewriting X's input hash or the bound digest
// breaks X's signature, swapping the carried commitment breaks the
// binding, and an honest X binds only the commitment whose output it
// received. The hop after X that refuses such a frame (CheckCommitment
// in stage_server_commitment.cc) keeps its two commitments, without the
// payload, in the store its signed mismatches use (so it serves them the
// same way) and tells on_false_input, whatever X's trust: the daemon
// condemns X at once (VerifyTrust::Condemn: a proof is not one strike of
// Note [Verify trust], nor a dispute of Note [Trusted disputes]), so X
// leaves its routes and its record's bans name X.
// A proven ban spreads whatever X's trust: the adopter fetches an
// accuser's pieces for a ban of any live member the quorum has not
// adopted, trusted or not (paced alike). That is safe for a trusted X
// because against it a piece convicts only as a proof (the sketch rule
// below stops at kTrustedAccused before the judge): a catcher cannot make
// one without X's key, and an honest X never signs one. EvidenceBans
// records which bans rest on a proof, and VerifyQuorumBans holds those
// for a trusted X too, even where X is the last trusted host of a stage
// (why: Note [Trusted verify bans]). Otherwise a piece convicts X
// (kConvicts) iff
//   - its commitment's producer is X (a piece about someone else is not
//     evidence against X),
//   - CheckEvidence, with X's and Y's public keys from their signed member
//     records and the real judge, says kMismatch (so X signed that output
//     for that input, Y signed its sketch of the same input, and they
//     disagree),
//   - Y is a live trusted member of this member's view and X is on
//     probation: the attribution of Note [Verify trust] (a newcomer
//     against a trusted replica: the newcomer lied).
// Then this member adopts the ban of X exactly where it adopts a quorum's:
// EvidenceBans feeds VerifyQuorumBans, whose result VerifiedRoutingView
// routes around and QuorumBans bans from averaging. One rule decides who
// is banned; evidence is a second way to meet it. An adopted ban lasts
// while X is a live member on probation in the view (VerifyQuorumBans
// reads it only then), like the quorum's, a proven one while X is a live
// member whatever its trust; X leaving drops either.
// What convicts nobody (counted by reason, never a ban):
//   - a trusted X on a sketch mismatch: X and Y both trusted and
//     disagreeing says that one of them lied, not which (Note [Trusted
//     disputes]); one piece cannot attribute it, so a trusted X keeps the
//     quorum rule only (unless the piece proves a false input);
//   - a piece whose false input is not proven (a signature, the binding,
//     the hop before's key missing) falls to the rule above;
//   - kInputsDiffer (X committed to another input than Y answered for:
//     maybe the hop before fed one of them something else, maybe X lied
//     about its input; Note [Checkable evidence]), a match, any invalid
//     piece, a Y that is not trusted or not in the view, a key missing.
// Safety: a forged piece needs X's signature on an output that disagrees
// with a trusted Y's signed sketch; neither a lying catcher nor any number
// of newcomers can make one. A trusted Y that lies can frame a newcomer
// alone now (under the quorum it took two trusted liars); that is the
// price of one honest catcher's being enough, and it is bounded to
// newcomers as before.
// Cost: fetches are paced (EvidenceFetchPacer: once per (accuser,
// accused) per period, few outstanding, a bounded table), on the daemon's
// evidence worker, never on the training path or under a view lock.
//
// Thread rule: EvidenceBans and EvidenceFetchPacer are thread-safe;
// JudgeServedPiece is pure (its lookups must be thread-safe).
#ifndef SKIPSWARM_NODE_STAGE_EVIDENCE_BANS_H_
#define SKIPSWARM_NODE_STAGE_EVIDENCE_BANS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/node_id.h"
#include "node/compute/evidence.h"

namespace skipswarm::node {

enum class PieceVerdict {
  kProvenFalseInput,  // a false-input proof: adopt the ban, whatever X's trust
  kConvicts,          // a newcomer's mismatch: adopt the ban of the accused
  kTrustedAccused,    // the accused is trusted: quorum only
  kNotTheAccused,     // the commitment's producer is someone else
  kUnknownMember,     // X or Y not in the view, or no record key
  kVerifierUntrusted, // Y is on probation
  kInvalid,           // CheckEvidence: a signature, shape, visit, hash, decode
  kInputsDiffer,      // CheckEvidence's kInputsDiffer
  kMatch,             // CheckEvidence's kMatch
};
// "convicts", "trusted_accused", ... (the metrics' reason label).
const char* PieceVerdictName(PieceVerdict v);
// kProvenFalseInput or kConvicts: the piece convicts the accused.
inline bool Convicts(PieceVerdict v) {
  return v == PieceVerdict::kProvenFalseInput || v == PieceVerdict::kConvicts;
}

// What JudgeServedPiece needs of this member's view (thread-safe).
struct EvidenceLookup {
  // The raw public key of a live member from its signed record.
  std::function<std::optional<std::string>(const common::NodeId&)> public_key_of;
  // Whether a live member is trusted (not on probation).
  std::function<bool(const common::NodeId&)> trusted;
};

// Note [Evidence bans]: one piece served against `accused`.
PieceVerdict JudgeServedPiece(const Evidence& piece, const common::NodeId& accused,
                              const EvidenceLookup& lookup, const SketchLimits& limits,
                              const EvidenceJudge& judge,
                              const model::SketchCheckOptions& options = {});

// One ban adopted on evidence: the accuser whose piece convicted, and
// whether that piece was a false-input proof (Note [Evidence bans]: such a
// ban holds whatever the accused's trust).
struct EvidenceBan {
  common::NodeId accuser;
  bool proven = false;
  bool operator==(const EvidenceBan& o) const {
    return accuser == o.accuser && proven == o.proven;
  }
};
// accused -> its ban.
using EvidencedBans = std::map<common::NodeId, EvidenceBan>;

// The bans this member adopted on evidence. Bounded: at most max_entries,
// new ones refused beyond.
class EvidenceBans {
 public:
  explicit EvidenceBans(size_t max_entries = 256) : max_entries_(max_entries) {}
  // True when `accused` is new here, or its ban now rests on a proof where
  // it did not (generation() moves).
  bool Adopt(const common::NodeId& accused, const common::NodeId& accuser, bool proven = false);
  // Forgets accused ids `keep` says no to (members gone from the view).
  void Retain(const std::function<bool(const common::NodeId&)>& keep);
  EvidencedBans adopted() const;
  bool Has(const common::NodeId& accused) const;
  uint64_t generation() const;

 private:
  const size_t max_entries_;
  mutable absl::Mutex mu_;
  EvidencedBans adopted_ ABSL_GUARDED_BY(mu_);
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
};

struct EvidenceFetchPacerOptions {
  // At most one fetch per (accuser, accused) per period.
  absl::Duration period = absl::Seconds(30);
  int max_outstanding = 2;
  // Pairs remembered; beyond, those whose period passed are forgotten, and
  // a new pair is refused while none has.
  size_t max_pairs = 512;
};

// Note [Evidence bans]: which fetches may start now (`now`: a steady time).
class EvidenceFetchPacer {
 public:
  explicit EvidenceFetchPacer(EvidenceFetchPacerOptions options = {}) : options_(options) {}
  // True: the fetch may start (counted outstanding until Done).
  bool TryStart(const common::NodeId& accuser, const common::NodeId& accused,
                absl::Duration now);
  void Done();
  int outstanding() const;

 private:
  const EvidenceFetchPacerOptions options_;
  mutable absl::Mutex mu_;
  std::map<std::pair<common::NodeId, common::NodeId>, absl::Duration> last_ ABSL_GUARDED_BY(mu_);
  int outstanding_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_STAGE_EVIDENCE_BANS_H_
