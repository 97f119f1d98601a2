#include "node/daemon/gossip/volunteer_pause.h"

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace skipswarm::node {
namespace {

constexpr int kMinutesPerDay = 24 * 60;

// "HH:MM" -> minutes after midnight, or -1.
int ParseClockTime(absl::string_view s) {
  const std::vector<absl::string_view> hm = absl::StrSplit(s, ':');
  int h = 0, m = 0;
  if (hm.size() != 2 || hm[0].size() != 2 || hm[1].size() != 2 || !absl::SimpleAtoi(hm[0], &h) ||
      !absl::SimpleAtoi(hm[1], &m) || h < 0 || h > 23 || m < 0 || m > 59) {
    return -1;
  }
  return h * 60 + m;
}

std::string ClockTime(int minutes) { return absl::StrFormat("%02d:%02d", minutes / 60, minutes % 60); }

}  // namespace

absl::StatusOr<QuietHours> QuietHours::Parse(absl::string_view spec) {
  const std::vector<absl::string_view> parts = absl::StrSplit(spec, '-');
  const int start = parts.size() == 2 ? ParseClockTime(parts[0]) : -1;
  const int end = parts.size() == 2 ? ParseClockTime(parts[1]) : -1;
  if (start < 0 || end < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "quiet_hours: '", spec, "' is not HH:MM-HH:MM in local time (e.g. 22:00-07:00)"));
  }
  if (start == end) {
    return absl::InvalidArgumentError(
        absl::StrCat("quiet_hours: '", spec, "' starts and ends at the same time"));
  }
  return QuietHours(start, end);
}

int QuietHours::MinuteOfDay(absl::Time t, absl::TimeZone tz) const {
  const absl::TimeZone::CivilInfo c = tz.At(t);
  return c.cs.hour() * 60 + c.cs.minute();
}

bool QuietHours::Contains(absl::Time t, absl::TimeZone tz) const {
  const int m = MinuteOfDay(t, tz);
  if (start_ < end_) return m >= start_ && m < end_;
  return m >= start_ || m < end_;  // across midnight
}

absl::Time QuietHours::EndAfter(absl::Time t, absl::TimeZone tz) const {
  if (!Contains(t, tz)) return t;
  const absl::CivilMinute now = absl::ToCivilMinute(t, tz);
  const int m = MinuteOfDay(t, tz);
  const int ahead = (end_ - m + kMinutesPerDay) % kMinutesPerDay;  // > 0 inside
  return absl::FromCivil(now + ahead, tz);
}

std::string QuietHours::ToString() const {
  return absl::StrCat(ClockTime(start_), "-", ClockTime(end_));
}

void VolunteerPause::Request(bool paused, absl::Time now) {
  operator_paused_ = paused;
  if (!paused && quiet_ && quiet_->Contains(now, tz_)) {
    quiet_lifted_until_ = quiet_->EndAfter(now, tz_);
  }
  if (!paused && gpu_contended_) gpu_lifted_ = true;
}

void VolunteerPause::SetGpuContention(bool contended, const std::string& why) {
  if (!contended) gpu_lifted_ = false;  // the next contention pauses again
  gpu_contended_ = contended;
  gpu_why_ = contended ? why : "";
}

VolunteerPause::Wanted VolunteerPause::At(absl::Time now) const {
  if (operator_paused_) return {true, "paused by the operator"};
  if (gpu_contended_ && !gpu_lifted_) return {true, gpu_why_};
  if (quiet_ && now >= quiet_lifted_until_ && quiet_->Contains(now, tz_)) {
    return {true, absl::StrCat("quiet hours ", quiet_->ToString())};
  }
  return {false, ""};
}

}  // namespace skipswarm::node
