// RelayAttacher (relay_client.h): the outbound-only node's side.
#include <glog/logging.h>
#include <grpcpp/grpcpp.h>

#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "node/transport/relay/relay_client.h"
#include "node/transport/relay/splice.h"
#include "proto/version.h"

namespace skipswarm::node {

RelayChannels::RelayChannels(std::shared_ptr<const identity::PeerCredentials> credentials)
    : credentials_(std::move(credentials)) {}

std::shared_ptr<grpc::Channel> RelayChannels::Get(const RelayCandidate& relay) {
  const std::string key = absl::StrCat(relay.address, "/", relay.id.Hex());
  absl::MutexLock lock(&mu_);
  std::shared_ptr<grpc::Channel>& channel = channels_[key];
  if (channel == nullptr) {
    grpc::ChannelArguments args;
    credentials_->ConfigureChannel(args);
    // Its own connection, apart from the transport's channels to the same
    // node: a relay's streams live long and carry whole connections.
    args.SetInt("grpc.use_local_subchannel_pool", 1);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
    args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    args.SetInt(GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, 4 << 20);
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    channel = grpc::CreateCustomChannel(relay.address, credentials_->ForChannel(relay.id), args);
  }
  return channel;
}

struct RelayAttacher::Attachment {
  RelayCandidate relay;
  std::shared_ptr<grpc::Channel> channel;
  grpc::ClientContext context;
  // Guarded by the attacher's mu_:
  absl::Duration last_heard;
  bool confirmed = false;
  bool ended = false;
  std::string why;
};

RelayAttacher::RelayAttacher(RelayAttacherOptions options, common::Clock* clock,
                             Candidates candidates, Changed changed)
    : options_(std::move(options)),
      clock_(clock),
      candidates_(std::move(candidates)),
      changed_(std::move(changed)),
      channels_(options_.credentials) {
  manager_ = std::thread([this] { Manage(); });
}

RelayAttacher::~RelayAttacher() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    for (auto& a : attachments_) a->context.TryCancel();
    for (auto& [key, context] : circuit_contexts_) context->TryCancel();
    cv_.SignalAll();
  }
  manager_.join();
  workers_.JoinAll();
}

RelayAttacherStats RelayAttacher::stats() const {
  absl::MutexLock lock(&mu_);
  RelayAttacherStats s = stats_;
  s.attached = 0;
  for (const auto& a : attachments_) s.attached += a->confirmed && !a->ended ? 1 : 0;
  return s;
}

// The manager: drops ended attachments, cancels silent ones, attaches to the
// next candidate while fewer than `relays` are attached, and reports every
// change of the confirmed set.
void RelayAttacher::Manage() {
  std::vector<common::NodeId> reported;
  while (true) {
    workers_.Reap();
    RelayChange change;
    bool report = false;
    std::vector<RelayCandidate> wanted;
    {
      absl::MutexLock lock(&mu_);
      if (stop_) return;
      const absl::Duration now = clock_->SteadyNow();
      for (auto it = attachments_.begin(); it != attachments_.end();) {
        Attachment& a = **it;
        if (!a.ended && now - a.last_heard > options_.silence_timeout) {
          a.why = absl::StrCat("silent for ", absl::FormatDuration(now - a.last_heard));
          a.context.TryCancel();
        }
        if (a.ended) {
          failed_at_[a.relay.id] = now;
          if (a.confirmed) {
            ++stats_.losses;
            if (!short_since_) short_since_ = now;
            LOG(WARNING) << "relay " << a.relay.id << " (" << a.relay.address
                         << ") lost: " << a.why;
          }
          it = attachments_.erase(it);
        } else {
          ++it;
        }
      }
      std::vector<common::NodeId> confirmed;
      int pending = 0;
      for (const auto& a : attachments_) {
        if (a->confirmed) {
          confirmed.push_back(a->relay.id);
          change.relays.push_back(a->relay);
        } else {
          ++pending;
        }
      }
      if (confirmed != reported) {
        report = true;
        reported = confirmed;
        if (short_since_ && static_cast<int>(confirmed.size()) >= options_.relays) {
          change.recovered_after = now - *short_since_;
          stats_.last_recovery = change.recovered_after;
          short_since_.reset();
        }
      }
      if (static_cast<int>(attachments_.size()) < options_.relays && pending == 0) {
        wanted.resize(1);  // a marker: ask for candidates below, without the lock
      }
    }
    if (report) {
      std::vector<std::string> names;
      for (const RelayCandidate& r : change.relays) {
        names.push_back(absl::StrCat(r.id.ShortString(), " (", r.address, ")"));
      }
      change.detail = absl::StrCat(
          "relayed by ", names.empty() ? "nobody" : absl::StrJoin(names, ", "),
          change.recovered_after
              ? absl::StrCat("; re-attached ", absl::FormatDuration(*change.recovered_after),
                             " after losing a relay")
              : "");
      LOG(INFO) << change.detail;
      changed_(change);
    }
    if (!wanted.empty()) {
      std::vector<RelayCandidate> candidates = candidates_();
      absl::MutexLock lock(&mu_);
      if (stop_) return;
      const absl::Duration now = clock_->SteadyNow();
      // Both run under mu_ (the analysis checks their callers hold it).
      auto in_use = [&](const RelayCandidate& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return std::any_of(attachments_.begin(), attachments_.end(),
                           [&](const auto& a) { return a->relay.id == c.id; });
      };
      auto cooling = [&](const RelayCandidate& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        auto f = failed_at_.find(c.id);
        return f != failed_at_.end() && now - f->second < options_.retry_after;
      };
      const RelayCandidate* pick = nullptr;
      for (const RelayCandidate& c : candidates) {  // best first, not cooling down
        if (!in_use(c) && !cooling(c) && c.id != options_.self) {
          pick = &c;
          break;
        }
      }
      if (pick == nullptr) {  // every one failed lately: the one that failed longest ago
        for (const RelayCandidate& c : candidates) {
          if (in_use(c) || c.id == options_.self) continue;
          if (pick == nullptr || failed_at_[c.id] < failed_at_[pick->id]) pick = &c;
        }
        if (pick != nullptr && cooling(*pick) &&
            now - failed_at_[pick->id] < options_.retry_after / 10) {
          pick = nullptr;  // not in a tight loop
        }
      }
      if (pick != nullptr) {
        auto a = std::make_shared<Attachment>();
        a->relay = *pick;
        a->channel = channels_.Get(*pick);
        a->last_heard = now;
        attachments_.push_back(a);
        workers_.Start([this, a] { RunAttachment(a); });
      }
    }
    absl::MutexLock lock(&mu_);
    if (stop_) return;
    cv_.WaitWithTimeout(&mu_, options_.tick);
  }
}

void RelayAttacher::RunAttachment(std::shared_ptr<Attachment> a) {
  proto::RelayAttachRequest request;
  request.set_protocol_version(proto::kProtocolVersion);
  request.set_swarm_id(options_.swarm_id);
  request.set_node_id(options_.self.Bytes());
  auto stub = proto::Relay::NewStub(a->channel);
  std::unique_ptr<grpc::ClientReader<proto::RelayCall>> reader =
      stub->Attach(&a->context, request);
  proto::RelayCall call;
  while (reader->Read(&call)) {
    {
      absl::MutexLock lock(&mu_);
      a->last_heard = clock_->SteadyNow();
      if (!a->confirmed) {
        a->confirmed = true;
        cv_.SignalAll();
      }
      if (stop_) break;
    }
    if (call.circuit() != 0) {
      const uint64_t circuit = call.circuit();
      workers_.Start([this, a, circuit] { RunCircuit(a, circuit); });
    }
  }
  const grpc::Status status = reader->Finish();
  absl::MutexLock lock(&mu_);
  if (a->why.empty()) {
    a->why = status.ok() ? "the relay ended the stream"
                         : absl::StrCat(status.error_code(), " ", status.error_message());
  }
  a->ended = true;
  cv_.SignalAll();
}

void RelayAttacher::RunCircuit(std::shared_ptr<Attachment> a, uint64_t circuit) {
  grpc::ClientContext context;
  uint64_t key = 0;
  {
    absl::MutexLock lock(&mu_);
    if (stop_) return;
    key = ++next_circuit_key_;
    circuit_contexts_[key] = &context;
    ++stats_.circuits;
  }
  auto stub = proto::Relay::NewStub(a->channel);
  std::unique_ptr<grpc::ClientReaderWriter<proto::RelayBytes, proto::RelayBytes>> stream =
      stub->Accept(&context);
  proto::RelayBytes first;
  first.set_protocol_version(proto::kProtocolVersion);
  first.set_node_id(options_.self.Bytes());
  first.set_circuit(circuit);
  absl::StatusOr<int> fd = ConnectTcp(options_.local_address);
  if (!stream->Write(first) || !fd.ok()) {
    if (!fd.ok()) LOG(WARNING) << "relay circuit " << circuit << ": " << fd.status();
    if (fd.ok()) ::close(*fd);
    context.TryCancel();
    stream->Finish().ok();
  } else {
    Splice(*fd, stream.get(), &context);
  }
  absl::MutexLock lock(&mu_);
  circuit_contexts_.erase(key);
}

}  // namespace skipswarm::node
