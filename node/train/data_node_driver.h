// DataNodeDriver: runs a data node's side of one iteration (docs/DESIGN.md §1):
// plans the routes of its M micro-batches, injects them into the local
// StageServer as memory slots allow, collects each MB's loss at the tail and
// its end (backward done, or dropped), and reports the iteration.
//
//   DataNodeDriver driver(&server, &clock, &view, &planner, &data, options);
//   server.SetOriginListener(&driver);
//   driver.RunIteration(it, [](IterationReport r) { LOG(INFO) << r.loss; });
//
// Never hangs: every MB has a deadline (Note [MB deadline]); when it passes,
// the MB is abandoned and counted as dropped.
//
// Note [Paused training]: when the planner cannot plan the iteration (a
// stage has no live replica), the iteration does not fail at once (that was
// a busy loop of empty iterations): the driver pauses, re-plans the same
// iteration after a back-off with jitter (options.pause_backoff, seeded by
// options.seed, timed by the injected clock) and logs one line when it
// pauses, when the reason changes and when it resumes. paused() says why
// (the daemon's health reports NOT_SERVING with it). Cancel() ends a paused
// iteration with CANCELLED, so a stop never waits for a replica to return.
//
// Note [Refused iterations]: an iteration in which nothing completed and
// every micro-batch was dropped at once by a server's report (a refused or
// unrepairable hop, a relay's abort notice; none lost at the deadline,
// none re-run as stopping) on a route through the only planned replica of
// a stage (in the view the iteration was planned on), right after one that
// ended the same way, is not reported as a finished empty iteration: that
// stage cannot serve (its only replica is behind the swarm, Note [Behind
// the swarm] in node/stage/stage_server.h: a stalled member back from a
// SIGSTOP; or stalled, or gone where our view has not seen it yet) and the
// planner has nothing else to route through. Reported, such iterations
// followed one another in milliseconds: a swarm burned its remaining
// iterations empty before the stalled member's behind check ran. The first
// such iteration is still reported (one lost frame, or a relay that moved
// ahead with the only micro-batch in flight, is a drop like any other);
// from the second in a row, the driver pauses as in Note [Paused training]
// (reason UNAVAILABLE naming the last replicas, same back-off, Cancel()
// ends it) and re-runs the same iteration after the back-off under fresh
// ids (each hop refuses a second frame of an id it saw). A plan alone does
// not end that pause (it plans through the same replica); the first
// completed micro-batch does. The refusal's cause is not needed: an abort
// notice carries none for a "behind" refusal, and whatever the cause,
// every route was refused at once through a replica nothing could route
// around.
//
// Note [MB deadline]: max(min_deadline, deadline_factor x the slowest MB
// round trip (inject -> backward done) seen in the previous iteration, an
// MB abandoned at its deadline counting as that long, but never longer
// than the healthy deadline); the first iteration uses the start deadline
// (below: initial_deadline unless the plan needs more).
// The round trip includes queueing, so the deadline adapts to load and
// link speed without fixed constants. Only the driver's own deadline makes
// an abandoned MB a sample: an MB the server reports dropped (a relay's
// notice, Note [Relay drops] in node/stage/stage_server.cc; a refused or
// unanswered hop) ends at once, counted by its cause, and says nothing
// about how long a healthy one takes; an iteration with no sample keeps
// the previous deadline.
// The healthy deadline is the one the completed MBs alone give: max(
// min_deadline, deadline_factor x the slowest completed round trip of the
// last iteration that completed one), the start deadline before any. An
// abandoned MB was slow or lost, and the driver cannot tell which: a relay
// that admitted it and hangs (a stalled process, SIGSTOP) sends nothing.
// Counting it as lasting its whole deadline grew the deadline x
// deadline_factor per silent iteration without bound (5 s, 20 s, 80 s ...
// while the relay stayed routed; node/train/README.md). Capped, silent
// losses lengthen the deadline one step, to deadline_factor x the healthy
// one, and no further while they last less than silent_iterations_per_step
// iterations in a row; that step is what lets routes that became slower
// than the deadline (a replica died, the rest is far away) complete again.
// Each further silent_iterations_per_step silent iterations in a row widen
// the cap one more deadline_factor step (up to the start deadline): routes
// that became far slower than the last completed round trip (a machine
// under a sudden heavy load) still get a deadline they can meet, after
// ~8, 16, ... iterations rather than at once, while a hung relay is
// declared DEAD by gossip within seconds and routed around long before.
// The first completed MB brings the deadline back to what it measures.
// No deadline exceeds max(the start deadline, min_deadline), the ceiling:
// a completed round trip set the next deadline to deadline_factor x it
// with no bound, so an MB held at a relay by some other wait (a stalled
// peer, a stage held up around a joiner's entry) that completed just under
// the deadline it had made the next one deadline_factor times that, and a
// lost MB of the next iteration waited it out: waits chained into one
// longer than any stated deadline (the chaos soak's 314.7 s right after a
// ~71 s iteration, node/daemon/chaos_soak.md).
// Held to the ceiling, a held-but-completed MB costs the next iteration at
// most the start deadline, and a route slower than that gets no deadline
// it meets.
// The start deadline follows the plan: max(initial_deadline,
// PlannedDeadline), deadline_factor x the slowest round trip the planner
// predicts for the routes of the latest iteration's plan
// (PlannedRoute::predicted_round_trip; the scheduler planner's evaluator
// costs each route from the view's measured links and compute, queueing
// included), set when an iteration is planned. With a fixed start,
// a swarm over slow home uplinks (64 MiB activations at 2.5 MB/s: ~27 s a
// hop, ~270 s a 6-stage round trip) had every MB dropped at 120 s,
// forever. A fast swarm's predictions are far under initial_deadline /
// deadline_factor, and a planner that cannot predict leaves them unset:
// both keep initial_deadline, as before. A prediction is built from
// peers' claimed measurements, so each is capped at max(initial_deadline,
// min_deadline) (the ceiling a start-up deadline had): no deadline exceeds
// deadline_factor x that (480 s by default; routes up to that long
// complete), which is the per-MB deadline MaxHonestIterationBound
// (silent_deadline.h) already allows, so an honest statement
// (NextIterationBound: this deadline x (waves + 1)) stays within the
// replica group's cap and a hostile view cannot make any wait unbounded.
// A statement made from a planned deadline counts whole under Note
// [Stated pace] when the routes took about what was predicted (its spans
// are at least the round trips, and the pace factor is deadline_factor x
// (M + 1)); one from a prediction far above what the routes take may be
// counted less, as a hung data node's would. A statement comes from the
// plan of the iteration just run; a next plan predicting slower routes
// gives a deadline above it (never above the group's cap), which the
// group's kStatedBoundFactor margin covers up to twice. The first
// iteration's plan follows no statement (the group's unstated rule).
// Routing around a silent relay is not the deadline's job: gossip marks it
// SUSPECT, then DEAD, and the planner leaves it out; until then new frames
// to a stopped relay miss their hop deadline and are re-routed (Note [Hop
// failures] in node/stage/stage_server.h). A relay that still acks and
// answers gossip while its compute hangs stays in every view: the driver
// attributes its MBs abandoned at the deadline to the relays on their
// planned routes and leaves a relay that loses them iteration after
// iteration out of its own plans for a back-off (Note [Silent relay
// exclusion] in node/train/silent_loss_tracker.h).
//
// Note [Stopping drops]: a micro-batch a stopping node refused (Note
// [Stopping refusals] in node/stage/stage_server.h: planned through it
// before its stopping record or LEFT reached this node, and no other
// replica could take it) is neither counted as dropped nor as trained.
// The driver marks that node as stopping after its last iteration, as its
// record would (no plan of a later iteration routes through it, for
// options.stopping_mark or until this driver is destroyed), and re-runs
// the micro-batch under a fresh id (above every id of the iteration's
// plan: each hop refuses a second frame of an id it saw) with the same
// data: through another replica when the re-plan finds one, otherwise the
// iteration pauses there (Note [Paused training]: back-off, paused(), one
// log line) with the micro-batch waiting, and ends only once it ran.
// Micro-batches of the iteration that completed stay counted; a refused
// one computed nothing anywhere (its visits were dropped before any
// backward). Only a cause naming a relay of the micro-batch's planned
// route is taken, and a micro-batch is re-run at most max_stopping_reruns
// times; beyond that, or on Cancel() while it waits, it is counted as
// dropped ("stopping").
//
// Note [Confirmed stopping]: the cause is a claim (Note [Stopping
// refusals] in node/stage/stage_server.h): every relay between the refusal
// and this node passes it on, and a hostile one can write a cause naming
// any hop of the route, which would keep an honest node out of this
// driver's plans for stopping_mark (or pause it, for a stage's last
// replica). So a claim is taken as above only when the named node said it
// itself (this node's own forward was refused by it, or its own notice
// brought the cause) or when its own signed record in the view says
// stopping, or LEFT (a replica that stops where another stays signs LEFT
// with its exit iteration, not stopping), with a last iteration before the
// micro-batch's (SwarmView::StopAfter); the mark then holds the record's last
// iteration, not the claim's. Any other claim is held with its
// micro-batch: the stopping node signs its record before its server
// refuses anything (node/daemon/gossip/gossip_daemon_run.cc), but the
// refusal may overtake the record's gossip, so the view is asked again
// every stopping_confirm_poll. Confirmed, the micro-batch is re-run as
// above; still unconfirmed after the micro-batch deadline (as long as the
// relay could have held the micro-batch anyway), it is an ordinary drop
// ("stopping_unconfirmed", counted in stopping_claims_unconfirmed and
// logged with the peer that delivered the claim) and nothing is excluded.
// The peer that delivered it may only have passed on another relay's lie.
// A mark ends early when its node is back. It is tied to the node's
// record: the mark holds the incarnation (SwarmView::Incarnation) of the
// node's view record when the mark was taken, raised to that of any later
// record seen saying stopping or LEFT (SwarmView::StopAfter). When a later
// plan finds the node alive with a record of a higher incarnation that says
// neither, the mark is dropped before that plan, and the view's own rules
// (entry iteration, `entering`) decide from then on when it is routed. A
// stopping node signs its stopping record before its server refuses
// anything and says stopping or LEFT until its process ends; only a record
// it signs later (a daemon restarted under the same key, an update) says
// neither, and the view keeps the newest record of each id, so neither a
// relay nor a replay can lift a mark. This holds for a mark taken on the
// node's own word before its stopping record arrived, too: that record,
// when it comes, is newer than the one held at the refusal but says
// stopping, so it only raises the mark's incarnation; a restart that
// overtakes it ends the mark at once instead of after stopping_mark. One
// race is left: a record the node signed before its stopping one, still
// on its way at the refusal, ends such a mark if it arrives alone; the
// node then refuses again on its own word and is marked again (one more
// re-run). A view that holds no record of the node (static lists, the
// simulator) ends no mark early.
//
// Thread rule: thread-safe; `done` runs once, never inline, with no lock held.
// The server, clock, view, planner and data source must outlive it.
// Destruction waits for a deadline callback running on the clock's thread
// (common::LifetimeGuard); later ones do nothing. The server's owner unsets
// the origin listener before destroying the driver
// (StageServer::SetOriginListener waits for a listener call in progress).
#ifndef SKIPSWARM_NODE_TRAIN_DATA_NODE_DRIVER_H_
#define SKIPSWARM_NODE_TRAIN_DATA_NODE_DRIVER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/backoff.h"
#include "common/clock.h"
#include "common/lifetime_guard.h"
#include "node/stage/stage_server.h"
#include "node/train/data_source.h"
#include "node/train/route_planner.h"
#include "node/train/silent_loss_tracker.h"

namespace skipswarm::node {

struct DriverOptions {
  int mbs_per_iteration = 4;  // M
  int num_stages = 1;         // S
  absl::Duration initial_deadline = absl::Seconds(120);
  absl::Duration min_deadline = absl::Seconds(5);
  double deadline_factor = 4.0;
  // Note [MB deadline]: silent iterations in a row per widening step of
  // the cap on a silent loss's sample; <= 0: never widen.
  int silent_iterations_per_step = 8;
  // Note [Silent relay exclusion] (its back-offs drawn from `seed`).
  SilentLossOptions silent_relay;
  // Note [Paused training].
  common::BackoffOptions pause_backoff;
  uint64_t seed = 1;
  // Note [Stopping drops]: how long a stopping refusal keeps its node out
  // of this driver's plans (its record or LEFT reaches the view meanwhile),
  // and how often one micro-batch is re-run after such refusals.
  absl::Duration stopping_mark = absl::Minutes(2);
  int max_stopping_reruns = 3;
  // Note [Confirmed stopping]: how often the view is asked again about a
  // held claim.
  absl::Duration stopping_confirm_poll = absl::Milliseconds(500);
  // Called with the reason when training pauses or the reason changes, and
  // with OK when it resumes; on the clock's thread, no lock held.
  std::function<void(const absl::Status&)> on_pause_change;
};

struct IterationReport {
  uint64_t iteration = 0;
  absl::Status status;   // planning / data errors; drops are not errors
  double loss = 0;       // mean loss of the MBs that finished (NaN if none)
  int completed = 0;
  int dropped = 0;
  // Dropped MBs by cause: "mb_deadline" (Note [MB deadline]),
  // "lost_downstream" (aborted by a hop after this node), "unrepairable"
  // (the next hop failed and no re-route was possible), "error".
  std::map<std::string, int> dropped_by_reason;
  // Completed MBs by the shape of the route they took (Note [Route
  // shapes]): "in_order", "skip", "swap", "skip_swap".
  std::map<std::string, int> completed_by_route;
  // Micro-batches re-run after a stopping node refused them (Note
  // [Stopping drops]); each counts once, under completed or dropped, as
  // its last run ended.
  int rerun = 0;
  // Stopping claims the view never confirmed (Note [Confirmed stopping]);
  // each dropped as "stopping_unconfirmed".
  int stopping_claims_unconfirmed = 0;
  int64_t tokens = 0;    // tokens of the completed MBs
  // Relays this iteration's silent losses excluded from this data node's
  // plans (Note [Silent relay exclusion]).
  int relays_excluded = 0;
  absl::Duration elapsed;
};

// Note [Route shapes]: a micro-batch's route (the stages its forward
// visited, repairs included, as its tail saw them) "skips" when it visited
// fewer than the S-1 non-data stages and "swaps" when it visited them out
// of stage order (only skip routes may swap, Note [Full routes stay in
// order] in scheduler_planner.cc): "in_order", "skip", "swap" or
// "skip_swap". The status page and /metrics show the recent rates.
const char* RouteShapeOf(const std::vector<int>& stages, int num_stages);

// Note [MB deadline]: deadline_factor x the slowest predicted round trip
// of `routes` (PlannedRoute::predicted_round_trip), each capped at
// max(initial_deadline, min_deadline); zero when none predicts.
absl::Duration PlannedDeadline(const std::vector<PlannedRoute>& routes,
                               const DriverOptions& options);

class DataNodeDriver final : public OriginListener {
 public:
  DataNodeDriver(StageServer* server, common::Clock* clock, const SwarmView* view,
                 RoutePlanner* planner, const DataSource* data, DriverOptions options);
  ~DataNodeDriver() override;

  // REQUIRES: the previous iteration's `done` ran; the server is at
  // `iteration` (BeginIteration).
  void RunIteration(uint64_t iteration, absl::AnyInvocable<void(IterationReport)> done);

  // OK while training; otherwise why the current iteration is paused
  // (Note [Paused training]).
  absl::Status paused() const;
  // Ends a paused iteration at once (its `done` gets CANCELLED); no-op
  // otherwise.
  void Cancel();
  // How many times the planner was asked (for tests and metrics).
  int64_t plan_attempts() const;
  // The deadline an MB injected now gets (Note [MB deadline]).
  absl::Duration mb_deadline() const;
  // Note [Stated bounds] (inproc_group.h): the longest the next iteration
  // may legitimately take, from its start: its MBs' deadline (fixed until
  // this iteration's end) x its waves (ceil(M / memory slots)), plus one
  // more deadline for a re-run or a wave that found a slot taken by relayed
  // traffic. A pause (Note [Paused training]) may outlast it.
  absl::Duration NextIterationBound() const;

  void OnTail(uint64_t iteration, uint64_t mb, double loss) override;
  void OnRoute(uint64_t iteration, uint64_t mb, const std::vector<int>& stages) override;
  void OnFinished(uint64_t iteration, uint64_t mb, const absl::Status& status) override;

 private:
  struct InFlight {
    absl::Duration started;
    common::TimerId deadline = common::kNoTimer;
    double loss = 0;
    bool has_loss = false;
    int64_t tokens = 0;
    const char* route_shape = nullptr;  // from OnRoute
    std::vector<PeerId> relays;  // the planned route's hops after this node
    MicroBatchData data;  // kept for a re-run (Note [Stopping drops])
    int reruns = 0;
  };
  struct Pending {
    uint64_t mb;
    std::vector<RouteHop> route;
    MicroBatchData data;
    int priority = 0;
    int reruns = 0;  // Note [Stopping drops]
  };
  // Note [Stopping drops]: plans the micro-batches waiting for a re-run
  // and injects them, or pauses the iteration.
  void Replan();
  // Note [Confirmed stopping]: a micro-batch whose stopping claim waits for
  // the view.
  struct Held {
    uint64_t mb = 0;
    StoppingCause claim;
    MicroBatchData data;
    int reruns = 0;
    absl::Duration until;  // then dropped
  };
  // Note [Confirmed stopping]: what the view held of a node's own record
  // (SwarmView::Incarnation, then SwarmView::StopAfter).
  struct RecordSeen {
    std::optional<uint64_t> incarnation;
    std::optional<uint64_t> stop_after;
  };
  // Asks the view (its own lock: call without ours). The incarnation is
  // read first, so it is never newer than the record stop_after came from.
  RecordSeen ReadRecord(const PeerId& node) const;
  // Whether `claim`, refusing a micro-batch of `iteration`, is the named
  // node's own word or confirmed by `record` (its view record's stop_after;
  // then stop_after becomes the record's).
  static bool ConfirmClaim(StoppingCause* claim, std::optional<uint64_t> record,
                           uint64_t iteration);
  // Marks the claim's node stopping and queues the micro-batch's re-run.
  // `record`: the node's view record when it was read.
  void RerunLocked(uint64_t iteration, uint64_t mb, const StoppingCause& claim,
                   const RecordSeen& record, MicroBatchData data, int reruns)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Note [Confirmed stopping]: drops the marks of nodes back with a newer
  // record (asks the view without our lock; call before planning).
  void EndReturnedMarks();
  // Asks the view again about the held claims; re-runs or drops them.
  void ConfirmClaims();
  // Drops a held micro-batch as "stopping_unconfirmed" (logged).
  void DropUnconfirmedLocked(uint64_t iteration, const Held& h)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The nodes this driver saw refuse `iteration` as stopping, still marked.
  std::vector<PeerId> StoppingAtLocked(uint64_t iteration) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Note [Paused training]: records `why` as the pause reason; true when
  // the reason changed (the caller logs it and tells on_pause_change).
  bool PauseLocked(const absl::Status& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Clears a pause (logged); true if there was one (tell on_pause_change).
  bool ResumeLocked(uint64_t iteration) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Note [Refused iterations]: turns the running iteration back into a
  // paused, waiting one, re-planned after a back-off; the pause reason if
  // it is new (OK otherwise).
  absl::Status RefusedLocked(uint64_t iteration) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends the running iteration: its report and `done`, to send unlocked.
  void CompleteLocked(IterationReport* report,
                      absl::AnyInvocable<void(IterationReport)>* done)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Plans and starts the waiting iteration, or pauses it.
  void TryStart();
  void InjectMore();
  void OnDeadline(uint64_t iteration, uint64_t mb);
  // Ends `mb` (finished or dropped) and completes the iteration if it was
  // the last. `timed_out`: abandoned at the driver's own deadline (Note [MB
  // deadline]), the only drop that counts as a round-trip sample (capped).
  void End(uint64_t iteration, uint64_t mb, const absl::Status& status, bool timed_out = false);
  // At an iteration's end: feeds its losses to silent_ and logs and counts
  // the relays it excludes (Note [Silent relay exclusion]).
  void ExcludeSilentRelaysLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The MB deadline (Note [MB deadline]), never above CeilingLocked().
  absl::Duration DeadlineLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // max(initial_deadline, planned_deadline_): the deadline before any
  // sample (Note [MB deadline]).
  absl::Duration StartDeadlineLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // max(the start deadline, min_deadline): no measured deadline is longer.
  absl::Duration CeilingLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The deadline the completed MBs alone give (Note [MB deadline]).
  absl::Duration HealthyDeadlineLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The longest an MB abandoned at its deadline counts as (Note [MB
  // deadline]): the healthy deadline, widened by silent_streak_.
  absl::Duration SilentSampleCapLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  StageServer* const server_;
  common::Clock* const clock_;
  const SwarmView* const view_;
  RoutePlanner* const planner_;
  const DataSource* const data_;
  const DriverOptions options_;
  // Deadline timers run OnDeadline only while the driver lives.
  common::LifetimeGuard guard_;

  mutable absl::Mutex mu_;
  // Note [Paused training]: an iteration handed to RunIteration that has
  // not started (planning) or is paused.
  bool waiting_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t waiting_iteration_ ABSL_GUARDED_BY(mu_) = 0;
  absl::AnyInvocable<void(IterationReport)> waiting_done_ ABSL_GUARDED_BY(mu_);
  absl::Status pause_reason_ ABSL_GUARDED_BY(mu_);
  absl::Duration paused_since_ ABSL_GUARDED_BY(mu_);
  common::Backoff backoff_ ABSL_GUARDED_BY(mu_);
  common::TimerId retry_ ABSL_GUARDED_BY(mu_) = common::kNoTimer;
  int64_t plan_attempts_ ABSL_GUARDED_BY(mu_) = 0;
  common::LogLimiter drop_log_ ABSL_GUARDED_BY(mu_){absl::Seconds(10)};
  bool running_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t iteration_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Duration started_ ABSL_GUARDED_BY(mu_);
  std::deque<Pending> pending_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, InFlight> in_flight_ ABSL_GUARDED_BY(mu_);
  IterationReport report_ ABSL_GUARDED_BY(mu_);
  // Note [Silent relay exclusion]: the relays on the planned routes of
  // this iteration's MBs abandoned at the deadline and of its completed ones.
  SilentLossTracker silent_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<PeerId> lost_relays_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<PeerId> completed_relays_ ABSL_GUARDED_BY(mu_);
  // Note [Nothing completed] (silent_loss_tracker.h): the relays on every
  // route lost at the deadline so far (meaningful once lost_any_), and the
  // relays of this iteration's routes that were the last planned replica
  // of a stage.
  bool lost_any_ ABSL_GUARDED_BY(mu_) = false;
  // Note [Refused iterations]: every micro-batch of the running iteration
  // ended so far was refused at once through a stage's last planned
  // replica; the pause is one such (a completed micro-batch ends it); the
  // iteration refused last and the id its next run starts at.
  bool refused_all_ ABSL_GUARDED_BY(mu_) = true;
  int refused_streak_ ABSL_GUARDED_BY(mu_) = 0;  // such iterations reported in a row
  bool pause_refused_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<uint64_t> refused_iteration_ ABSL_GUARDED_BY(mu_);
  uint64_t mb_base_ ABSL_GUARDED_BY(mu_) = 0;
  SilentLossTracker::NothingCompleted nothing_ ABSL_GUARDED_BY(mu_);
  common::LogLimiter exclude_log_ ABSL_GUARDED_BY(mu_){absl::Seconds(10)};
  double loss_sum_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Duration slowest_ ABSL_GUARDED_BY(mu_);  // this iteration
  absl::Duration slowest_completed_ ABSL_GUARDED_BY(mu_);  // this iteration
  // PlannedDeadline of the latest iteration's plan (Note [MB deadline]).
  absl::Duration planned_deadline_ ABSL_GUARDED_BY(mu_);
  // The last finished iteration with a sample (Note [MB deadline]).
  absl::Duration last_slowest_ ABSL_GUARDED_BY(mu_);
  // The last finished iteration with a completed MB.
  absl::Duration last_completed_ ABSL_GUARDED_BY(mu_);
  // Finished iterations in a row whose samples were all silent losses.
  int silent_streak_ ABSL_GUARDED_BY(mu_) = 0;
  absl::AnyInvocable<void(IterationReport)> done_ ABSL_GUARDED_BY(mu_);
  // Note [Stopping drops]: micro-batches of the running iteration waiting
  // for a re-run (route empty), the next fresh id, the pending re-plan, and
  // the nodes marked stopping: their last iteration and the mark's end.
  std::deque<Pending> rerun_ ABSL_GUARDED_BY(mu_);
  uint64_t next_mb_ ABSL_GUARDED_BY(mu_) = 0;
  common::TimerId replan_ ABSL_GUARDED_BY(mu_) = common::kNoTimer;
  struct StoppingMark {
    uint64_t stop_after = 0;
    absl::Duration until;
    // Note [Confirmed stopping]: the newest incarnation of the node's view
    // record seen when it was marked or saying stopping or LEFT; nullopt:
    // the view held none. A newer record that says neither ends the mark.
    std::optional<uint64_t> incarnation;
  };
  absl::flat_hash_map<PeerId, StoppingMark> stopping_ ABSL_GUARDED_BY(mu_);
  common::LogLimiter stopping_log_ ABSL_GUARDED_BY(mu_){absl::Seconds(10)};
  // Note [Confirmed stopping]: held claims of the running iteration, in
  // arrival order, and the next look at the view.
  std::deque<Held> unconfirmed_ ABSL_GUARDED_BY(mu_);
  common::TimerId confirm_ ABSL_GUARDED_BY(mu_) = common::kNoTimer;
  common::LogLimiter unconfirmed_log_ ABSL_GUARDED_BY(mu_){absl::Seconds(10)};
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRAIN_DATA_NODE_DRIVER_H_
