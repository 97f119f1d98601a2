#include "common/peer_quota.h"

#include <algorithm>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/notification.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace skipswarm::common {

const char* PeerClassName(PeerClass c) {
  switch (c) {
    case PeerClass::kMember:
      return "member";
    case PeerClass::kStranger:
      return "stranger";
    case PeerClass::kRevoked:
      return "revoked";
    case PeerClass::kNewcomer:
      return "newcomer";
  }
  return "unknown";
}

const char* QuotaReasonName(QuotaReason r) {
  switch (r) {
    case QuotaReason::kMessages:
      return "messages";
    case QuotaReason::kBytes:
      return "bytes";
    case QuotaReason::kStreams:
      return "streams";
    case QuotaReason::kStreamOpens:
      return "stream_opens";
    case QuotaReason::kPeers:
      return "peers";
    case QuotaReason::kNotAdmitted:
      return "not_admitted";
    case QuotaReason::kRevoked:
      return "revoked";
    case QuotaReason::kStrangers:
      return "strangers";
    case QuotaReason::kJoiners:
      return "joiners";
  }
  return "unknown";
}

namespace {

std::string KeyOf(const NodeId& id) { return id.Hex(); }

// A proven joiner's own bucket is keyed apart from the stranger bucket of
// the same key (Note [Joiners' budget]).
constexpr char kJoinerKeyPrefix[] = "joiner:";

// The status payload that carries a refusal's hold (Note [Refusal hold]),
// in nanoseconds.
constexpr char kHoldPayload[] = "type.skipswarm/quota_hold_ns";

// A key as a log line shows it: a node id's short form, else as given.
std::string ShowKey(const std::string& key) {
  return key.size() == 64 ? key.substr(0, 8) : key;
}

}  // namespace

PeerQuota::PeerQuota(PeerQuotaOptions options, Clock* clock)
    : options_(std::move(options)), clock_(clock), log_limit_(options_.log_interval) {
  // The shared buckets start full.
  absl::MutexLock lock(&mu_);
  for (auto [bucket, budget] : {std::pair{&strangers_, &options_.all_strangers},
                                std::pair{&joiners_, &options_.joiners}}) {
    if (!budget->has_value()) continue;
    bucket->at = clock_->SteadyNow();
    bucket->messages = (*budget)->message_burst;
    bucket->bytes = (*budget)->byte_burst;
  }
}

std::optional<PeerQuota::Shortfall> PeerQuota::ShortfallOf(const Peer& bucket,
                                                           const QuotaBudget& b,
                                                           uint64_t bytes, int messages) {
  // Refilling to `need` takes (need - have) / rate, unless need is above the burst.
  auto wait = [](double have, double need, double rate, double burst) {
    return need > burst ? absl::InfiniteDuration() : absl::Seconds((need - have) / rate);
  };
  if (b.messages_per_second > 0 && messages > 0 && bucket.messages < messages) {
    return Shortfall{QuotaReason::kMessages,
                     wait(bucket.messages, messages, b.messages_per_second, b.message_burst)};
  }
  // No bytes asks nothing of the byte bucket, even one in debt (Note [Paced
  // bytes]): a stream opening is a message only.
  const double need = static_cast<double>(bytes);
  if (b.bytes_per_second > 0 && bytes > 0 && bucket.bytes < need) {
    return Shortfall{QuotaReason::kBytes,
                     wait(bucket.bytes, need, b.bytes_per_second, b.byte_burst)};
  }
  return std::nullopt;
}

void PeerQuota::Charge(Peer& bucket, const QuotaBudget& b, uint64_t bytes, int messages) {
  if (b.messages_per_second > 0 && messages > 0) bucket.messages -= messages;
  if (b.bytes_per_second > 0) bucket.bytes -= static_cast<double>(bytes);
}

void PeerQuota::SetClassifier(Classifier classifier) {
  absl::MutexLock lock(&classifier_mu_);
  classifier_ = std::move(classifier);
}

PeerClass PeerQuota::ClassOf(const NodeId& peer) const {
  Classifier classifier;
  {
    absl::MutexLock lock(&classifier_mu_);
    classifier = classifier_;
  }
  return classifier ? classifier(peer) : PeerClass::kMember;
}

void PeerQuota::RefillLocked(Peer& p, const QuotaBudget& b, absl::Duration now) const {
  const double dt = std::max(0.0, absl::ToDoubleSeconds(now - p.at));
  p.messages = std::min(b.message_burst, p.messages + dt * b.messages_per_second);
  p.bytes = std::min(b.byte_burst, p.bytes + dt * b.bytes_per_second);
  p.stream_opens =
      std::min(b.stream_open_burst, p.stream_opens + dt * b.stream_opens_per_second);
  p.at = now;
}

PeerQuota::Peer* PeerQuota::FindOrAddLocked(const std::string& key, PeerClass peer_class,
                                            absl::Duration now, bool joiner) {
  Peer fresh;
  fresh.peer_class = peer_class;
  fresh.joiner = joiner;
  const QuotaBudget& budget = BudgetOf(fresh);
  auto it = peers_.find(key);
  if (it != peers_.end()) {
    it->second.peer_class = peer_class;  // a stranger may have become a member
    RefillLocked(it->second, budget, now);
    return &it->second;
  }
  if (peers_.size() >= options_.max_peers) {
    // Forget peers whose buckets are full again and that hold no stream:
    // they are as if never seen (Note [Peer quotas]).
    for (auto i = peers_.begin(); i != peers_.end();) {
      auto next = std::next(i);
      Peer& p = i->second;
      const QuotaBudget& own = BudgetOf(p);
      RefillLocked(p, own, now);
      if (p.streams == 0 && p.messages >= own.message_burst && p.bytes >= own.byte_burst &&
          p.stream_opens >= own.stream_open_burst) {
        peers_.erase(i);
      }
      i = next;
    }
    if (peers_.size() >= options_.max_peers && peer_class == PeerClass::kStranger) {
      return nullptr;
    }
  }
  Peer& p = peers_[key];
  p = fresh;
  p.at = now;
  p.messages = budget.message_burst;
  p.bytes = budget.byte_burst;
  p.stream_opens = budget.stream_open_burst;
  return &p;
}

absl::Status PeerQuota::RefuseLocked(const std::string& key, PeerClass peer_class,
                                     QuotaReason reason, absl::Duration now, Peer* p,
                                     absl::Duration wait) {
  ++refusals_[QuotaRefusalKey{reason, peer_class}];
  // Note [Refusal hold]: a peer with no entry (the table is full) counts as
  // refused before.
  absl::Duration hold = absl::ZeroDuration();
  if (options_.max_hold > absl::ZeroDuration()) {
    const absl::Duration cap =
        reason == QuotaReason::kStreamOpens && options_.max_stream_open_hold > absl::ZeroDuration()
            ? options_.max_stream_open_hold
            : options_.max_hold;
    if (p == nullptr || now - p->last_refused < options_.repeat_window) {
      hold = std::max(absl::ZeroDuration(), std::min(wait, cap));
    }
    if (p != nullptr) p->last_refused = now;
  }
  const QuotaBudget& own = p != nullptr ? BudgetOf(*p) : BudgetOf(peer_class);
  absl::Status refusal = RefusalStatus(key, peer_class, reason, now, own);
  if (hold > absl::ZeroDuration()) {
    refusal.SetPayload(kHoldPayload, absl::Cord(absl::StrCat(absl::ToInt64Nanoseconds(hold))));
  }
  return refusal;
}

absl::Status PeerQuota::RefusalStatus(const std::string& key, PeerClass peer_class,
                                      QuotaReason reason, absl::Duration now,
                                      const QuotaBudget& b) {
  std::string budget;
  switch (reason) {
    case QuotaReason::kMessages:
      budget = absl::StrFormat("%g messages/s, burst %g", b.messages_per_second,
                               b.message_burst);
      break;
    case QuotaReason::kBytes:
      budget = absl::StrFormat("%g bytes/s, burst %g", b.bytes_per_second, b.byte_burst);
      break;
    case QuotaReason::kStreams:
      budget = absl::StrCat(b.max_streams, " concurrent streams");
      break;
    case QuotaReason::kStreamOpens:
      budget = absl::StrFormat("%g stream opens/s, burst %g", b.stream_opens_per_second,
                               b.stream_open_burst);
      break;
    case QuotaReason::kPeers:
      budget = absl::StrCat(options_.max_peers, " tracked peers");
      break;
    case QuotaReason::kStrangers: {
      const QuotaBudget& all = options_.all_strangers.value_or(QuotaBudget{});
      budget = absl::StrFormat(
          "all strangers together: %g messages/s, burst %g; %g bytes/s, burst %g; %d streams",
          all.messages_per_second, all.message_burst, all.bytes_per_second, all.byte_burst,
          all.max_streams);
      break;
    }
    case QuotaReason::kJoiners: {
      const QuotaBudget& all = options_.joiners.value_or(QuotaBudget{});
      budget = absl::StrFormat("proven joiners together: %g messages/s, burst %g; %g bytes/s, "
                               "burst %g",
                               all.messages_per_second, all.message_burst,
                               all.bytes_per_second, all.byte_burst);
      break;
    }
    case QuotaReason::kNotAdmitted:
    case QuotaReason::kRevoked:
      break;
  }
  if (reason == QuotaReason::kRevoked) {
    return absl::PermissionDeniedError(
        absl::StrCat(options_.service, ": ", ShowKey(key),
                     " was revoked by this swarm's founder (its revocation list)"));
  }
  if (reason == QuotaReason::kNotAdmitted) {
    return absl::PermissionDeniedError(
        absl::StrCat(options_.service, ": ", ShowKey(key),
                     " is not a member of this swarm, which admits only invited or listed "
                     "nodes"));
  }
  std::string message =
      absl::StrCat(options_.service, ": ", PeerClassName(peer_class), " ", ShowKey(key),
                   " is over its ", QuotaReasonName(reason), " quota (", budget, ")");
  if (int64_t held = 0; log_limit_.Allow(now, &held)) {
    LOG(WARNING) << "refused: " << message << " (" << held
                 << " more refusals not shown; skipswarm_peer_quota_refusals_total)";
  }
  return absl::ResourceExhaustedError(message);
}

absl::Status PeerQuota::Admit(const NodeId& peer, uint64_t bytes, int messages) {
  return AdmitKey(KeyOf(peer), ClassOf(peer), bytes, messages);
}

absl::StatusOr<PeerQuota::Peer*> PeerQuota::AdmittedEntryLocked(const std::string& key,
                                                                PeerClass peer_class,
                                                                absl::Duration now,
                                                                bool joiner) {
  Peer* p = FindOrAddLocked(key, peer_class, now, joiner);
  if (BudgetOf(peer_class).closed) {
    return RefuseLocked(key, peer_class, ClosedReason(peer_class), now, p);
  }
  if (p == nullptr) return RefuseLocked(key, peer_class, QuotaReason::kPeers, now);
  return p;
}

absl::Status PeerQuota::AdmitKey(const std::string& key, PeerClass peer_class,
                                 uint64_t bytes, int messages) {
  return AdmitShared(key, peer_class, bytes, messages, Shared::kStrangers);
}

absl::Status PeerQuota::AdmitShared(const std::string& key, PeerClass peer_class,
                                    uint64_t bytes, int messages, Shared shared) {
  const absl::Duration now = clock_->SteadyNow();
  // Note [Joiners' budget]: a proven joiner's own bucket, apart from its
  // key's stranger bucket.
  const bool joiner = shared == Shared::kJoiners && options_.joiner.has_value();
  const std::string own_key = joiner ? absl::StrCat(kJoinerKeyPrefix, key) : std::string();
  const std::string& k = joiner ? own_key : key;
  const QuotaBudget& b = joiner ? *options_.joiner : BudgetOf(peer_class);
  absl::MutexLock lock(&mu_);
  SS_ASSIGN_OR_RETURN(Peer* const p, AdmittedEntryLocked(k, peer_class, now, joiner));
  if (std::optional<Shortfall> short_of = ShortfallOf(*p, b, bytes, messages)) {
    return RefuseLocked(k, peer_class, short_of->reason, now, p, short_of->wait);
  }
  if (peer_class == PeerClass::kStranger) {
    absl::Status s = ChargeSharedLocked(shared, k, bytes, messages, now, p);
    if (!s.ok()) return s;
  }
  Charge(*p, b, bytes, messages);
  if (shared == Shared::kJoiners) ++joiners_admitted_;
  return absl::OkStatus();
}

absl::Status PeerQuota::AdmitJoiner(const NodeId& peer, uint64_t bytes,
                                    absl::FunctionRef<bool()> proves_join) {
  const std::string key = KeyOf(peer);
  const PeerClass peer_class = ClassOf(peer);
  if (peer_class != PeerClass::kStranger) return AdmitKey(key, peer_class, bytes);
  return AdmitJoinerKey(key, key, bytes, proves_join);
}

absl::Status PeerQuota::AdmitJoinerKey(const std::string& key, const std::string& joiner_key,
                                       uint64_t bytes, absl::FunctionRef<bool()> proves_join) {
  const PeerClass peer_class = PeerClass::kStranger;
  if (joiner_key.empty() || !options_.joiners.has_value() ||
      !options_.all_strangers.has_value() || options_.stranger.closed) {
    return AdmitKey(key, peer_class, bytes);
  }
  bool strangers_short = false;
  {
    // Note [Joiners' budget]: the proof is asked only when the flood's
    // budget is short.
    absl::MutexLock lock(&mu_);
    RefillLocked(strangers_, *options_.all_strangers, clock_->SteadyNow());
    strangers_short = ShortfallOf(strangers_, *options_.all_strangers, bytes, 1).has_value();
  }
  if (strangers_short && proves_join()) {
    return AdmitShared(joiner_key, peer_class, bytes, 1, Shared::kJoiners);
  }
  return AdmitShared(key, peer_class, bytes, 1, Shared::kStrangers);
}

absl::StatusOr<absl::Duration> PeerQuota::Pace(const NodeId& peer, uint64_t bytes) {
  const std::string key = KeyOf(peer);
  const PeerClass peer_class = ClassOf(peer);
  const absl::Duration now = clock_->SteadyNow();
  const QuotaBudget& b = BudgetOf(peer_class);
  absl::MutexLock lock(&mu_);
  SS_ASSIGN_OR_RETURN(Peer* const p, AdmittedEntryLocked(key, peer_class, now));
  // Note [Paced bytes]: into debt; the wait is the slower bucket's.
  absl::Duration wait = absl::ZeroDuration();
  auto owe = [&wait, bytes](Peer& bucket, const QuotaBudget& budget) {
    if (budget.bytes_per_second <= 0) return;
    bucket.bytes -= static_cast<double>(bytes);
    if (bucket.bytes < 0) {
      wait = std::max(wait, absl::Seconds(-bucket.bytes / budget.bytes_per_second));
    }
  };
  owe(*p, b);
  if (peer_class == PeerClass::kStranger && options_.all_strangers.has_value()) {
    RefillLocked(strangers_, *options_.all_strangers, now);
    owe(strangers_, *options_.all_strangers);
  }
  if (wait > absl::ZeroDuration()) ++paced_;
  return wait;
}

uint64_t PeerQuota::paced() const {
  absl::MutexLock lock(&mu_);
  return paced_;
}

uint64_t PeerQuota::joiners_admitted() const {
  absl::MutexLock lock(&mu_);
  return joiners_admitted_;
}

absl::Status PeerQuota::ChargeSharedLocked(Shared shared, const std::string& key,
                                           uint64_t bytes, int messages, absl::Duration now,
                                           Peer* p) {
  const bool joiners = shared == Shared::kJoiners;
  const std::optional<QuotaBudget>& budget = joiners ? options_.joiners : options_.all_strangers;
  if (!budget.has_value()) return absl::OkStatus();
  Peer& bucket = joiners ? joiners_ : strangers_;
  RefillLocked(bucket, *budget, now);
  if (std::optional<Shortfall> short_of = ShortfallOf(bucket, *budget, bytes, messages)) {
    return RefuseLocked(key, PeerClass::kStranger,
                        joiners ? QuotaReason::kJoiners : QuotaReason::kStrangers, now, p,
                        short_of->wait);
  }
  Charge(bucket, *budget, bytes, messages);
  return absl::OkStatus();
}

absl::StatusOr<PeerQuota::StreamSlot> PeerQuota::OpenStream(const NodeId& peer) {
  return OpenStreamKey(KeyOf(peer), ClassOf(peer));
}

absl::StatusOr<PeerQuota::StreamSlot> PeerQuota::OpenStreamKey(const std::string& key,
                                                               PeerClass peer_class) {
  const absl::Duration now = clock_->SteadyNow();
  const QuotaBudget& b = BudgetOf(peer_class);
  absl::MutexLock lock(&mu_);
  SS_ASSIGN_OR_RETURN(Peer* const p, AdmittedEntryLocked(key, peer_class, now));
  if (b.max_streams > 0 && p->streams >= b.max_streams) {
    return RefuseLocked(key, peer_class, QuotaReason::kStreams, now, p);
  }
  // Note [Stream opens].
  const bool limit_opens = b.stream_opens_per_second > 0;
  if (limit_opens && p->stream_opens < 1) {
    return RefuseLocked(key, peer_class, QuotaReason::kStreamOpens, now, p,
                        b.stream_open_burst < 1
                            ? absl::InfiniteDuration()
                            : absl::Seconds((1 - p->stream_opens) / b.stream_opens_per_second));
  }
  // Opening a stream is a message too: a peer whose streams are cut for
  // its quota cannot reopen them faster than its message rate.
  if (std::optional<Shortfall> short_of = ShortfallOf(*p, b, 0, 1)) {
    return RefuseLocked(key, peer_class, short_of->reason, now, p, short_of->wait);
  }
  // Note [Peer quotas]: a stranger's stream is also one of all strangers'.
  const bool shared = peer_class == PeerClass::kStranger && options_.all_strangers.has_value();
  if (shared) {
    if (options_.all_strangers->max_streams > 0 &&
        strangers_.streams >= options_.all_strangers->max_streams) {
      return RefuseLocked(key, peer_class, QuotaReason::kStrangers, now, p);
    }
    if (absl::Status s = ChargeSharedLocked(Shared::kStrangers, key, 0, 1, now, p); !s.ok()) {
      return s;
    }
    ++strangers_.streams;
  }
  Charge(*p, b, 0, 1);
  if (limit_opens) p->stream_opens -= 1;
  ++p->streams;
  return StreamSlot(this, key, shared);
}

void PeerQuota::ReleaseStream(const std::string& key, bool shared) {
  absl::MutexLock lock(&mu_);
  if (shared && strangers_.streams > 0) --strangers_.streams;
  auto it = peers_.find(key);
  if (it != peers_.end() && it->second.streams > 0) --it->second.streams;
}

PeerQuota::StreamSlot& PeerQuota::StreamSlot::operator=(StreamSlot&& o) noexcept {
  if (this != &o) {
    if (owner_ != nullptr) owner_->ReleaseStream(key_, shared_);
    owner_ = o.owner_;
    key_ = std::move(o.key_);
    shared_ = o.shared_;
    o.owner_ = nullptr;
  }
  return *this;
}

PeerQuota::StreamSlot::~StreamSlot() {
  if (owner_ != nullptr) owner_->ReleaseStream(key_, shared_);
}

absl::Duration PeerQuota::HoldOf(const absl::Status& refusal) {
  absl::optional<absl::Cord> payload = refusal.GetPayload(kHoldPayload);
  int64_t ns = 0;
  if (!payload.has_value() || !absl::SimpleAtoi(std::string(*payload), &ns) || ns <= 0) {
    return absl::ZeroDuration();
  }
  return absl::Nanoseconds(ns);
}

bool PeerQuota::TakeHeldSlot() {
  int n = held_now_->load();
  while (n < options_.max_held_calls) {
    if (held_now_->compare_exchange_weak(n, n + 1)) {
      held_total_.fetch_add(1);
      return true;
    }
  }
  return false;
}

void PeerQuota::HoldRefusal(const absl::Status& refusal) {
  const absl::Duration hold = HoldOf(refusal);
  if (hold <= absl::ZeroDuration() || !TakeHeldSlot()) return;
  auto done = std::make_shared<absl::Notification>();
  clock_->RunAfter(hold, [done] { done->Notify(); });
  done->WaitForNotification();
  held_now_->fetch_sub(1);
}

void PeerQuota::AnswerAfterHold(const absl::Status& refusal, absl::AnyInvocable<void()> answer) {
  const absl::Duration hold = HoldOf(refusal);
  if (hold <= absl::ZeroDuration() || !TakeHeldSlot()) {
    answer();
    return;
  }
  clock_->RunAfter(hold, [held = held_now_, answer = std::move(answer)]() mutable {
    held->fetch_sub(1);
    answer();
  });
}

uint64_t PeerQuota::held_refusals() const { return held_total_.load(); }

std::map<QuotaRefusalKey, uint64_t> PeerQuota::refusals() const {
  absl::MutexLock lock(&mu_);
  return refusals_;
}

uint64_t PeerQuota::total_refusals() const {
  absl::MutexLock lock(&mu_);
  uint64_t n = 0;
  for (const auto& [key, count] : refusals_) n += count;
  return n;
}

int PeerQuota::open_streams(const NodeId& peer) const {
  absl::MutexLock lock(&mu_);
  auto it = peers_.find(KeyOf(peer));
  return it == peers_.end() ? 0 : it->second.streams;
}

int PeerQuota::stranger_streams() const {
  absl::MutexLock lock(&mu_);
  return strangers_.streams;
}

size_t PeerQuota::tracked_peers() const {
  absl::MutexLock lock(&mu_);
  return peers_.size();
}

}  // namespace skipswarm::common
