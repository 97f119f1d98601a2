#include "node/transport/relay/relay_service.h"

#include <glog/logging.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "proto/grpc_status.h"
#include "proto/version.h"

namespace skipswarm::node {
namespace {

grpc::Status Refuse(absl::Status status) { return proto::ToGrpcStatus(status); }

absl::Status Oversized(const char* what, size_t bytes, size_t limit) {
  return absl::InvalidArgumentError(absl::StrCat("relay: ", what, " of ", bytes,
                                                 " bytes, more than the ", limit,
                                                 " the relay takes (Note [Relay memory])"));
}

}  // namespace

int64_t RelayHeldBytesBound(int max_attached, int max_circuits_per_node, int max_threads) {
  if (max_attached <= 0) return 0;
  const int64_t circuits = int64_t{max_attached} * std::max(0, max_circuits_per_node);
  const int64_t threads = max_threads > 0 ? int64_t{max_threads} : 2 * circuits;
  const int64_t handlers = std::min(2 * circuits, threads);
  const int64_t per_handler =
      2 * static_cast<int64_t>(kRelayMaxMessageBytes) + static_cast<int64_t>(kRelayMaxOpeningBytes);
  return handlers * per_handler + std::min(circuits, threads) * kRelayCircuitStateBytes +
         int64_t{max_attached} * kRelayAttachmentStateBytes;
}

RelayService::RelayService(RelayServiceOptions options) : options_(std::move(options)) {
  CHECK(options_.quota == nullptr || options_.clock != nullptr)
      << "relay: a quota needs the clock that paces it";
}

RelayService::~RelayService() { Shutdown(); }

void RelayService::Shutdown() {
  absl::MutexLock lock(&mu_);
  shut_down_ = true;
  for (auto& [id, c] : circuits_) {
    if (c.connect_context != nullptr) c.connect_context->TryCancel();
    if (c.accept_context != nullptr) c.accept_context->TryCancel();
  }
  cv_.SignalAll();
}

RelayServiceStats RelayService::stats() const {
  absl::MutexLock lock(&mu_);
  int queued = 0;
  for (const auto& [id, a] : attached_) queued += static_cast<int>(a.calls.size());
  return RelayServiceStats{static_cast<int>(attached_.size()),
                           circuits_opened_,
                           bytes_relayed_.load(),
                           paced_.load(),
                           over_budget_.load(),
                           oversized_.load(),
                           queued,
                           attach_handlers_.load()};
}

absl::StatusOr<common::NodeId> RelayService::Caller(grpc::ServerContext* context,
                                                    const std::string& claimed) const {
  absl::StatusOr<common::NodeId> id = common::NodeId::FromBytes(claimed);
  if (!id.ok()) return absl::InvalidArgumentError("relay: the caller did not name itself");
  // Note [Peer authentication]: the certificate must be the claimed node's.
  absl::Status auth = options_.credentials->CheckPeer(context->auth_context(), *id);
  if (!auth.ok()) return auth;
  return *id;
}

absl::StatusOr<common::NodeId> RelayService::ReadOpening(grpc::ServerContext* context,
                                                         BytesStream* stream,
                                                         proto::RelayBytes* first) {
  if (!stream->Read(first)) return absl::CancelledError("no request");
  if (const size_t bytes = first->ByteSizeLong(); bytes > kRelayMaxOpeningBytes) {
    ++oversized_;
    return Oversized("an opening", bytes, kRelayMaxOpeningBytes);
  }
  SS_RETURN_IF_ERROR(proto::CheckProtocolVersion(first->protocol_version()));
  return Caller(context, first->node_id());
}

grpc::Status RelayService::Attach(grpc::ServerContext* context,
                                  const proto::RelayAttachRequest* request,
                                  grpc::ServerWriter<proto::RelayCall>* writer) {
  if (absl::Status v = proto::CheckProtocolVersion(request->protocol_version()); !v.ok()) {
    return Refuse(v);
  }
  // Held for the stream's life (Note [Relay memory]).
  if (const size_t bytes = request->ByteSizeLong(); bytes > kRelayMaxOpeningBytes) {
    ++oversized_;
    return Refuse(Oversized("an attach request", bytes, kRelayMaxOpeningBytes));
  }
  if (!options_.swarm_id.empty() && request->swarm_id() != options_.swarm_id) {
    return Refuse(absl::PermissionDeniedError("relay: another swarm"));
  }
  absl::StatusOr<common::NodeId> node = Caller(context, request->node_id());
  if (!node.ok()) {
    LOG(WARNING) << "relay: refused an attach: " << node.status();
    return Refuse(node.status());
  }
  uint64_t generation = 0;
  int attached = 0;
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return Refuse(absl::UnavailableError("relay: shutting down"));
    if (static_cast<int>(attached_.size()) >= options_.max_attached &&
        !attached_.contains(*node)) {
      return Refuse(absl::ResourceExhaustedError(
          absl::StrCat("relay: ", options_.max_attached, " nodes attached already")));
    }
    generation = ++next_generation_;
    Attachment& a = attached_[*node];  // a re-attach replaces the older stream
    // and ends it: its handler may be blocked writing to a node that no
    // longer reads it (Note [Relay memory]).
    if (a.context != nullptr) a.context->TryCancel();
    a.generation = generation;
    a.context = context;
    a.calls.clear();
    cv_.SignalAll();
    attached = static_cast<int>(attached_.size());
  }
  LOG(INFO) << "relay: node " << *node << " attached (" << attached << " attached here)";
  ++attach_handlers_;
  bool open = writer->Write(proto::RelayCall());  // "attached"
  while (open && !context->IsCancelled()) {
    std::vector<proto::RelayCall> calls;
    {
      absl::MutexLock lock(&mu_);
      auto it = attached_.find(*node);
      if (shut_down_ || it == attached_.end() || it->second.generation != generation) break;
      if (it->second.calls.empty()) {
        cv_.WaitWithTimeout(&mu_, options_.heartbeat);
        it = attached_.find(*node);
        if (shut_down_ || it == attached_.end() || it->second.generation != generation) break;
      }
      calls.assign(it->second.calls.begin(), it->second.calls.end());
      it->second.calls.clear();
    }
    if (calls.empty()) calls.emplace_back();  // heartbeat
    for (const proto::RelayCall& call : calls) {
      if (!writer->Write(call)) {
        open = false;
        break;
      }
    }
  }
  {
    absl::MutexLock lock(&mu_);
    auto it = attached_.find(*node);
    if (it != attached_.end() && it->second.generation == generation) attached_.erase(it);
  }
  --attach_handlers_;
  LOG(INFO) << "relay: node " << *node << " detached";
  return grpc::Status::OK;
}

grpc::Status RelayService::Connect(grpc::ServerContext* context, BytesStream* stream) {
  proto::RelayBytes first;
  absl::StatusOr<common::NodeId> caller = ReadOpening(context, stream, &first);
  if (!caller.ok()) return Refuse(caller.status());
  absl::StatusOr<common::NodeId> target = common::NodeId::FromBytes(first.target());
  if (!target.ok()) return Refuse(absl::InvalidArgumentError("relay: no target"));
  // The caller's circuits are its streams on the relay quota; the slot is
  // held until this handler returns.
  common::PeerQuota::StreamSlot slot;
  if (options_.quota != nullptr) {
    absl::StatusOr<common::PeerQuota::StreamSlot> s = options_.quota->OpenStream(*caller);
    if (!s.ok()) {
      options_.quota->HoldRefusal(s.status());  // Note [Refusal hold]
      return Refuse(s.status());
    }
    slot = std::move(*s);
  }
  uint64_t id = 0;
  {
    absl::MutexLock lock(&mu_);
    if (absl::Status admitted = AdmitCircuit(*target); !admitted.ok()) return Refuse(admitted);
    id = ++next_circuit_;
    ++target_circuits_[*target];
    Circuit& c = circuits_[id];
    c.caller = *caller;
    c.target = *target;
    c.connect_context = context;
    c.connect = stream;
    proto::RelayCall call;
    call.set_circuit(id);
    call.set_caller(caller->Bytes());
    attached_.at(*target).calls.push_back(std::move(call));
    cv_.SignalAll();
    // The attached node answers with Accept; wait for it (bounded).
    const int64_t steps = std::max<int64_t>(1, options_.accept_timeout / absl::Milliseconds(50));
    for (int64_t i = 0; i < steps && c.accept == nullptr && !shut_down_ &&
                        !context->IsCancelled();
         ++i) {
      cv_.WaitWithTimeout(&mu_, absl::Milliseconds(50));
    }
    if (c.accept == nullptr) {
      ForgetCircuit(id);
      return Refuse(absl::UnavailableError(absl::StrCat(
          "relay: node ", target->ShortString(), " did not accept within ",
          absl::FormatDuration(options_.accept_timeout))));
    }
  }
  return Pump(id, /*connect_side=*/true);
}

absl::Status RelayService::AdmitCircuit(const common::NodeId& target) {
  if (shut_down_ || !attached_.contains(target)) {
    return absl::UnavailableError(
        absl::StrCat("relay: node ", target.ShortString(), " is not attached here"));
  }
  // Note [Relay memory]: counted apart from the attachments, so a node
  // that detaches and attaches again, or another node in its slot, does
  // not add circuits to those still open.
  const int64_t most = int64_t{options_.max_attached} * options_.max_circuits_per_node;
  if (static_cast<int64_t>(circuits_.size()) >= most) {
    return absl::ResourceExhaustedError(
        absl::StrCat("relay: ", circuits_.size(), " circuits open, its most"));
  }
  auto open = target_circuits_.find(target);
  if (open != target_circuits_.end() && open->second >= options_.max_circuits_per_node) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "relay: node ", target.ShortString(), " has ", open->second, " circuits"));
  }
  return absl::OkStatus();
}

void RelayService::ForgetCircuit(uint64_t id) {
  auto it = circuits_.find(id);
  if (it == circuits_.end()) return;
  const common::NodeId target = it->second.target;
  circuits_.erase(it);
  if (auto open = target_circuits_.find(target);
      open != target_circuits_.end() && --open->second <= 0) {
    target_circuits_.erase(open);
  }
  // Its call goes with it, if still queued (Note [Relay memory]: a target
  // that does not read its Attach stream queues at most its circuits'
  // calls).
  if (auto a = attached_.find(target); a != attached_.end()) {
    std::deque<proto::RelayCall>& calls = a->second.calls;
    calls.erase(std::remove_if(calls.begin(), calls.end(),
                               [id](const proto::RelayCall& q) { return q.circuit() == id; }),
                calls.end());
  }
}

grpc::Status RelayService::Accept(grpc::ServerContext* context, BytesStream* stream) {
  proto::RelayBytes first;
  absl::StatusOr<common::NodeId> caller = ReadOpening(context, stream, &first);
  if (!caller.ok()) return Refuse(caller.status());
  const uint64_t id = first.circuit();
  BytesStream* connect = nullptr;
  {
    absl::MutexLock lock(&mu_);
    auto it = circuits_.find(id);
    if (it == circuits_.end()) {
      return Refuse(absl::NotFoundError(absl::StrCat("relay: no circuit ", id)));
    }
    if (it->second.target != *caller) {
      return Refuse(absl::PermissionDeniedError("relay: the circuit is another node's"));
    }
    if (it->second.accept != nullptr) {
      return Refuse(absl::AlreadyExistsError("relay: circuit accepted already"));
    }
    it->second.accept_context = context;
    it->second.accept = stream;
    connect = it->second.connect;
    ++circuits_opened_;
    cv_.SignalAll();
  }
  // Only this handler writes to the Connect stream (the Connect handler
  // only reads it), so the "spliced" message needs no lock.
  connect->Write(proto::RelayBytes());
  return Pump(id, /*connect_side=*/false);
}

// Each circuit has two handlers, one per stream; each reads its own stream
// and writes the other's. Either one ending cancels both calls, and neither
// returns (gRPC then frees its stream) until the other stopped touching it.
grpc::Status RelayService::Pump(uint64_t id, bool connect_side) {
  BytesStream* from = nullptr;
  BytesStream* to = nullptr;
  common::NodeId sender;
  grpc::ServerContext* context = nullptr;
  {
    absl::MutexLock lock(&mu_);
    Circuit& c = circuits_.at(id);
    from = connect_side ? c.connect : c.accept;
    to = connect_side ? c.accept : c.connect;
    // Note [Relay directions]: each side's bytes are its own sender's.
    sender = connect_side ? c.caller : c.target;
    context = connect_side ? c.connect_context : c.accept_context;
  }
  const grpc::Status answer = Copy(from, to, sender, context);
  absl::MutexLock lock(&mu_);
  Circuit& c = circuits_.at(id);
  // A refusal is its call's answer: cancelling that call (either handler)
  // would replace it with CANCELLED. Ending the other call ends the
  // circuit all the same.
  if (!answer.ok()) (connect_side ? c.connect_refused : c.accept_refused) = true;
  if (!c.connect_refused) c.connect_context->TryCancel();
  if (!c.accept_refused) c.accept_context->TryCancel();
  (connect_side ? c.connect_done : c.accept_done) = true;
  cv_.SignalAll();
  while (!(c.connect_done && c.accept_done)) cv_.Wait(&mu_);
  // This handler returns next and gRPC frees its context: Shutdown must
  // not cancel it while the other handler has yet to wake and erase the
  // circuit.
  (connect_side ? c.connect_context : c.accept_context) = nullptr;
  if (++c.left == 2) ForgetCircuit(id);
  return answer;
}

grpc::Status RelayService::Copy(BytesStream* from, BytesStream* to,
                                const common::NodeId& sender, grpc::ServerContext* context) {
  // Note [Paced bytes]: the sender's bytes, before they are forwarded.
  const bool paced = options_.quota != nullptr;
  proto::RelayBytes message;
  while (from->Read(&message)) {
    if (const size_t bytes = message.ByteSizeLong(); bytes > kRelayMaxMessageBytes) {
      ++oversized_;
      return Refuse(Oversized("a message", bytes, kRelayMaxMessageBytes));
    }
    if (message.data().empty()) continue;
    if (paced) {
      if (absl::Status s = PaceSender(sender, message.data().size(), context); !s.ok()) {
        return Refuse(s);
      }
    }
    bytes_relayed_ += static_cast<int64_t>(message.data().size());
    if (!to->Write(message)) break;
  }
  return grpc::Status::OK;
}

absl::Status RelayService::PaceSender(const common::NodeId& sender, size_t bytes,
                                      grpc::ServerContext* context) {
  absl::StatusOr<absl::Duration> wait = options_.quota->Pace(sender, bytes);
  if (!wait.ok()) return wait.status();
  if (*wait <= absl::ZeroDuration()) return absl::OkStatus();
  if (*wait > options_.max_pace) {
    ++over_budget_;
    LOG_EVERY_N(WARNING, 20) << "relay: ended a circuit of " << sender.ShortString()
                             << ", far over its byte budget";
    return absl::ResourceExhaustedError(absl::StrCat(
        "relay: ", sender.ShortString(), " is far over its relay byte budget (its bytes need ",
        absl::FormatDuration(*wait), " to be paid back, more than the ",
        absl::FormatDuration(options_.max_pace), " a circuit may wait); circuit ended"));
  }
  ++paced_;
  // The pause runs on the quota's clock; the handler thread blocks (no
  // read, so HTTP/2 flow control stops the sender) and wakes early when
  // the call is cancelled (the circuit's other end, or Shutdown). The
  // timer's state is shared: it may fire after this returns.
  struct Wake {
    absl::Mutex mu;
    bool fired ABSL_GUARDED_BY(mu) = false;
  };
  auto wake = std::make_shared<Wake>();
  const common::TimerId timer = options_.clock->RunAfter(*wait, [wake] {
    absl::MutexLock lock(&wake->mu);
    wake->fired = true;
  });
  // After the timer is set, so a test that advances the clock on this
  // call wakes the pause.
  if (options_.on_paced) options_.on_paced(sender, *wait);
  bool fired = false;
  {
    absl::MutexLock lock(&wake->mu);
    while (!wake->fired && !context->IsCancelled()) {
      // Cancellation has no signal to wait on: look again every 50 ms.
      wake->mu.AwaitWithTimeout(absl::Condition(&wake->fired), absl::Milliseconds(50));
    }
    fired = wake->fired;
  }
  if (fired) return absl::OkStatus();
  options_.clock->Cancel(timer);
  return absl::CancelledError("relay: the circuit ended while paced");
}

}  // namespace skipswarm::node
