// PeerLogLimiter: paces one kind of log line per peer, so a peer that sends
// many bad messages cannot flood the log. Each peer's first `burst` lines
// are let through; after that at most one per interval, which reports how
// many of that peer's lines were held back. A LogLimiter (common/backoff.h)
// per peer, in a table of bounded size, under a cap on all peers together.
//
//   common::PeerLogLimiter limit(common::PeerLogLimiterOptions{});
//   common::PeerLogVerdict v = limit.Allow(peer_key, clock->SteadyNow());
//   for (const common::PeerLogSummary& s : v.due)   // peers gone quiet
//     LOG(WARNING) << s.held << " more from " << s.peer << " not shown";
//   if (v.show) LOG(WARNING) << "refused ... (" << v.held << " more not shown)";
//   ...
//   for (const common::PeerLogSummary& s : limit.Flush()) ...  // at the end
//
// Note [Paced peer logs]
// * A line a peer can trigger (a refused frame, a refused request) costs the
//   node disk and CPU and buries real warnings; one line per bad message lets
//   a peer write as fast as it can send. So lines are paced per peer: the
//   first `burst` in full (a misconfigured peer's first errors are what an
//   operator needs), then one per `interval`, counting the held-back ones.
// * Peer keys may be forged (a stranger can claim any id), so the table holds
//   at most `max_peers` entries and forgets the peer heard from least
//   recently; its held-back count moves to `forgotten`, reported with the
//   next line shown. A forged-id flood would still get `burst` lines per new id, so
//   all peers together get at most `max_lines_per_interval` lines per
//   interval; a line over that cap counts as held back for its peer.
// * Bound: at most max_lines_per_interval lines per interval, whatever the
//   peers send; per peer at most burst, then one per interval.
// * A peer's held-back count is reported with its next line shown, and
//   also when it goes quiet: a peer that floods and then stops would
//   otherwise never have its count told. So every Allow call (any peer's,
//   shown or not) sweeps the table at most once per interval and returns,
//   in `due`, a summary for each peer with a count pending whose interval
//   since its last line has passed (a summary counts as that peer's line),
//   and one for the forgotten peers' lines.
//   Summaries are lines under max_lines_per_interval; those past it wait
//   for the next sweep. Work: one table walk per interval. Flush gives
//   every pending count at once (the owner's destruction), at most
//   max_lines_per_interval summaries and the rest added together.
// * Counters (metrics) keep the totals.
//
// Time comes from the caller (an injected clock): deterministic on a SimClock.
// Thread rule: thread-compatible (one owner, or external locking).
#ifndef SKIPSWARM_COMMON_PEER_LOG_LIMITER_H_
#define SKIPSWARM_COMMON_PEER_LOG_LIMITER_H_

#include <cstddef>
#include <cstdint>
#include <list>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "common/backoff.h"

namespace skipswarm::common {

struct PeerLogLimiterOptions {
  absl::Duration interval = absl::Seconds(10);
  int burst = 5;                     // each peer's first lines, in full
  size_t max_peers = 1024;           // table entries (>= 1)
  int max_lines_per_interval = 100;  // all peers together (>= 1)
};

// A summary line (Note [Paced peer logs]): `held` lines of `peer` were not
// shown; an empty `peer`: lines of peers the table forgot, or of more
// peers than one flush shows.
struct PeerLogSummary {
  std::string peer;
  int64_t held = 0;
  bool operator==(const PeerLogSummary& o) const { return peer == o.peer && held == o.held; }
};

struct PeerLogVerdict {
  bool show = false;
  int64_t held = 0;       // this peer's lines held back since its last shown line
  int64_t forgotten = 0;  // lines held back from peers the table forgot since
  // Summaries due for other peers that went quiet (the sweep), to log
  // whether or not this line is shown.
  std::vector<PeerLogSummary> due;
};

class PeerLogLimiter {
 public:
  explicit PeerLogLimiter(PeerLogLimiterOptions options);

  // Whether the line `peer` triggered at `now` (a steady time) is shown,
  // and the summaries the sweep found due.
  PeerLogVerdict Allow(const std::string& peer, absl::Duration now);
  // Every count still pending, reset: at most max_lines_per_interval
  // summaries, least recently heard from first, then one (empty peer) with
  // the rest and the forgotten lines.
  std::vector<PeerLogSummary> Flush();

  size_t peers() const { return table_.size(); }

 private:
  struct Entry {
    LogLimiter limit;
    std::list<std::string>::iterator age;  // position in by_age_
  };

  // The sweep (at most once per interval): summaries for quiet peers.
  void SweepInto(absl::Duration now, std::vector<PeerLogSummary>* due);

  const PeerLogLimiterOptions options_;
  absl::flat_hash_map<std::string, Entry> table_;
  std::list<std::string> by_age_;  // least recently heard from first
  int64_t forgotten_ = 0;
  absl::Duration window_start_;
  int window_lines_ = 0;
  absl::Duration last_sweep_ = -absl::InfiniteDuration();
};

}  // namespace skipswarm::common

#endif  // SKIPSWARM_COMMON_PEER_LOG_LIMITER_H_
