// VolunteerPause: whether a volunteer's node should be paused now (Note
// [Paused members] in training_members.h), from the operator's requests
// (`skipswarm node pause|resume`, SIGUSR1 / SIGUSR2) and the daily quiet
// hours (--quiet_hours / config `quiet_hours = "22:00-07:00"`, local time).
//
//   SS_ASSIGN_OR_RETURN(QuietHours q, QuietHours::Parse("22:00-07:00"));
//   VolunteerPause pause(q, absl::LocalTimeZone());
//   VolunteerPause::Wanted w = pause.At(clock->Now());   // poll
//   pause.Request(/*paused=*/false, clock->Now());       // operator resume
//
// Rules: an operator's pause holds until the operator resumes. Quiet hours
// pause the node from the window's start to its end; an operator's resume
// inside a window lifts it until that window ends (the next one pauses
// again); an operator's pause inside a window outlasts it. GPU contention
// (Note [GPU contention], gpu_contention.h; SetGpuContention) pauses the
// node while it lasts; an operator's resume during one lifts it until it
// ends (the next contention pauses again). The reason shown is the
// operator's, else the contention's, else the quiet hours'.
//
// Thread rule: thread-compatible (the daemon guards it with its mutex).
#ifndef SKIPSWARM_NODE_DAEMON_GOSSIP_VOLUNTEER_PAUSE_H_
#define SKIPSWARM_NODE_DAEMON_GOSSIP_VOLUNTEER_PAUSE_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace skipswarm::node {

// A daily window of local time, "HH:MM-HH:MM"; it crosses midnight when the
// end is not after the start ("22:00-07:00"). Start and end must differ.
class QuietHours {
 public:
  // InvalidArgument naming `spec` unless it is "HH:MM-HH:MM" (00:00..23:59).
  static absl::StatusOr<QuietHours> Parse(absl::string_view spec);

  // Whether `t`, read in `tz`, falls in the window [start, end).
  bool Contains(absl::Time t, absl::TimeZone tz) const;
  // The first instant at or after `t` where the window ends (t itself
  // when it is not inside a window).
  absl::Time EndAfter(absl::Time t, absl::TimeZone tz) const;
  std::string ToString() const;  // "22:00-07:00"

 private:
  QuietHours(int start, int end) : start_(start), end_(end) {}
  int MinuteOfDay(absl::Time t, absl::TimeZone tz) const;
  int start_ = 0;  // minutes after local midnight
  int end_ = 0;
};

class VolunteerPause {
 public:
  struct Wanted {
    bool paused = false;
    std::string why;  // "paused by the operator", "quiet hours 22:00-07:00"
  };

  VolunteerPause(std::optional<QuietHours> quiet_hours, absl::TimeZone tz)
      : quiet_(quiet_hours), tz_(tz) {}

  // The operator's pause (true) or resume (false) at wall time `now`.
  void Request(bool paused, absl::Time now);
  // The GPU contention monitor's verdict now; `why` names the holders.
  void SetGpuContention(bool contended, const std::string& why);
  Wanted At(absl::Time now) const;

 private:
  std::optional<QuietHours> quiet_;
  absl::TimeZone tz_;
  bool operator_paused_ = false;
  // An operator's resume lifts quiet hours until this instant.
  absl::Time quiet_lifted_until_ = absl::InfinitePast();
  bool gpu_contended_ = false;
  std::string gpu_why_;
  bool gpu_lifted_ = false;  // an operator's resume during this contention
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_GOSSIP_VOLUNTEER_PAUSE_H_
