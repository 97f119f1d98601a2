#include "node/stage/evidence_bans.h"

#include <algorithm>
#include <vector>

namespace skipswarm::node {

const char* PieceVerdictName(PieceVerdict v) {
  switch (v) {
    case PieceVerdict::kProvenFalseInput:
      return "false_input";
    case PieceVerdict::kConvicts:
      return "convicts";
    case PieceVerdict::kTrustedAccused:
      return "trusted_accused";
    case PieceVerdict::kNotTheAccused:
      return "not_the_accused";
    case PieceVerdict::kUnknownMember:
      return "unknown_member";
    case PieceVerdict::kVerifierUntrusted:
      return "verifier_untrusted";
    case PieceVerdict::kInvalid:
      return "invalid";
    case PieceVerdict::kInputsDiffer:
      return "inputs_differ";
    case PieceVerdict::kMatch:
      return "match";
  }
  return "invalid";
}

PieceVerdict JudgeServedPiece(const Evidence& piece, const common::NodeId& accused,
                              const EvidenceLookup& lookup, const SketchLimits& limits,
                              const EvidenceJudge& judge,
                              const model::SketchCheckOptions& options) {
  if (piece.commitment.producer() != accused.Bytes()) return PieceVerdict::kNotTheAccused;
  const std::optional<std::string> x_key = lookup.public_key_of(accused);
  // Note [Evidence bans]: X's own signatures contradicting each other
  // convict X whatever its trust and whoever Y is (or with no answer: a
  // receiver that refused the frame kept it).
  if (piece.input_commitment.has_value()) {
    absl::StatusOr<common::NodeId> before =
        common::NodeId::FromBytes(piece.input_commitment->producer());
    std::optional<std::string> before_key;
    if (before.ok()) before_key = lookup.public_key_of(*before);
    if (x_key.has_value() && before_key.has_value() &&
        CheckFalseInput(piece, *x_key, *before_key).proves_x_lied()) {
      return PieceVerdict::kProvenFalseInput;
    }
  }
  absl::StatusOr<common::NodeId> y = common::NodeId::FromBytes(piece.answer.answerer());
  if (!y.ok() || *y == accused) return PieceVerdict::kInvalid;
  const std::optional<std::string> y_key = lookup.public_key_of(*y);
  if (!x_key.has_value() || !y_key.has_value()) return PieceVerdict::kUnknownMember;
  // Note [Evidence bans]: only a newcomer against a trusted replica is
  // attributable from one piece; checked before the (costly) judge.
  if (lookup.trusted(accused)) return PieceVerdict::kTrustedAccused;
  if (!lookup.trusted(*y)) return PieceVerdict::kVerifierUntrusted;
  const EvidenceVerdict v = CheckEvidence(piece, *x_key, *y_key, limits, judge, options);
  switch (v.kind) {
    case EvidenceVerdict::kMismatch:
      return PieceVerdict::kConvicts;
    case EvidenceVerdict::kMatch:
      return PieceVerdict::kMatch;
    case EvidenceVerdict::kInputsDiffer:
      return PieceVerdict::kInputsDiffer;
    default:
      return PieceVerdict::kInvalid;
  }
}

bool EvidenceBans::Adopt(const common::NodeId& accused, const common::NodeId& accuser,
                         bool proven) {
  absl::MutexLock lock(&mu_);
  auto it = adopted_.find(accused);
  if (it != adopted_.end()) {
    // Note [Evidence bans]: a proof outlasts the accused's probation, a
    // newcomer's mismatch does not; the stronger ground wins.
    if (!proven || it->second.proven) return false;
    it->second = EvidenceBan{accuser, true};
    ++generation_;
    return true;
  }
  if (adopted_.size() >= max_entries_) return false;
  adopted_.emplace(accused, EvidenceBan{accuser, proven});
  ++generation_;
  return true;
}

void EvidenceBans::Retain(const std::function<bool(const common::NodeId&)>& keep) {
  std::vector<common::NodeId> ids;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, by] : adopted_) ids.push_back(id);
  }
  std::vector<common::NodeId> gone;
  for (const common::NodeId& id : ids) {  // outside the lock: `keep` may take a view's
    if (!keep(id)) gone.push_back(id);
  }
  if (gone.empty()) return;
  absl::MutexLock lock(&mu_);
  for (const common::NodeId& id : gone) adopted_.erase(id);
  ++generation_;
}

EvidencedBans EvidenceBans::adopted() const {
  absl::MutexLock lock(&mu_);
  return adopted_;
}

bool EvidenceBans::Has(const common::NodeId& accused) const {
  absl::MutexLock lock(&mu_);
  return adopted_.count(accused) > 0;
}

uint64_t EvidenceBans::generation() const {
  absl::MutexLock lock(&mu_);
  return generation_;
}

bool EvidenceFetchPacer::TryStart(const common::NodeId& accuser, const common::NodeId& accused,
                                  absl::Duration now) {
  absl::MutexLock lock(&mu_);
  if (outstanding_ >= options_.max_outstanding) return false;
  const std::pair<common::NodeId, common::NodeId> key{accuser, accused};
  auto it = last_.find(key);
  if (it != last_.end()) {
    if (now - it->second < options_.period) return false;
    it->second = now;
  } else {
    if (last_.size() >= options_.max_pairs) {
      for (auto old = last_.begin(); old != last_.end();) {
        old = now - old->second >= options_.period ? last_.erase(old) : std::next(old);
      }
      if (last_.size() >= options_.max_pairs) return false;
    }
    last_.emplace(key, now);
  }
  ++outstanding_;
  return true;
}

void EvidenceFetchPacer::Done() {
  absl::MutexLock lock(&mu_);
  outstanding_ = std::max(0, outstanding_ - 1);
}

int EvidenceFetchPacer::outstanding() const {
  absl::MutexLock lock(&mu_);
  return outstanding_;
}

}  // namespace skipswarm::node
