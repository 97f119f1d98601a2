#include "node/daemon/gossip/swarm_membership.h"

#include <glog/logging.h>

#include <fstream>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/random.h"
#include "common/status_macros.h"
#include "identity/identity.h"
#include "membership/grpc_gossip.h"
#include "membership/join_work.h"
#include "membership/record.h"
#include "membership/revocation.h"

namespace skipswarm::node {

// The gossip server must exist before the Membership (its port goes into
// the record), so it starts with this forwarder as its handler; until the
// Membership is set, calls are refused as "not ready" (retryable).
class SwarmMembership::Forwarder final : public membership::GossipHandler {
 public:
  void Set(membership::Membership* target) {
    absl::MutexLock lock(&mu_);
    target_ = target;
  }
  void HandlePing(const membership::PeerInfo& from, const proto::PingRequest& req,
                  membership::AckCallback reply) override {
    if (auto* t = Target()) return t->HandlePing(from, req, std::move(reply));
    reply(absl::UnavailableError("node starting"));
  }
  void HandlePingReq(const membership::PeerInfo& from, const proto::PingRequest& req,
                     membership::AckCallback reply) override {
    if (auto* t = Target()) return t->HandlePingReq(from, req, std::move(reply));
    reply(absl::UnavailableError("node starting"));
  }
  void HandlePushPull(const membership::PeerInfo& from, const proto::PushPullRequest& req,
                      membership::PushPullCallback reply) override {
    if (auto* t = Target()) return t->HandlePushPull(from, req, std::move(reply));
    reply(absl::UnavailableError("node starting"));
  }

 private:
  membership::Membership* Target() {
    absl::MutexLock lock(&mu_);
    return target_;
  }
  absl::Mutex mu_;
  membership::Membership* target_ ABSL_GUARDED_BY(mu_) = nullptr;
};

absl::StatusOr<std::unique_ptr<SwarmMembership>> SwarmMembership::Start(
    const SwarmMembershipOptions& options, common::Clock* clock) {
  std::unique_ptr<SwarmMembership> s(new SwarmMembership());
  s->options_ = options;
  s->clock_ = clock;
  if (!options.key_file.empty()) {
    absl::StatusOr<std::unique_ptr<identity::Identity>> loaded =
        options.create_key ? identity::Identity::LoadOrCreate(options.key_file)
                           : identity::Identity::Load(options.key_file);
    if (absl::IsNotFound(loaded.status())) {
      return absl::NotFoundError(absl::StrCat(
          "--node_key_file=", options.key_file,
          " does not exist; make one with `skipswarm keygen` or pass --create_key to create "
          "it (a new key is a new node identity)"));
    }
    SS_ASSIGN_OR_RETURN(s->identity_, std::move(loaded));
  } else if (options.insecure) {
    SS_ASSIGN_OR_RETURN(s->identity_, identity::Identity::Generate());
  } else {
    return absl::InvalidArgumentError(
        "--node_key_file is required for a gossip swarm (make one with `skipswarm keygen`), or "
        "pass --insecure for a local test swarm");
  }
  identity::GrpcSecurity security{s->identity_.get(), options.insecure};
  s->forwarder_ = std::make_unique<Forwarder>();
  if (options.serve_on == nullptr) {
    return absl::InvalidArgumentError("SwarmMembershipOptions.serve_on is not set");
  }
  s->server_ =
      membership::GrpcGossipServer::Register(options.serve_on, s->forwarder_.get(), security);
  // The manifest service (and any other) share the daemon's one port.
  for (grpc::Service* extra : options.extra_services) options.serve_on->RegisterService(extra);
  s->transport_ = std::make_unique<membership::GrpcGossipTransport>(security, clock);
  s->swarm_id_ = membership::DeriveSwarmId(options.swarm_name, options.swarm_secret);
  return s;
}

// Note [Revocation]: the poll's state, shared with its timer callbacks,
// which find `membership` null once the SwarmMembership is going away.
struct SwarmMembership::RevocationsPoll {
  common::Clock* clock = nullptr;
  std::string path;
  absl::Duration every;
  absl::Mutex mu;
  membership::Membership* membership ABSL_GUARDED_BY(mu) = nullptr;
  std::string last_text ABSL_GUARDED_BY(mu);
  common::TimerId timer ABSL_GUARDED_BY(mu) = common::kNoTimer;
};

namespace {

// The list in the file `path` (none when it does not exist), as text and
// decoded.
absl::StatusOr<std::optional<std::pair<std::string, proto::SignedRevocationList>>>
ReadRevocations(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string text(2 * membership::kMaxRevocationListBytes, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  absl::StatusOr<proto::SignedRevocationList> list = membership::DecodeRevocations(text);
  if (!list.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--revocations_file=", path, ": ", list.status().message()));
  }
  return std::make_pair(std::move(text), *std::move(list));
}

}  // namespace

void SwarmMembership::PollRevocations(std::weak_ptr<RevocationsPoll> weak) {
  std::shared_ptr<RevocationsPoll> poll = weak.lock();
  if (poll == nullptr) return;
  absl::MutexLock lock(&poll->mu);
  if (poll->membership == nullptr) return;
  absl::StatusOr<std::optional<std::pair<std::string, proto::SignedRevocationList>>> read =
      ReadRevocations(poll->path);
  if (!read.ok()) {
    LOG_EVERY_N(WARNING, 10) << read.status();
  } else if (read->has_value() && (*read)->first != poll->last_text) {
    poll->last_text = (*read)->first;
    absl::Status s = poll->membership->AddRevocations((*read)->second);
    if (s.ok()) {
      LOG(INFO) << "revocation list " << membership::PeekRevocationSerial((*read)->second)
                << " from " << poll->path << " applied; gossiping it";
    } else if (!absl::IsAlreadyExists(s)) {
      LOG(WARNING) << "--revocations_file=" << poll->path << ": " << s.message();
    }
  }
  poll->timer = poll->clock->RunAfter(poll->every, [weak] { PollRevocations(weak); });
}

absl::Status SwarmMembership::CreateMembership(DaemonEndpoints endpoints) {
  if (endpoints.gossip.empty()) return absl::InvalidArgumentError("no gossip address");
  {
    absl::MutexLock lock(&endpoints_mu_);
    endpoints_ = endpoints;
  }
  membership::MembershipOptions mo = options_.tuning;
  mo.policy.swarm_id = swarm_id_;
  mo.policy.model_id = options_.model_id;
  mo.policy.averaging_id = options_.averaging_id;
  mo.policy.num_stages = options_.num_stages;
  mo.policy.sign_frames = options_.sign_frames;
  mo.policy.admission = options_.admission;
  mo.invite = options_.invite;
  if (membership::NeedsJoinWork(options_.admission, identity_->id())) {
    // Note [Join work]: paid once per key and manifest, before any member
    // sees the record.
    const absl::Duration start = clock_->SteadyNow();
    SS_ASSIGN_OR_RETURN(mo.join_work,
                        membership::SolveJoinWork(options_.admission.manifest_id,
                                                  identity_->public_key(),
                                                  options_.admission.join_work_bits,
                                                  options_.join_work_first));
    LOG(INFO) << "join work: " << options_.admission.join_work_bits
              << " bits for swarm manifest " << options_.admission.manifest_id.substr(0, 12)
              << " in " << clock_->SteadyNow() - start;
  }
  std::string revocations_text;
  if (!options_.revocations_file.empty()) {
    SS_ASSIGN_OR_RETURN(auto read, ReadRevocations(options_.revocations_file));
    if (read.has_value()) {
      revocations_text = read->first;
      mo.revocations = read->second;
    } else {
      LOG(WARNING) << "--revocations_file=" << options_.revocations_file
                   << " does not exist yet: no node is revoked until it does";
    }
  }
  mo.addresses = EndpointsToAddresses(endpoints);
  mo.memory_slots = std::max<uint32_t>(1, options_.memory_slots);
  common::Random rng(options_.seed);
  SS_ASSIGN_OR_RETURN(membership_,
                      membership::Membership::Create(mo, identity_.get(), transport_.get(),
                                                     clock_, rng.Fork("membership")));
  forwarder_->Set(membership_.get());
  if (!options_.revocations_file.empty()) {
    revocations_poll_ = std::make_shared<RevocationsPoll>();
    revocations_poll_->clock = clock_;
    revocations_poll_->path = options_.revocations_file;
    revocations_poll_->every = options_.revocations_poll;
    std::weak_ptr<RevocationsPoll> weak = revocations_poll_;
    absl::MutexLock lock(&revocations_poll_->mu);
    revocations_poll_->membership = membership_.get();
    revocations_poll_->last_text = revocations_text;
    revocations_poll_->timer =
        clock_->RunAfter(options_.revocations_poll, [weak] { PollRevocations(weak); });
  }
  LOG(INFO) << "node id " << identity_->id() << ", gossip on " << endpoints.gossip
            << (options_.insecure ? " (plain text: --insecure)" : " (mutual TLS)") << ", swarm "
            << options_.swarm_name << (options_.swarm_secret.empty() ? "" : " (private)")
            << ", admission " << membership::AdmissionModeName(options_.admission.mode)
            << (options_.invite.invite().empty() ? "" : " (invited)");
  return absl::OkStatus();
}

DaemonEndpoints SwarmMembership::endpoints() const {
  absl::MutexLock lock(&endpoints_mu_);
  return endpoints_;
}

absl::Status SwarmMembership::Readvertise(const std::string& address) {
  DaemonEndpoints e;
  e.gossip = e.pipeline = e.group = e.state = address;
  const std::vector<std::string> addresses = EndpointsToAddresses(e);
  SS_RETURN_IF_ERROR(membership_->UpdateLocalRecord([&](proto::NodeRecord* r) {
    r->clear_addresses();
    for (const std::string& a : addresses) r->add_addresses(a);
  }));
  absl::MutexLock lock(&endpoints_mu_);
  endpoints_ = e;
  return absl::OkStatus();
}

SwarmMembership::~SwarmMembership() {
  if (revocations_poll_ != nullptr) {
    absl::MutexLock lock(&revocations_poll_->mu);
    revocations_poll_->membership = nullptr;
    clock_->Cancel(revocations_poll_->timer);
  }
  if (server_) server_->Shutdown();
  if (forwarder_) forwarder_->Set(nullptr);
  if (membership_) membership_->Stop();
  membership_.reset();
  transport_.reset();
}

const common::NodeId& SwarmMembership::id() const { return identity_->id(); }

absl::Status SwarmMembership::Join(std::function<bool()> cancelled) {
  membership_->Start();
  if (options_.join.empty()) {
    LOG(INFO) << "no --join: starting a new swarm at " << endpoints().gossip;
    return absl::OkStatus();
  }
  // Shared with the callback, which may come after a cancelled wait.
  struct Outcome {
    absl::Notification done;
    absl::Status result;
  };
  auto outcome = std::make_shared<Outcome>();
  membership_->Join(options_.join, [outcome](absl::Status s) {
    outcome->result = s;
    outcome->done.Notify();
  });
  absl::Duration waited;
  constexpr absl::Duration kPoll = absl::Milliseconds(50);
  while (!outcome->done.WaitForNotificationWithTimeout(kPoll) && waited < options_.join_timeout) {
    waited += kPoll;
    if (cancelled && cancelled()) {
      return absl::CancelledError("stopped by a signal while joining the swarm (bootstrap)");
    }
  }
  if (!outcome->done.HasBeenNotified()) {
    return absl::DeadlineExceededError(absl::StrCat(
        "[timeout] no bootstrap peer answered within ", absl::FormatDuration(options_.join_timeout),
        "; hint: check the --join addresses and that those nodes are running"));
  }
  const absl::Status& result = outcome->result;  // written before the notification
  if (!result.ok()) {
    return absl::Status(result.code(), absl::StrCat("joining the swarm failed: ",
                                                    result.message()));
  }
  LOG(INFO) << "joined the swarm through " << options_.join.front() << "; "
            << membership_->GetView().Live().size() << " live members";
  return absl::OkStatus();
}

absl::StatusOr<int> SwarmMembership::Announce(absl::Duration timeout) {
  struct Result {
    absl::Notification done;
    int reached = 0, asked = 0;
  };
  auto r = std::make_shared<Result>();
  membership_->Announce([r](int reached, int asked) {
    r->reached = reached;
    r->asked = asked;
    r->done.Notify();
  });
  if (!r->done.WaitForNotificationWithTimeout(timeout)) {
    return absl::DeadlineExceededError("announcing our record timed out");
  }
  if (r->reached < r->asked) {
    LOG(WARNING) << "announce reached " << r->reached << " of " << r->asked << " members";
  }
  return r->reached;
}

void SwarmMembership::Leave(absl::Duration timeout, uint64_t exit_iteration) {
  if (left_.exchange(true)) return;  // LEFT is final; its exit iteration too
  auto done = std::make_shared<absl::Notification>();
  membership_->Leave([&](proto::NodeRecord* r) { r->set_iteration(exit_iteration); },
                     [done] { done->Notify(); });
  // Leave waits up to leave_linger for outbound-only members to hear of it.
  done->WaitForNotificationWithTimeout(timeout + options_.tuning.leave_linger);
}

}  // namespace skipswarm::node
