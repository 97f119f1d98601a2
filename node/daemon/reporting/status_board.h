// StatusBoard: what a daemon's status page shows (status_page.h), as the
// JSON document GET /status.json answers: this node (name, id, stages,
// address, reachability, health with its reasons, paused), the swarm as
// this node's gossip view holds it (members, their stages and states,
// outbound-only members, the stage map with replica counts, measured
// links), the last iterations' loss and throughput, and recent events
// (membership changes, health changes, re-routes, drops, errors).
//
//   StatusBoardOptions o;  // node_name "d0", mode "gossip", num_stages 4
//   StatusBoard board(o, &clock);
//   board.SetHealth(&health);              // borrowed, read at each request
//   board.UpdateView(membership->GetView());  // on each change / iteration
//   board.ObserveIteration(report);         // history, re-route/drop events
//   board.AddEvent("member", "ab12cd34 ALIVE -> DEAD");
//   std::string json = board.RenderJson();
//
// Everything is pushed in by the daemon (no callback into gossip or the
// trainer), so the HTTP thread never reaches a part being torn down; only
// `health` is read at render time, and it must outlive the board's server.
// History and events are bounded (StatusBoardOptions).
//
// Thread rule: thread-safe.
#ifndef SKIPSWARM_NODE_DAEMON_REPORTING_STATUS_BOARD_H_
#define SKIPSWARM_NODE_DAEMON_REPORTING_STATUS_BOARD_H_

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "membership/view.h"
#include "node/daemon/reporting/serving_health.h"
#include "node/train/node_trainer.h"

namespace skipswarm::node {

struct StatusBoardOptions {
  std::string node_name;
  std::string node_id;  // hex; may be empty
  std::string mode;     // "gossip" or "static"
  int num_stages = 0;   // the model's stage count (0: unknown)
  std::string version;  // build: version and git commit, as --version says
  size_t max_history = 600;  // iterations kept for the plots
  size_t max_events = 100;   // newest kept
  // Route skip / swap rates (Note [Route shapes]) over this many of the
  // latest iterations.
  size_t route_window = 20;
};

class StatusBoard {
 public:
  // `clock` is borrowed (event and uptime times) and must outlive this.
  StatusBoard(StatusBoardOptions options, common::Clock* clock);

  // Borrowed; read at each RenderJson; null: no health shown.
  void SetHealth(const ServingHealth* health);
  void SetStages(std::vector<int> stages);
  void SetAddress(std::string address);
  // Once a reachability check had an answer (absent until then).
  void SetReachable(bool reachable);
  // Training paused (a data node that cannot plan, Note [Paused
  // training]): the page's badge, and an event.
  void SetPaused(bool paused, const std::string& why);
  // The swarm as of now: the gossip view, or a static list's members
  // (alive or dead as this node's transport saw them).
  void UpdateView(const membership::View& view);
  // Names to show beside member ids (a static --swarm list has them;
  // gossip records do not).
  void SetMemberNames(std::map<common::NodeId, std::string> names);
  // One finished iteration: a history point (data nodes: loss, tokens/s;
  // relays: iteration time only), and events for re-routes, drops, errors
  // and digest mismatches.
  void ObserveIteration(const NodeIterationReport& r);
  // `kind`: a short word the page colours by ("member", "health", "reroute",
  // "drop", "error", "pause", "node").
  void AddEvent(const std::string& kind, const std::string& text);

  // The /status.json document (format: status_board.cc, Note [Status JSON]).
  std::string RenderJson() const;

 private:
  struct Point {
    uint64_t iteration = 0;
    double t = 0;  // seconds since the board was made
    std::optional<double> loss;  // absent on relays and for non-finite losses
    std::optional<double> tokens_per_second;
    std::optional<double> iteration_seconds;
    int64_t rerouted = 0;
    int dropped = 0;
    // Completed MBs this data node originated, and those whose route
    // skipped / swapped stages (Note [Route shapes]).
    int routed = 0, skipped = 0, swapped = 0;
  };
  struct Event {
    double t = 0;
    std::optional<uint64_t> iteration;  // the last one finished when it happened
    std::string kind;
    std::string text;
  };
  void AddEventLocked(const std::string& kind, const std::string& text)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  double SinceStart() const;

  const StatusBoardOptions options_;
  common::Clock* const clock_;
  const absl::Duration started_;
  mutable absl::Mutex mu_;
  const ServingHealth* health_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::vector<int> stages_ ABSL_GUARDED_BY(mu_);
  std::string address_ ABSL_GUARDED_BY(mu_);
  std::optional<bool> reachable_ ABSL_GUARDED_BY(mu_);
  bool paused_ ABSL_GUARDED_BY(mu_) = false;
  std::string paused_why_ ABSL_GUARDED_BY(mu_);
  std::optional<membership::View> view_ ABSL_GUARDED_BY(mu_);
  std::map<common::NodeId, std::string> names_ ABSL_GUARDED_BY(mu_);
  double view_t_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<uint64_t> last_iteration_ ABSL_GUARDED_BY(mu_);
  std::deque<Point> history_ ABSL_GUARDED_BY(mu_);
  std::deque<Event> events_ ABSL_GUARDED_BY(mu_);
  uint64_t events_total_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_REPORTING_STATUS_BOARD_H_
