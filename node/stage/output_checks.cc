#include "node/stage/output_checks.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"

namespace skipswarm::node {

OutputChecks::OutputChecks(OutputChecksOptions options) : options_(std::move(options)) {}

std::optional<model::SketchVerdict> OutputChecks::OnOutput(const CheckedVisit& visit,
                                                           const WireTensor& received,
                                                           common::NodeId* sketch_from,
                                                           const proto::OutputCommitment* commitment,
                                                           const proto::OutputCommitment* input_commitment) {
  absl::MutexLock l(&mu_);
  if (any_ended_ && visit.iteration <= ended_) return std::nullopt;
  auto s = sketches_.find(visit);
  if (s != sketches_.end()) {
    Pending p = std::move(s->second);
    sketches_.erase(s);
    ForgetSketchFrom(p.from);
    if (sketch_from != nullptr) *sketch_from = p.from;
    Kept kept{received, std::nullopt, std::nullopt};
    if (commitment != nullptr) kept.commitment = *commitment;
    if (input_commitment != nullptr) kept.input_commitment = *input_commitment;
    return Judge(visit, kept, p.from, p);
  }
  if (options_.max_kept_outputs < 1 || outputs_.contains(visit)) return std::nullopt;
  // output_order_ names exactly the kept outputs, oldest first.
  while (static_cast<int>(outputs_.size()) >= options_.max_kept_outputs &&
         !output_order_.empty()) {
    outputs_.erase(output_order_.front());
    output_order_.pop_front();
    ++stats_.outputs_dropped;
  }
  Kept kept{received, std::nullopt, std::nullopt};  // shares the payload's Cord
  if (commitment != nullptr) kept.commitment = *commitment;
  if (input_commitment != nullptr) kept.input_commitment = *input_commitment;
  outputs_.emplace(visit, std::move(kept));
  output_order_.push_back(visit);
  return std::nullopt;
}

std::optional<model::SketchVerdict> OutputChecks::OnAnswer(const common::NodeId& from,
                                                           SketchAnswer answer,
                                                           const proto::SketchAnswer* signed_answer) {
  absl::MutexLock l(&mu_);
  const CheckedVisit& visit = answer.visit;
  if (any_ended_ && visit.iteration <= ended_) return std::nullopt;
  auto o = outputs_.find(visit);
  if (o != outputs_.end()) {
    Kept kept = std::move(o->second);
    outputs_.erase(o);
    output_order_.erase(std::find(output_order_.begin(), output_order_.end(), visit));
    Pending p{from, std::move(answer.sketch), std::nullopt};
    if (signed_answer != nullptr) p.signed_answer = *signed_answer;
    return Judge(visit, kept, from, p);
  }
  auto mine = sketches_by_sender_.find(from);
  if (sketches_.contains(visit) ||
      static_cast<int>(sketches_.size()) >= options_.max_pending_sketches ||
      (mine != sketches_by_sender_.end() && mine->second >= options_.max_pending_per_sender)) {
    ++stats_.sketches_refused;
    return std::nullopt;
  }
  ++sketches_by_sender_[from];
  Pending p{from, std::move(answer.sketch), std::nullopt};
  if (signed_answer != nullptr) p.signed_answer = *signed_answer;
  sketches_.emplace(visit, std::move(p));
  return std::nullopt;
}

void OutputChecks::ForgetSketchFrom(const common::NodeId& from) {
  auto it = sketches_by_sender_.find(from);
  if (it != sketches_by_sender_.end() && --it->second <= 0) sketches_by_sender_.erase(it);
}

std::optional<model::SketchVerdict> OutputChecks::Judge(const CheckedVisit& visit,
                                                        const Kept& output,
                                                        const common::NodeId& from,
                                                        const Pending& pending) {
  absl::StatusOr<model::SketchVerdict> v =
      options_.judge ? options_.judge(output.received, pending.sketch, options_.check)
                     : absl::FailedPreconditionError("no judge set");
  if (!v.ok()) {
    // OutputJudge: "sketch: ..." names the sketch (the sender's fault);
    // anything else is X's output failing to decode.
    if (absl::StartsWith(v.status().message(), "sketch")) {
      ++stats_.by_member[from].bad_sketches;
    } else {
      ++stats_.by_member[visit.checked].undecodable;
    }
    return std::nullopt;
  }
  MemberCheckCounts& x = stats_.by_member[visit.checked];
  ++x.checks;
  if (!v->match) ++x.mismatches;
  // Note [Checkable evidence]: a mismatch both sides signed is kept as
  // evidence; unsigned ones (older peers) stay this node's word only.
  if (!v->match && output.commitment.has_value() && pending.signed_answer.has_value() &&
      !pending.signed_answer->signature().empty()) {
    KeepEvidence(visit.checked, Evidence{*output.commitment, output.received.payload,
                                         *pending.signed_answer, output.input_commitment});
  }
  return *std::move(v);
}

void OutputChecks::KeepEvidence(const common::NodeId& member, Evidence evidence) {
  auto it = evidence_.find(member);
  if (it == evidence_.end()) {
    if (static_cast<int>(evidence_.size()) >= options_.max_evidence_members ||
        options_.max_evidence_per_member < 1) {
      return;
    }
    it = evidence_.emplace(member, std::deque<Evidence>()).first;
  }
  it->second.push_back(std::move(evidence));
  while (static_cast<int>(it->second.size()) > options_.max_evidence_per_member) {
    it->second.pop_front();
  }
}

void OutputChecks::KeepProvenPiece(const common::NodeId& member, Evidence piece) {
  absl::MutexLock l(&mu_);
  KeepEvidence(member, std::move(piece));
}

std::vector<Evidence> OutputChecks::EvidenceAgainst(const common::NodeId& member) const {
  absl::MutexLock l(&mu_);
  auto it = evidence_.find(member);
  if (it == evidence_.end()) return {};
  return std::vector<Evidence>(it->second.begin(), it->second.end());
}

void OutputChecks::EndIteration(uint64_t iteration) {
  absl::MutexLock l(&mu_);
  if (!any_ended_ || iteration > ended_) ended_ = iteration;
  any_ended_ = true;
  for (auto it = outputs_.begin(); it != outputs_.end();) {
    if (it->first.iteration <= ended_) {
      ++stats_.expired;
      outputs_.erase(it++);
    } else {
      ++it;
    }
  }
  for (auto it = sketches_.begin(); it != sketches_.end();) {
    if (it->first.iteration <= ended_) {
      ++stats_.expired;
      ForgetSketchFrom(it->second.from);
      sketches_.erase(it++);
    } else {
      ++it;
    }
  }
  output_order_.erase(std::remove_if(output_order_.begin(), output_order_.end(),
                                     [&](const CheckedVisit& v) ABSL_EXCLUSIVE_LOCKS_REQUIRED(
                                         mu_) { return !outputs_.contains(v); }),
                      output_order_.end());
}

OutputCheckStats OutputChecks::stats() const {
  absl::MutexLock l(&mu_);
  OutputCheckStats s = stats_;
  s.kept_outputs = static_cast<int>(outputs_.size());
  s.pending_sketches = static_cast<int>(sketches_.size());
  return s;
}

}  // namespace skipswarm::node
