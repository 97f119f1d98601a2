// Test scaffolding shared by the gRPC group tests: real gRPC over loopback
// on a simulated clock that moves only where a case says.
#ifndef SKIPSWARM_NODE_TRAIN_GRPC_GROUP_TEST_UTIL_H_
#define SKIPSWARM_NODE_TRAIN_GRPC_GROUP_TEST_UTIL_H_

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/sim_clock.h"
#include "identity/tls_credentials.h"
#include "node/train/grpc_group.h"

namespace skipswarm::node::grpc_group_testing {

// Note [Patience in the gRPC group tests]
// These tests run real gRPC over loopback, so how long anything takes is
// up to the machine: ThreadSanitizer slows them 5-15x, and a loaded
// machine more (tools/concurrency_check.sh --grpc). No case depends on how
// fast it is:
// - every wait for something that must happen, and every real-time limit
//   the code under test sees (push deadline, probe timeout, retries), is
//   kPatience: it only bounds a hang, never decides an outcome;
// - the cases on the simulated clock move time only at points the case
//   names, after the pushes it waits for are in (SimDriver), never on a
//   real-time schedule: time standing still, a round deadline cannot pass
//   while a push is still crossing loopback.
// A wait that must NOT end (the negative checks) may be short: a slow
// machine only makes it pass more easily.
inline constexpr absl::Duration kPatience = absl::Seconds(60);

// The real-time limits of GrpcGroupOptions, as long as kPatience: a slow
// push or probe is not a death here; deaths in these tests are refused
// connections, which fail at once.
inline void BePatient(GrpcGroupOptions& o) {
  o.push_deadline = kPatience;
  o.probe_timeout = kPatience;
}

// Runs a SimClock for the cases below (Note [Patience in the gRPC group
// tests]): time moves only in AdvanceTo; Until fires the timers already due,
// with time standing still, while real gRPC threads make progress.
class SimDriver {
 public:
  explicit SimDriver(common::SimClock* clock) : clock_(clock) {}

  // True once `done` holds; false after kPatience of real time.
  bool Until(const std::function<bool()>& done) {
    absl::Notification never;
    for (absl::Duration waited; waited < kPatience; waited += kPoll) {
      clock_->RunDue();
      if (done()) return true;
      never.WaitForNotificationWithTimeout(kPoll);  // real time: loopback
    }
    clock_->RunDue();
    return done();
  }
  bool Until(absl::Notification& n) { return Until([&n] { return n.HasBeenNotified(); }); }

  // Moves time to `t` in `step`s, firing the timers due on the way; stops
  // early once `n` is notified.
  void AdvanceTo(absl::Duration t, absl::Duration step, const absl::Notification* n = nullptr) {
    while (clock_->SteadyNow() < t && (n == nullptr || !n->HasBeenNotified())) {
      clock_->AdvanceTo(std::min(t, clock_->SteadyNow() + step));
    }
  }

 private:
  static constexpr absl::Duration kPoll = absl::Milliseconds(2);
  common::SimClock* clock_;
};

// One group per member, each on a loopback port of its own (port 0), patient
// (BePatient) and without TLS, `tweak` applied to every member's options;
// every member's view knows every member's address. With `hosts` >= 0 only
// the first `hosts` members get a view and a group (the others are members
// the views list, e.g. of another stage, that run no group). Groups stop
// before their views go.
struct LoopbackGroups {
  std::vector<std::unique_ptr<StaticSwarmView>> views;
  std::vector<std::unique_ptr<GrpcGroupComm>> groups;
};
inline absl::StatusOr<LoopbackGroups> StartLoopbackGroups(
    const std::vector<PeerInfo>& members, common::Clock* clock,
    const std::function<void(GrpcGroupOptions&)>& tweak = nullptr, int hosts = -1) {
  LoopbackGroups out;
  const size_t n = hosts < 0 ? members.size() : std::min<size_t>(hosts, members.size());
  for (size_t i = 0; i < n; ++i) {
    const PeerInfo& member = members[i];
    out.views.push_back(std::make_unique<StaticSwarmView>(members));
    GrpcGroupOptions o;
    o.self = member.id;
    BePatient(o);
    if (tweak) tweak(o);
    o.credentials = identity::PeerCredentials::Insecure();
    auto g = GrpcGroupComm::Create(o, out.views.back().get(), clock);
    if (!g.ok()) {
      return absl::Status(g.status().code(),
                          absl::StrCat(member.id.ShortString(), ": ", g.status().message()));
    }
    out.groups.push_back(*std::move(g));
  }
  for (const auto& view : out.views) {
    for (size_t j = 0; j < n; ++j) {
      view->SetAddresses(members[j].id, "",
                         "127.0.0.1:" + std::to_string(out.groups[j]->port()));
    }
  }
  return out;
}

}  // namespace skipswarm::node::grpc_group_testing

#endif  // SKIPSWARM_NODE_TRAIN_GRPC_GROUP_TEST_UTIL_H_
