// Timing instruments for real-clock gossip runs (loopback_swarm): where a
// real-time swarm loses time, and why a healthy member was declared DEAD.
//
// It records, per second of the run:
//  * timer lag: how late a 20 ms periodic timer of the shared clock fires
//    (the timer thread is busy or starved; every SWIM timer waits the same);
//  * thread starvation: how much longer than 20 ms a plain thread sleeps
//    (the process gets no CPU, independent of timer backlog);
//  * every gossip call through a TimedTransport: one-way delivery time
//    (client call -> server handler), reply time (call -> callback) and its
//    status;
// and every membership transition (observer, subject, old, new). Report()
// then explains each false DEAD verdict: when the subject was first
// suspected, when it was told, when its refutation was first seen, when it
// reached the observer, and the worst lags in that window.
//
//   SwarmRecorder rec(clock.get());
//   rec.Start();
//   TimedTransport timed(&inner, &rec);          // give `timed` to Membership
//   handler entry: rec.Arrived(from, seq, now); rec.Told(...)
//   membership->AddListener([&](const MemberChange& c) { rec.Transition(i, c); });
//   ...
//   rec.Report(std::cout, killed_indices);
//
// Thread rule: thread-safe. Stop() before destroying; the clock and the
// transports must outlive it.
#ifndef SKIPSWARM_TOOLS_LOOPBACK_SWARM_SWARM_RECORDER_H_
#define SKIPSWARM_TOOLS_LOOPBACK_SWARM_SWARM_RECORDER_H_

#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "common/node_id.h"
#include "common/real_clock.h"
#include "membership/transport.h"
#include "membership/view.h"

namespace skipswarm::tools {

class SwarmRecorder {
 public:
  explicit SwarmRecorder(common::RealClock* clock);
  ~SwarmRecorder();

  void Start();
  void Stop();

  // Node index of each id (for readable reports).
  void Name(const common::NodeId& id, int index);

  enum Kind { kPing, kPingReq, kPushPull, kKinds };
  void Sent(const std::string& from, uint64_t seq, absl::Duration at);
  void Arrived(const std::string& from, uint64_t seq);
  void Completed(Kind kind, absl::Duration elapsed, const absl::Status& status);
  // `subject` received a message saying that it is suspected.
  void Told(const common::NodeId& subject);
  void Transition(int observer, const membership::MemberChange& change);

  // Per-period summary and the false-DEAD incidents (`killed`: the nodes
  // that were killed on purpose).
  void Report(std::ostream& out, const std::vector<int>& killed);
  absl::Duration Now() { return clock_->SteadyNow(); }

 private:
  struct Second {  // one second of the run
    absl::Duration timer_lag;
    absl::Duration starvation;
    int calls[kKinds] = {};
    int failed[kKinds] = {};
    int deadline_exceeded = 0;
    absl::Duration reply_max[kKinds];
    absl::Duration delivery_max;
    std::vector<double> ping_ms;  // successful Ping round trips
  };
  struct Event {
    absl::Duration at;
    int observer;
    int subject;
    proto::MemberState from, to;
    bool record_changed;
  };
  Second& SecondLocked(absl::Duration at) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TimerTick(absl::Duration deadline);
  void StarvationLoop();
  int IndexLocked(const common::NodeId& id) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Incident(std::ostream& out, const Event& dead)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Duration MaxLagLocked(absl::Duration from, absl::Duration to,
                              bool starvation) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  common::RealClock* const clock_;
  const absl::Duration t0_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  common::TimerId timer_ ABSL_GUARDED_BY(mu_) = common::kNoTimer;
  absl::flat_hash_map<common::NodeId, int> index_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::pair<std::string, uint64_t>, absl::Duration> sent_
      ABSL_GUARDED_BY(mu_);
  std::vector<Second> seconds_ ABSL_GUARDED_BY(mu_);
  std::vector<Event> events_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<absl::Duration, int>> told_ ABSL_GUARDED_BY(mu_);
  std::thread starvation_thread_;
};

// A GossipTransport decorator that times every call for a SwarmRecorder.
class TimedTransport final : public membership::GossipTransport {
 public:
  // `inner` and `recorder` must outlive this.
  TimedTransport(membership::GossipTransport* inner, SwarmRecorder* recorder)
      : inner_(inner), recorder_(recorder) {}
  void Ping(const membership::PeerRef& to, const proto::PingRequest& req,
            absl::Duration timeout, membership::AckCallback done) override;
  void PingReq(const membership::PeerRef& to, const proto::PingRequest& req,
               absl::Duration timeout, membership::AckCallback done) override;
  void PushPull(const membership::PeerRef& to, const proto::PushPullRequest& req,
                absl::Duration timeout, membership::PushPullCallback done) override;

 private:
  membership::GossipTransport* const inner_;
  SwarmRecorder* const recorder_;
};

}  // namespace skipswarm::tools

#endif  // SKIPSWARM_TOOLS_LOOPBACK_SWARM_SWARM_RECORDER_H_
