#include "node/daemon/gossip/evidence_adopter.h"

#include <limits>
#include <utility>

#include "glog/logging.h"
#include "node/stage/verify_trust.h"

namespace skipswarm::node {

EvidenceAdopter::EvidenceAdopter(EvidenceAdopterOptions options, EvidenceBans* bans,
                                 common::Clock* clock)
    : options_(std::move(options)),
      bans_(bans),
      clock_(clock),
      pacer_(options_.pacer),
      worker_([this](Job& job) { Run(job); }, std::numeric_limits<size_t>::max(),
              options_.worker) {}

void EvidenceAdopter::Consider(const std::vector<PeerInfo>& live,
                               const std::set<common::NodeId>& distrusted) {
  std::map<common::NodeId, const PeerInfo*> by_id;
  for (const PeerInfo& p : live) by_id.emplace(p.id, &p);
  // Note [Evidence bans]: gone from the view, gone from the bans.
  bans_->Retain([&](const common::NodeId& id) { return by_id.count(id) > 0; });
  const std::map<common::NodeId, std::vector<common::NodeId>> held =
      VerifyQuorumBans(options_.self, live, distrusted, bans_->adopted());
  const absl::Duration now = clock_->SteadyNow();
  std::vector<Job> queued;
  for (const auto& [accuser_id, accuser] : by_id) {
    if (accuser_id == options_.self || distrusted.count(accuser_id) > 0) continue;
    if (accuser->address.empty()) continue;
    for (const common::NodeId& accused : accuser->bans) {
      if (accused == options_.self || accused == accuser_id || held.count(accused) > 0 ||
          distrusted.count(accused) > 0) {
        continue;
      }
      // Note [Evidence bans]: trusted or not. Against a trusted X a piece
      // convicts only as a false-input proof (JudgeServedPiece stops a
      // sketch mismatch at kTrustedAccused), which no catcher can forge.
      if (by_id.count(accused) == 0) continue;
      if (!pacer_.TryStart(accuser_id, accused, now)) continue;
      queued.push_back({accuser_id, accuser->address, accused});
    }
  }
  for (Job& job : queued) {
    if (!worker_.Push(std::move(job))) pacer_.Done();
  }
}

void EvidenceAdopter::RunQueued() { worker_.RunQueued(); }

void EvidenceAdopter::Run(const Job& job) {
  absl::StatusOr<std::vector<Evidence>> pieces =
      options_.fetch(job.accuser, job.address, job.accused);
  std::vector<PieceVerdict> verdicts;
  bool adopted = false;
  bool proven = false;
  if (pieces.ok()) {
    for (const Evidence& piece : *pieces) {
      const PieceVerdict v = JudgeServedPiece(piece, job.accused, options_.lookup,
                                              options_.limits, options_.judge, options_.check);
      verdicts.push_back(v);
      if (Convicts(v)) {
        proven = v == PieceVerdict::kProvenFalseInput;
        adopted = bans_->Adopt(job.accused, job.accuser, proven);
        break;  // one valid piece is enough
      }
    }
  } else {
    VLOG(1) << "no evidence against " << job.accused.ShortString() << " from "
            << job.accuser.ShortString() << ": " << pieces.status();
  }
  if (adopted) {
    LOG(WARNING) << "adopting the output checks' ban of " << job.accused.ShortString()
                 << " on evidence served by " << job.accuser.ShortString()
                 << " (Note [Evidence bans]): "
                 << (proven ? "it signed an input hash other than the hop before's signed output"
                            : "its signed output disagrees with a trusted replica's signed sketch");
  }
  pacer_.Done();
  absl::MutexLock lock(&mu_);
  ++counts_.fetches;
  if (!pieces.ok()) ++counts_.fetch_failures;
  for (PieceVerdict v : verdicts) ++counts_.pieces[PieceVerdictName(v)];
  if (adopted) ++counts_.adopted;
}

EvidenceAdoptionCounts EvidenceAdopter::counts() const {
  absl::MutexLock lock(&mu_);
  return counts_;
}

}  // namespace skipswarm::node
