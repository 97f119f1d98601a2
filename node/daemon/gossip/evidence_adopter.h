// Adopting bans on served evidence (Note [Evidence bans] in
// node/stage/evidence_bans.h): looks at the live members' published bans,
// asks an accuser for its evidence where the quorum has not adopted a ban
// of a live member (a newcomer, or a trusted member, against which only a
// false-input proof convicts), checks each piece (JudgeServedPiece) and
// adopts the ban into EvidenceBans, which routing and averaging read
// through VerifyQuorumBans.
//
//   EvidenceAdopter adopter(options, &evidence_bans, clock);
//   adopter.Consider(routing_members, own_bans);   // cheap: queues fetches
//   ... the worker fetches, checks, adopts ...
//
// Consider never touches the network: fetches run on the adopter's worker
// (or, with options.worker = false, in RunQueued: tests), paced by
// EvidenceFetchPacer (once per (accuser, accused) per period, at most
// max_outstanding queued or running).
//
// Thread rule: thread-safe. Borrows `bans` and `clock` (they outlive it).
#ifndef SKIPSWARM_NODE_DAEMON_GOSSIP_EVIDENCE_ADOPTER_H_
#define SKIPSWARM_NODE_DAEMON_GOSSIP_EVIDENCE_ADOPTER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "common/job_worker.h"
#include "common/node_id.h"
#include "node/compute/evidence.h"
#include "node/stage/evidence_bans.h"
#include "node/stage/swarm_view.h"

namespace skipswarm::node {

struct EvidenceAdopterOptions {
  common::NodeId self;
  EvidenceLookup lookup;                  // required
  SketchLimits limits;
  EvidenceJudge judge;                    // required (CheckOutputAgainstSketch)
  model::SketchCheckOptions check;
  EvidenceFetchPacerOptions pacer;
  // accuser's pieces against accused, fetched from its address (the
  // daemon: FetchEvidence, evidence_service.h). Required.
  std::function<absl::StatusOr<std::vector<Evidence>>(
      const common::NodeId& accuser, const std::string& address, const common::NodeId& accused)>
      fetch;
  // False: no thread; RunQueued runs the queued fetches (tests).
  bool worker = true;
};

struct EvidenceAdoptionCounts {
  int64_t fetches = 0;
  int64_t fetch_failures = 0;      // the fetch failed (NOT_FOUND, quota, network)
  std::map<std::string, int64_t> pieces;  // checked pieces by PieceVerdictName
  int64_t adopted = 0;
};

class EvidenceAdopter {
 public:
  EvidenceAdopter(EvidenceAdopterOptions options, EvidenceBans* bans, common::Clock* clock);
  EvidenceAdopter(const EvidenceAdopter&) = delete;
  EvidenceAdopter& operator=(const EvidenceAdopter&) = delete;

  // `live`: the live members as this member's view shows them (with their
  // bans, probation and addresses); `distrusted`: this member's own bans.
  // Forgets evidence bans of members gone from `live`, and queues a fetch
  // for each ban of a live member, trusted or not, that neither the quorum
  // nor an evidence ban holds, as the pacer allows. Never blocks on the
  // network.
  void Consider(const std::vector<PeerInfo>& live, const std::set<common::NodeId>& distrusted);
  // options.worker == false: runs the queued fetches on this thread.
  void RunQueued();
  EvidenceAdoptionCounts counts() const;

 private:
  struct Job {
    common::NodeId accuser;
    std::string address;
    common::NodeId accused;
  };
  void Run(const Job& job);

  const EvidenceAdopterOptions options_;
  EvidenceBans* const bans_;
  common::Clock* const clock_;
  EvidenceFetchPacer pacer_;
  mutable absl::Mutex mu_;
  EvidenceAdoptionCounts counts_ ABSL_GUARDED_BY(mu_);
  // The pacer bounds the queued fetches. Last: stops before the above go.
  common::JobWorker<Job> worker_;
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_GOSSIP_EVIDENCE_ADOPTER_H_
