// The chaos agent of `skipswarm local --local_chaos_seed=N` (the chaos soak,
// tools/experiments/chaos_soak.sh): at seeded random moments it SIGKILLs a
// non-data node (never more than a fraction of them dead at once), starts a
// replacement for the same stage a little later (a joiner, Note [Entry
// iteration]) or restarts the killed node itself (Note [Restart on own
// disk]), and stalls a member with SIGSTOP, resuming it with SIGCONT after a
// while (Note [Silent members]). The decisions are here; the launcher
// carries them out on its node processes.
//
// Note [Restart on own disk]: what a volunteer's service manager does after
// a crash is start the same node again: its identity, its config, its
// checkpoint folder, from wherever its last checkpoint left it while the
// swarm went on. A joiner (a new identity, no state) is the other path
// back. With `restart_every` = N, every Nth kill's respawn is the victim
// itself; the others stay joiners, so one soak exercises both.
//
// Note [Survivable chaos]: the agent never kills a stage's last serving
// replica. The soak measures how the swarm rides out the faults it is built
// to survive (a replica lost while another serves its stage, a stalled
// member, a capped link); taking a stage's last replica is a stage loss,
// which the launcher's restore from a checkpoint generation (Note [Local
// stage restore]) and its restore budget answer, and which the lost-disks
// drill measures on its own. Killing it at random made the soak's outcome a
// question of that budget (every loss a restore, the run stopped once it
// ran out) instead of the swarm's behaviour. A replica serves once it has
// trained an iteration (a replacement still joining does not, a stalled
// one does not while stopped): a kill needs another serving, unstalled
// replica of the victim's stage. A stall may still hit a stage's last
// replica: training waits for it, which is survivable.
//
// Note [Chaos waits for progress]: while the swarm reports no new iteration
// for `hold_after` (a stalled last replica, a restore, a member coming
// back), kills and stalls due are held: postponed by a fresh interval and
// counted (held()). The soak measures how the swarm recovers from each
// fault, not what a pile of faults on a swarm that has not recovered yet
// does; before, kills went on at their pace while nothing trained.
// Replacements and resumes are never held (they are the recovery). The
// launcher tells the agent of each new iteration (SwarmAdvanced).
//
//   LocalChaos chaos(options, clock->SteadyNow());
//   for (const ChaosAction& a : chaos.Step(clock->SteadyNow(), nodes)) ...
//
// Thread rule: thread-compatible (the launcher's loop).
#ifndef SKIPSWARM_LAUNCHER_LOCAL_CHAOS_H_
#define SKIPSWARM_LAUNCHER_LOCAL_CHAOS_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace skipswarm::launcher {

struct ChaosOptions {
  uint64_t seed = 1;
  absl::Duration kill_every = absl::Seconds(20);   // mean time between kills
  absl::Duration respawn_after = absl::Seconds(5); // a killed node's replacement starts
  absl::Duration stall_every = absl::Seconds(30);  // mean time between stalls
  absl::Duration stall_for = absl::Seconds(5);     // SIGSTOP .. SIGCONT
  double max_dead_fraction = 0.5;                  // of the non-data slots
  // Note [Chaos waits for progress]: no kill or stall while no iteration
  // was reported for this long.
  absl::Duration hold_after = absl::Seconds(10);
  // Note [Restart on own disk]: every Nth kill is answered by restarting the
  // victim itself instead of a joiner; 0: always a joiner.
  int restart_every = 0;
};

// A non-data node the launcher runs.
struct ChaosNode {
  std::string name;
  int stage = -1;
  bool live = false;
  // Trains its stage now (Note [Survivable chaos]): a layout node while it
  // runs, a replacement once it reported an iteration.
  bool serving = true;
};

struct ChaosAction {
  enum Kind { kKill, kStall, kResume, kRespawn };
  Kind kind;
  // kKill, kStall, kResume: the node; kRespawn: empty for a new joiner, the
  // killed node's name to restart it on its own disk (Note [Restart on own
  // disk]).
  std::string name;
  int stage = -1;    // kRespawn: the stage its replacement hosts
};

class LocalChaos {
 public:
  // `slots`: the non-data nodes of the layout (the dead limit's base).
  LocalChaos(ChaosOptions options, int slots, absl::Duration now);

  // What to do at `now` with `nodes`, the live and dead non-data nodes.
  std::vector<ChaosAction> Step(absl::Duration now, const std::vector<ChaosNode>& nodes);
  // The swarm reported a new iteration at `now` (Note [Chaos waits for
  // progress]).
  void SwarmAdvanced(absl::Duration now) { advanced_ = now; }
  // The swarm was restored (every node restarted): no pending respawns,
  // nothing stalled; it counts as advancing at `now`.
  void Reset(absl::Duration now);
  // The node stalled now, if any (to resume it before the run ends).
  const std::string& stalled() const { return stalled_; }

  int kills() const { return kills_; }
  int stalls() const { return stalls_; }
  int respawns() const { return respawns_; }
  // Of the respawns, those that restarted the killed node itself.
  int restarts() const { return restarts_; }
  // Kills due that found no victim: every live node was its stage's last
  // serving replica (Note [Survivable chaos]) or stalled.
  int spared() const { return spared_; }
  // Kills and stalls due while the swarm was not advancing.
  int held() const { return held_; }

 private:
  absl::Duration Jittered(absl::Duration mean);

  const ChaosOptions options_;
  const int slots_;
  std::mt19937_64 random_;
  absl::Duration next_kill_, next_stall_;
  struct Pending {
    absl::Duration at;
    int stage;
    std::string restart;  // Note [Restart on own disk]: the victim, or empty
  };
  std::vector<Pending> respawns_pending_;
  std::string stalled_;
  absl::Duration resume_at_;
  absl::Duration advanced_;
  int kills_ = 0, stalls_ = 0, respawns_ = 0, restarts_ = 0, spared_ = 0, held_ = 0;
};

}  // namespace skipswarm::launcher

#endif  // SKIPSWARM_LAUNCHER_LOCAL_CHAOS_H_
