#include "node/stage/stage_server.h"

#include "model/out_of_memory.h"
#include "node/stage/stage_server_impl.h"

namespace skipswarm::node {

// Note [Abort notices]
// When a micro-batch can go no further (a hop failed and could not be
// repaired, or a compute step failed), the node that notices drops its own
// visit and sends an abort notice upstream: a BACKWARD frame with an empty
// payload and no tensor, to hop k (skipping a dead hop). The receiver drops
// its visit (freeing the slot and the stashed activations) and passes the
// notice on to hop k-1; at the origin the MB ends with ABORTED. Without
// notices upstream visits would hold their slots until the origin's MB
// deadline; a lost notice falls back to that deadline.
//
// Note [Relay drops]: a relay that drops a visit for its own reasons also
// tells the hop before, at once: visits of an iteration it ends or moves
// past (EndIteration, BeginIteration; "iteration_ended") and a waiting
// frame displaced by a nearer one (Note [Admitted iterations]). Those
// frames had been acknowledged, so without a notice their origin waited
// out its whole MB deadline, and a drop that says nothing about a healthy
// micro-batch's time then counted as one that lasted that long (Note [MB
// deadline] in node/train/data_node_driver.h). A frame refused outright is
// reported by its refusal (the ack). A server replaced whole (a re-entry,
// a stage move, a stop) reports what it holds only if its owner calls
// ReleaseAll first; a crash reports nothing (Note [Lost with a
// neighbour] and the MB deadline cover it).
//
// Note [Who may abort]: a notice ends the visit only when it comes from a
// peer with a part in the micro-batch: the one that admitted this visit's
// output (the peer the frame was sent to), a later hop of the route as
// this node last sent it (a notice skips a dead or hung hop), the
// micro-batch's origin, or this node. Anyone else is refused with
// PERMISSION_DENIED, so a stranger that guesses (origin, iteration, mb)
// cannot cancel others' micro-batches.
bool IsAbortNotice(const Frame& f) {
  return f.header.direction() == proto::DIRECTION_BACKWARD && f.payload.empty() &&
         f.header.tensor().dtype() == proto::DTYPE_UNSPECIFIED;
}

absl::Status StageServer::Impl::Receive(const PeerId& from, const Frame& frame, bool* runnable) {
  *runnable = false;
  if (IsAbortNotice(frame)) return HandleAbort(from, frame);
  if (frame.header.direction() == proto::DIRECTION_SKETCH) return HandleSketch(from, frame);
  if (frame.header.has_verify()) return AdmitVerify(from, frame, runnable);
  if (IsForward(frame.header)) {
    absl::Status committed = CheckCommitment(frame);
    if (!committed.ok()) return committed;
  }
  std::optional<proto::FrameHeader> displaced;
  absl::Status admitted = Admit(frame, runnable, &displaced);
  if (displaced) {
    SendRelayAborts({*displaced}, absl::AbortedError("displaced by a nearer iteration's frame"));
  }
  if (admitted.ok() && IsForward(frame.header)) KeepOutputForCheck(frame);
  return admitted;
}

bool StageServer::Impl::MayAbortLocked(const MbKey& key, const Entry& e,
                                       const PeerId& from) const {
  const std::string bytes = from.Bytes();
  if (from == self_ || bytes == key.origin) return true;
  if (!e.next_admitted.IsZero() && from == e.next_admitted) return true;
  for (int i = static_cast<int>(key.hop) + 1; i < e.header.route_size(); ++i) {
    if (e.header.route(i).node_id() == bytes) return true;
  }
  return false;
}

absl::Status StageServer::Impl::HandleAbort(const PeerId& from, const Frame& frame) {
  const proto::FrameHeader& h = frame.header;
  if (h.hop_index() >= static_cast<uint32_t>(h.route_size()) ||
      h.route(h.hop_index()).node_id() != self_bytes_) {
    return Refuse(absl::StatusCode::kInvalidArgument, h, "abort notice not for this node");
  }
  absl::Status why = absl::AbortedError("micro-batch lost downstream");
  if (h.abort_cause().kind() == proto::AbortCause::ABORT_CAUSE_STOPPING) {
    // Note [Stopping refusals]: passed on unchanged, to the origin.
    absl::StatusOr<PeerId> node = PeerId::FromBytes(h.abort_cause().node());
    why = WithStoppingCause(
        absl::AbortedError(absl::StrCat(
            "micro-batch lost downstream: ", node.ok() ? node->ShortString() : "a hop", " ",
            kStoppingNode, " after iteration ", h.abort_cause().stop_after())),
        h.abort_cause());
    // Note [Confirmed stopping] (node/train/data_node_driver.h): who
    // delivered the claim, for the origin (not passed on: SendAbort copies
    // the cause alone).
    why = WithDeliveredBy(std::move(why), from);
  }
  std::vector<std::pair<StageCompute*, uint64_t>> discards;
  std::vector<std::pair<MbKey, absl::Status>> finished;
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(MbKey::Of(h));
    if (it == entries_.end()) {
      return Refuse(absl::StatusCode::kNotFound, h, "abort for an unknown micro-batch");
    }
    if (!MayAbortLocked(it->first, it->second, from)) {  // Note [Who may abort]
      return Refuse(absl::StatusCode::kPermissionDenied, h,
                    absl::StrCat("abort notice from ", from.ShortString(),
                                 ", which has no part in this micro-batch"));
    }
    DropLocked(MbKey::Of(h), why, "aborted_downstream", discards, finished);
  }
  Finish(discards, finished);
  if (h.hop_index() > 0) SendAbort(h, h.hop_index() - 1, why);
  return absl::OkStatus();
}

// Note [Lost with a neighbour]
// A visit whose forward output was admitted by the next hop is lost when
// that node dies: the activation (or the MB's later path) died with it, and
// the backward can never come back through it. So on a peer-failure event
// each node drops its visits whose next_admitted is the dead peer and aborts
// the hops before (Note [Abort notices]); the hops after are handled by the
// dead node's other neighbour. MBs still waiting to be sent are re-routed
// by the failing send instead.
void StageServer::Impl::OnPeerFailure(const PeerId& peer) {
  view_->MarkDead(peer);
  std::vector<std::pair<StageCompute*, uint64_t>> discards;
  std::vector<std::pair<MbKey, absl::Status>> finished;
  std::vector<std::pair<proto::FrameHeader, uint32_t>> aborts;
  const absl::Status why =
      absl::AbortedError(absl::StrCat("next hop ", peer.ShortString(), " died holding it"));
  {
    absl::MutexLock lock(&mu_);
    std::vector<std::pair<MbKey, proto::FrameHeader>> lost;
    for (const auto& [key, entry] : entries_) {
      if (entry.next_admitted == peer) lost.push_back({key, entry.header});
    }
    for (const auto& [key, header] : lost) {
      DropLocked(key, why, "next_hop_died", discards, finished);
      if (key.hop > 0) aborts.push_back({header, key.hop - 1});
    }
  }
  Finish(discards, finished);
  for (const auto& [header, hop] : aborts) SendAbort(header, hop, why);
}

void StageServer::Impl::SendAbort(const proto::FrameHeader& header, uint32_t hop,
                                  const absl::Status& why) {
  Frame f;
  f.header = header;
  f.header.set_hop_index(hop);
  f.header.set_direction(proto::DIRECTION_BACKWARD);
  f.header.clear_tensor();
  StripForwardEvidence(&f.header);
  // Note [Stopping refusals]: the cause only this node's `why` states
  // (HandleAbort puts a received notice's cause there).
  f.header.clear_abort_cause();
  if (std::optional<proto::AbortCause> cause = AbortCauseOf(why)) {
    *f.header.mutable_abort_cause() = *cause;
  }
  f.header.set_deadline_ms(
      static_cast<uint32_t>(absl::ToInt64Milliseconds(options_.hop_deadline)));
  SealFrame(f);
  absl::StatusOr<PeerId> to = PeerId::FromBytes(f.header.route(hop).node_id());
  if (!to.ok()) return;
  VLOG(1) << "abort notice to hop " << hop << ": " << DescribeFrame(f.header) << ": " << why;
  if (*to == self_) {
    std::weak_ptr<Impl> weak = weak_from_this();
    clock_->RunAfter(absl::ZeroDuration(), [weak, f = std::move(f)] {
      if (auto self = weak.lock()) self->HandleAbort(self->self_, f).IgnoreError();
    });
    return;
  }
  std::weak_ptr<Impl> weak = weak_from_this();
  const uint32_t next = hop;
  transport_->Send(*to, std::move(f), [weak, header, next, why](absl::Status ack) {
    // The notice could not reach hop `next` (dead too): skip it, with the
    // same cause.
    auto self = weak.lock();
    if (!self || ack.ok() || absl::IsNotFound(ack) || next == 0) return;
    VLOG(1) << "abort notice to hop " << next << " not delivered: " << ack;
    self->SendAbort(header, next - 1, why);
  });
}

absl::Status StageServer::Impl::Admit(const Frame& frame, bool* runnable,
                                      std::optional<proto::FrameHeader>* displaced) {
  const proto::FrameHeader& h = frame.header;
  *runnable = false;
  if (h.hop_index() >= static_cast<uint32_t>(h.route_size()) ||
      h.route(h.hop_index()).node_id() != self_bytes_) {
    return Refuse(absl::StatusCode::kInvalidArgument, h, "route does not name this node here");
  }
  const int stage = static_cast<int>(h.route(h.hop_index()).stage());
  // Note [Newcomer micro-batches]: asked before our lock (the callback
  // takes the daemon's).
  bool newcomer = false;
  if (IsForward(h) && h.hop_index() > 0 && options_.newcomer_in_flight > 0 &&
      options_.origin_on_probation) {
    absl::StatusOr<PeerId> origin = PeerId::FromBytes(h.origin());
    newcomer = origin.ok() && options_.origin_on_probation(*origin);
  }
  absl::MutexLock lock(&mu_);
  if (h.iteration() < iteration_) {
    return Refuse(absl::StatusCode::kFailedPrecondition, h,
                  absl::StrCat("iteration is over (now ", iteration_, ")"));
  }
  const MbKey key = MbKey::Of(h);
  auto it = entries_.find(key);
  Task task;
  task.header = h;
  task.payload = frame.payload;
  if (IsForward(h) && h.hop_index() == 0) {  // the tail, at the origin
    if (h.origin() != self_bytes_) {
      return Refuse(absl::StatusCode::kInvalidArgument, h, "tail frame for another origin");
    }
    if (it == entries_.end() || !it->second.forward_done || it->second.tail_done) {
      return Refuse(absl::StatusCode::kNotFound, h, "tail of an unknown micro-batch");
    }
    it->second.tail_done = true;
    task.kind = Task::kTail;
    backward_q_.push_back(std::move(task));
  } else if (IsForward(h)) {
    if (ComputeFor(stage) == nullptr || stage == 0) {
      return Refuse(absl::StatusCode::kInvalidArgument, h,
                    absl::StrCat("stage ", stage, " is not hosted here"));
    }
    if (it != entries_.end()) {
      return Refuse(absl::StatusCode::kAlreadyExists, h, "duplicate micro-batch");
    }
    if (h.iteration() - iteration_ > static_cast<uint64_t>(options_.max_iteration_lead)) {
      // Note [Behind the swarm]: it would wait here until the MB's deadline.
      ++stats_.frames_behind;
      return Refuse(absl::StatusCode::kResourceExhausted, h,
                    absl::StrCat(kBehind, " (at iteration ", iteration_, ")"));
    }
    if (volunteer_paused_at_ && h.iteration() > *volunteer_paused_at_) {
      ++stats_.frames_paused;  // Note [Paused members]: re-routed at once
      return Refuse(absl::StatusCode::kResourceExhausted, h,
                    absl::StrCat(kPausedNode, " (since iteration ", *volunteer_paused_at_, ")"));
    }
    if (stop_after_ && h.iteration() > *stop_after_) {
      ++stats_.frames_stopping;  // Note [Stopping server]: nothing half-done here
      return Refuse(absl::StatusCode::kResourceExhausted, h,
                    absl::StrCat(kStoppingNode, " after iteration ", *stop_after_));
    }
    if (newcomer) {  // Note [Newcomer micro-batches]
      int held = 0;
      for (const auto& [k, e] : entries_) held += e.newcomer;
      if (held >= options_.newcomer_in_flight) {
        ++stats_.frames_newcomer_capped;
        return Refuse(absl::StatusCode::kResourceExhausted, h,
                      absl::StrCat("micro-batches of members on probation hold ", held,
                                   " of this node's slots and queue"));
      }
    }
    // Note [Admitted iterations]: later iterations' frames wait in a queue
    // of their own, as long as one iteration's admission, so they never
    // take the current iteration's slots or queue; when it is full, a
    // nearer iteration's frame displaces the farthest one.
    const bool later = h.iteration() > iteration_;
    const int capacity = memory_slots_ + options_.max_queued_forwards;
    if (later && static_cast<int>(deferred_.size()) >= capacity) {
      auto farthest = std::max_element(
          deferred_.begin(), deferred_.end(), [](const Task& a, const Task& b) {
            return a.header.iteration() < b.header.iteration();
          });
      if (farthest == deferred_.end() || farthest->header.iteration() <= h.iteration()) {
        return Refuse(absl::StatusCode::kResourceExhausted, h, "the later iterations' queue is full");
      }
      LOG_EVERY_N(WARNING, 20) << "dropped a waiting frame of iteration "
                               << farthest->header.iteration() << " for one of iteration "
                               << h.iteration();
      entries_.erase(MbKey::Of(farthest->header));
      *displaced = farthest->header;  // Note [Relay drops]
      (*displaced)->clear_tensor();
      deferred_.erase(farthest);
      ++stats_.frames_displaced;
    } else if (!later && slots_in_use_ + static_cast<int>(forward_q_.size()) >= capacity) {
      return Refuse(absl::StatusCode::kResourceExhausted, h, "no free memory slot");
    }
    Entry& entry = entries_[key] = Entry::Make(next_local_id_++, stage);
    entry.newcomer = newcomer;
    entry.header = h;  // for a notice if this visit is dropped (Note [Relay drops])
    entry.header.clear_tensor();
    task.kind = Task::kForward;
    (later ? deferred_ : forward_q_).push_back(std::move(task));
  } else if (h.direction() == proto::DIRECTION_BACKWARD) {
    if (it == entries_.end() || !it->second.forward_done || it->second.stage != stage) {
      return Refuse(absl::StatusCode::kNotFound, h, "gradient for an unknown micro-batch");
    }
    task.kind = Task::kBackward;
    backward_q_.push_back(std::move(task));
  } else {
    return Refuse(absl::StatusCode::kInvalidArgument, h, "no direction");
  }
  ++stats_.frames_admitted;
  *runnable = true;
  return absl::OkStatus();
}

void StageServer::Impl::MaybeDispatch() {
  {
    absl::MutexLock lock(&mu_);
    if (dispatch_posted_ || busy_ || paused_) return;
    dispatch_posted_ = true;
  }
  std::weak_ptr<Impl> weak = weak_from_this();
  clock_->RunAfter(absl::ZeroDuration(), [weak] {
    if (auto self = weak.lock()) self->DispatchNow();
  });
}

void StageServer::Impl::DispatchNow() {
  Task task;
  bool verify = false;
  {
    absl::MutexLock lock(&mu_);
    dispatch_posted_ = false;
    if (busy_ || paused_) return;
    const bool backward_ok = !backward_q_.empty();
    const bool forward_ok = !forward_q_.empty() && slots_in_use_ < memory_slots_;
    if (!backward_ok && !forward_ok) {
      // Verify-only work goes last (Note [Verify-only frames]).
      if (!TakeVerifyLocked(&task)) return;
      verify = true;
    } else {
      auto bwd = Best(backward_q_);
      auto fwd = Best(forward_q_);
      // Note [Queue order]: a forward goes first only with a strictly lower
      // priority (as in scheduler/evaluator.cc).
      const bool take_forward =
          forward_ok && (!backward_ok || fwd->header.priority() < bwd->header.priority());
      if (!take_forward) {
        task = std::move(*bwd);
        backward_q_.erase(bwd);
      } else {
        task = std::move(*fwd);
        forward_q_.erase(fwd);
        auto it = entries_.find(MbKey::Of(task.header));
        if (it == entries_.end()) return;  // dropped while queued; cannot happen
        it->second.holds_slot = true;
        ++slots_in_use_;
      }
    }
    busy_ = true;
  }
  if (verify) return RunVerify(std::move(task));
  Run(std::move(task));
}

void StageServer::Impl::Run(Task task) {
  const proto::FrameHeader& h = task.header;
  const int stage = static_cast<int>(h.route(h.hop_index()).stage());
  StageCompute* compute = ComputeFor(stage);
  uint64_t local_id = 0;
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(MbKey::Of(h));
    if (it != entries_.end() && compute != nullptr) local_id = it->second.local_id;
  }
  if (local_id == 0) return Done();  // dropped while queued (iteration ended)
  task.local_id = local_id;
  VLOG(2) << "run " << static_cast<int>(task.kind) << " at " << clock_->SteadyNow() << ": "
          << DescribeFrame(h) << " prio " << h.priority();
  std::weak_ptr<Impl> weak = weak_from_this();
  WireTensor input{h.tensor(), task.payload};
  if (task.kind == Task::kForward && options_.signer != nullptr) {
    // Note [Checkable evidence]: the hop before's commitment, checked at
    // admission (CheckCommitment hashed this payload then), already names
    // the input's hash; hashing again only where nothing checked it.
    task.input_sha256 = options_.public_key_of && h.has_commitment()
                            ? h.commitment().output_sha256()
                            : Sha256(task.payload);
  }
  switch (task.kind) {
    case Task::kStart: {
      MicroBatchData data = std::move(task.data);
      compute->Start(local_id, std::move(data),
                     [weak, task = std::move(task)](absl::StatusOr<WireTensor> out) mutable {
                       if (auto self = weak.lock()) self->OnForwardDone(std::move(task), std::move(out));
                     });
      break;
    }
    case Task::kForward:
      compute->Forward(local_id, std::move(input),
                       [weak, task = std::move(task)](absl::StatusOr<WireTensor> out) mutable {
                         if (auto self = weak.lock()) self->OnForwardDone(std::move(task), std::move(out));
                       });
      break;
    case Task::kTail:
      compute->Tail(local_id, std::move(input),
                    [weak, task = std::move(task)](absl::StatusOr<TailOutput> out) mutable {
                      if (auto self = weak.lock()) self->OnTailDone(std::move(task), std::move(out));
                    });
      break;
    case Task::kBackward:
      compute->Backward(local_id, std::move(input),
                        [weak, task = std::move(task)](absl::StatusOr<WireTensor> out) mutable {
                          if (auto self = weak.lock()) self->OnBackwardDone(std::move(task), std::move(out));
                        });
      break;
    case Task::kVerify:  // never here: TryRun hands verify-only work to RunVerify
      LOG(DFATAL) << "verify-only task in Run: " << DescribeFrame(h);
      return Done();
  }
}

void StageServer::Impl::OnForwardDone(Task task, absl::StatusOr<WireTensor> out) {
  const MbKey key = MbKey::Of(task.header);
  if (!out.ok()) {
    LOG(WARNING) << "forward failed, dropping: " << DescribeFrame(task.header) << ": "
                 << out.status();
    ComputeFailed(key, out.status());
    if (key.hop > 0) SendAbort(task.header, key.hop - 1, out.status());
    return Done();
  }
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(key);
    if (it != entries_.end()) {
      it->second.forward_done = true;
      it->second.header = task.header;
      it->second.header.clear_tensor();
      ++stats_.forwards;
    }
  }
  if (!Holds(key)) return Forget(task), Done();  // dropped while it ran
  Frame next;
  next.header = std::move(task.header);
  const uint32_t hop = next.header.hop_index();
  next.header.set_hop_index(hop + 1 < static_cast<uint32_t>(next.header.route_size()) ? hop + 1 : 0);
  next.header.set_direction(proto::DIRECTION_FORWARD);
  *next.header.mutable_tensor() = out->meta;
  next.payload = std::move(out->payload);
  CommitOutput(hop, task.input_sha256, &next);
  MaybeSendVerify(next);
  SendFrame(std::move(next), {});
  Done();
}

void StageServer::Impl::OnTailDone(Task task, absl::StatusOr<TailOutput> out) {
  const MbKey key = MbKey::Of(task.header);
  if (!out.ok()) {
    LOG(WARNING) << "tail failed, dropping: " << DescribeFrame(task.header) << ": "
                 << out.status();
    ComputeFailed(key, out.status());
    if (task.header.route_size() > 1) SendAbort(task.header, task.header.route_size() - 1, out.status());
    return Done();
  }
  if (!Holds(key)) return Forget(task), Done();  // abandoned while the tail ran
  {
    ListenerCall call;
    {
      absl::MutexLock lock(&mu_);
      call = ListenerLocked();
    }
    if (call) {
      std::vector<int> stages;
      for (const proto::Hop& hop : task.header.route()) {
        if (hop.stage() != 0) stages.push_back(static_cast<int>(hop.stage()));
      }
      call.listener->OnRoute(key.iteration, key.mb, stages);
      call.listener->OnTail(key.iteration, key.mb, out->loss);
    }
  }
  Frame back;
  back.header = std::move(task.header);
  back.header.set_hop_index(back.header.route_size() - 1);
  back.header.set_direction(proto::DIRECTION_BACKWARD);
  *back.header.mutable_tensor() = out->grad.meta;
  back.payload = std::move(out->grad.payload);
  SendFrame(std::move(back), {});
  Done();
}

void StageServer::Impl::OnBackwardDone(Task task, absl::StatusOr<WireTensor> out) {
  const MbKey key = MbKey::Of(task.header);
  if (!out.ok()) {
    LOG(WARNING) << "backward failed, dropping: " << DescribeFrame(task.header) << ": "
                 << out.status();
    ComputeFailed(key, out.status());
    if (key.hop > 0) SendAbort(task.header, key.hop - 1, out.status());
    return Done();
  }
  ListenerCall call;
  bool found = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(key);
    if (it != entries_.end()) {
      found = true;
      if (it->second.holds_slot) --slots_in_use_;
      entries_.erase(it);
      ++stats_.backwards;
      if (key.hop == 0) call = ListenerLocked();
    }
  }
  if (!found) return Done();  // dropped while it ran: nothing goes on
  if (key.hop == 0) {
    if (call) call.listener->OnFinished(key.iteration, key.mb, absl::OkStatus());
    return Done();
  }
  Frame back;
  back.header = std::move(task.header);
  back.header.set_hop_index(key.hop - 1);
  *back.header.mutable_tensor() = out->meta;
  back.payload = std::move(out->payload);
  SendFrame(std::move(back), {});
  Done();
}

// Note [Memory slots]: a compute task that fails with model::IsOutOfMemory
// (model/torch_guard.h, Note [Out of memory]) ran out of memory. The MB is
// dropped like any failed task, and the node admits fewer MBs from now on:
// as many as were resident beside the failed one, at least one less than
// before, never below one. So a node that over-estimated its memory settles
// at what it can hold instead of failing (or crash-looping) on every MB.
void StageServer::Impl::ComputeFailed(const MbKey& key, const absl::Status& why) {
  if (model::IsOutOfMemory(why)) {
    int before = 0, after = 0;
    {
      absl::MutexLock lock(&mu_);
      before = memory_slots_;
      // slots_in_use_ still counts the failed MB (a forward or backward
      // holds its slot until dropped just below).
      memory_slots_ = std::max(1, std::min(memory_slots_ - 1, slots_in_use_ - 1));
      after = memory_slots_;
      ++stats_.out_of_memory;
    }
    LOG(WARNING) << "out of memory on " << self_.ShortString() << ": memory slots " << before
                 << " -> " << after;
    Drop(key, why, "out_of_memory");
    return;
  }
  Drop(key, why, "compute_failed");
}

void StageServer::Impl::Finish(const std::vector<std::pair<StageCompute*, uint64_t>>& discards,
                               const std::vector<std::pair<MbKey, absl::Status>>& finished) {
  for (const auto& [compute, id] : discards) {
    if (compute != nullptr) compute->Discard(id);
  }
  if (finished.empty()) return;
  ListenerCall call;
  {
    absl::MutexLock lock(&mu_);
    call = ListenerLocked();
  }
  if (!call) return;
  for (const auto& [key, why] : finished) call.listener->OnFinished(key.iteration, key.mb, why);
}

// ---------------------------------------------------------------------------

StageServer::StageServer(Transport* transport, common::Clock* clock, SwarmView* view,
                         std::map<int, StageCompute*> stages, StageServerOptions options)
    : impl_(std::make_shared<Impl>(transport, clock, view, std::move(stages), std::move(options))),
      self_(transport->self()) {}

StageServer::~StageServer() = default;

void StageServer::Attach() {
  std::weak_ptr<Impl> weak = impl_;
  impl_->transport_->SetFrameHandler([weak](const PeerId& from, Frame frame, AckFn ack) {
    auto self = weak.lock();
    if (!self) return ack(absl::UnavailableError("stage server is gone"));
    self->hops_.RecordReceived(from, static_cast<int64_t>(frame.payload.size()));
    bool runnable = false;
    absl::Status admitted = self->Receive(from, frame, &runnable);
    if (!admitted.ok()) {
      // A notice for a visit already gone is routine (its hop dropped it
      // too, e.g. at the same iteration end): not worth a warning.
      if (IsAbortNotice(frame) && absl::IsNotFound(admitted)) {
        VLOG(1) << "stale abort notice from " << from << ": " << admitted;
      } else {
        LOG(WARNING) << "refused frame from " << from << ": " << admitted;
      }
      absl::MutexLock lock(&self->mu_);
      ++self->stats_.frames_refused;
    }
    ack(admitted);
    if (runnable) self->MaybeDispatch();
  });
  impl_->transport_->SetPeerFailureHandler([weak](const PeerId& peer, const absl::Status& why) {
    if (auto self = weak.lock()) {
      LOG(WARNING) << "peer " << peer << " failed: " << why;
      self->OnPeerFailure(peer);
    }
  });
}

void StageServer::Detach() {
  impl_->transport_->SetFrameHandler(nullptr);
  impl_->transport_->SetPeerFailureHandler(nullptr);
}

void StageServer::SetOriginListener(OriginListener* listener) {
  absl::MutexLock set(&impl_->listener_set_mu_);
  std::unique_ptr<common::LifetimeGuard> old = std::move(impl_->listener_guard_);
  impl_->listener_guard_ = std::make_unique<common::LifetimeGuard>();
  {
    absl::MutexLock lock(&impl_->mu_);
    impl_->listener_ = listener;
    impl_->listener_token_ = impl_->listener_guard_->token();
  }
  // Waits for calls to the old listener in progress (on other threads).
  if (old != nullptr) old->Close();
}

uint64_t StageServer::iteration() const {
  absl::MutexLock lock(&impl_->mu_);
  return impl_->iteration_;
}

void StageServer::SetPaused(bool paused) {
  absl::MutexLock lock(&impl_->mu_);
  if (!paused) {
    impl_->volunteer_paused_at_.reset();
  } else if (!impl_->volunteer_paused_at_) {
    impl_->volunteer_paused_at_ = impl_->iteration_;
  }
}

void StageServer::StopAfter(uint64_t last) {
  std::vector<std::pair<StageCompute*, uint64_t>> discards;
  std::vector<std::pair<MbKey, absl::Status>> finished;
  std::vector<proto::FrameHeader> aborts;
  // Note [Stopping refusals]: a held visit dropped here is refused as a
  // late frame would be, so its notice carries the same cause (this node,
  // `last`) and its origin re-runs the micro-batch. Without the cause the
  // origin counted it as lost downstream, though it computed nothing here.
  proto::AbortCause cause;
  cause.set_kind(proto::AbortCause::ABORT_CAUSE_STOPPING);
  cause.set_node(impl_->self_bytes_);
  cause.set_stop_after(last);
  const absl::Status why = WithStoppingCause(
      absl::AbortedError(absl::StrCat(kStoppingNode, " after iteration ", last)), cause);
  {
    absl::MutexLock lock(&impl_->mu_);
    if (impl_->stop_after_ && *impl_->stop_after_ <= last) return;
    impl_->stop_after_ = last;
    // Frames of later iterations admitted before (Note [Admitted
    // iterations]) would be computed at their BeginIteration, which the
    // trainer still calls after its last iteration.
    impl_->stats_.frames_stopping += static_cast<int64_t>(impl_->DropIterationsLocked(
        [last](uint64_t it) { return it > last; }, why, "stopping", discards, finished, aborts));
  }
  if (!discards.empty()) {
    LOG(WARNING) << "stopping after iteration " << last << ": dropped " << discards.size()
                 << " micro-batch visits of later iterations; telling the hops before";
  }
  impl_->Finish(discards, finished);
  impl_->SendRelayAborts(aborts, why);
}

bool StageServer::paused() const {
  absl::MutexLock lock(&impl_->mu_);
  return impl_->volunteer_paused_at_.has_value();
}

bool StageServer::CanInject() const {
  absl::MutexLock lock(&impl_->mu_);
  // The next iteration's frames do not count (Note [Admitted iterations]).
  const int waiting = static_cast<int>(impl_->forward_q_.size());
  return impl_->slots_in_use_ + waiting < impl_->memory_slots_;
}

absl::Status StageServer::Inject(uint64_t iteration, uint64_t mb,
                                 const std::vector<RouteHop>& route, MicroBatchData data,
                                 int priority) {
  if (route.empty() || route[0].node != self_ || route[0].stage != 0 ||
      impl_->ComputeFor(0) == nullptr) {
    return absl::InvalidArgumentError("a route must start at this data node with stage 0");
  }
  if (route.size() > static_cast<size_t>(kMaxRouteHops)) {
    return absl::InvalidArgumentError("route too long");
  }
  Task task;
  task.kind = Task::kStart;
  proto::FrameHeader& h = task.header;
  h.set_swarm_id(impl_->options_.swarm_id);
  h.set_iteration(iteration);
  h.set_mb_id(mb);
  h.set_origin(impl_->self_bytes_);
  for (const RouteHop& hop : route) {
    proto::Hop* p = h.add_route();
    p->set_node_id(hop.node.Bytes());
    p->set_stage(static_cast<uint32_t>(hop.stage));
  }
  h.set_hop_index(0);
  h.set_direction(proto::DIRECTION_FORWARD);
  h.set_priority(priority);
  task.data = std::move(data);
  {
    absl::MutexLock lock(&impl_->mu_);
    if (impl_->released_) {
      return absl::FailedPreconditionError(
          "this stage server was released: it starts no more micro-batches");
    }
    if (iteration != impl_->iteration_) {
      return absl::FailedPreconditionError(
          absl::StrCat("inject into iteration ", iteration, " while at ", impl_->iteration_));
    }
    const MbKey key = MbKey::Of(h);
    if (impl_->entries_.contains(key)) {
      return absl::AlreadyExistsError(absl::StrCat("micro-batch ", mb, " already injected"));
    }
    const int waiting = static_cast<int>(impl_->forward_q_.size());
    if (impl_->slots_in_use_ + waiting >= impl_->memory_slots_) {
      return absl::ResourceExhaustedError("no free memory slot at the origin");
    }
    impl_->entries_[key] = Entry::Make(impl_->next_local_id_++, 0);
    impl_->forward_q_.push_back(std::move(task));
  }
  impl_->MaybeDispatch();
  return absl::OkStatus();
}

void StageServer::Abandon(uint64_t iteration, uint64_t mb) {
  std::vector<std::pair<StageCompute*, uint64_t>> discards;
  std::vector<std::pair<MbKey, absl::Status>> finished;
  {
    absl::MutexLock lock(&impl_->mu_);
    std::vector<MbKey> keys;
    for (const auto& [key, entry] : impl_->entries_) {
      if (key.origin == impl_->self_bytes_ && key.iteration == iteration && key.mb == mb) {
        keys.push_back(key);
      }
    }
    for (const MbKey& key : keys) {
      impl_->DropLocked(key, absl::DeadlineExceededError("abandoned by the origin"),
                        "mb_deadline", discards, finished);
    }
  }
  impl_->Finish(discards, {});  // the caller already knows
}

size_t StageServer::Impl::DropIterationsLocked(
    absl::FunctionRef<bool(uint64_t iteration)> drop, const absl::Status& why,
    const char* reason, std::vector<std::pair<StageCompute*, uint64_t>>& discards,
    std::vector<std::pair<MbKey, absl::Status>>& finished,
    std::vector<proto::FrameHeader>& aborts) {
  std::vector<MbKey> keys;
  for (const auto& [key, entry] : entries_) {
    if (!drop(key.iteration)) continue;
    keys.push_back(key);
    AddRelayAbort(key, entry, aborts);  // Note [Relay drops]: tell the hop before
  }
  for (const MbKey& key : keys) DropLocked(key, why, reason, discards, finished);
  auto named = [&](const Task& t) { return drop(t.header.iteration()); };
  for (auto* q : {&backward_q_, &forward_q_, &deferred_}) {
    q->erase(std::remove_if(q->begin(), q->end(), named), q->end());
  }
  return keys.size();
}

void StageServer::Impl::AdvanceLocked(uint64_t iteration,
                                      std::vector<std::pair<StageCompute*, uint64_t>>& discards,
                                      std::vector<std::pair<MbKey, absl::Status>>& finished,
                                      std::vector<proto::FrameHeader>& aborts) {
  if (iteration > iteration_) iteration_ = iteration;
  AdvanceVerifyLocked(iteration);
  DropIterationsLocked([iteration](uint64_t it) { return it < iteration; },
                       absl::AbortedError("iteration ended"), "iteration_ended", discards,
                       finished, aborts);
  std::deque<Task> later;
  for (Task& t : deferred_) {
    (t.header.iteration() == iteration_ ? forward_q_ : later).push_back(std::move(t));
  }
  deferred_ = std::move(later);
}

void StageServer::EndIteration(uint64_t iteration, absl::AnyInvocable<void()> quiesced) {
  std::vector<std::pair<StageCompute*, uint64_t>> discards;
  std::vector<std::pair<MbKey, absl::Status>> finished;
  std::vector<proto::FrameHeader> aborts;
  bool idle;
  {
    absl::MutexLock lock(&impl_->mu_);
    impl_->AdvanceLocked(iteration + 1, discards, finished, aborts);
    impl_->paused_ = true;
    idle = !impl_->busy_;
    if (!idle) impl_->quiesced_ = std::move(quiesced);
  }
  if (!discards.empty()) {
    LOG(WARNING) << "iteration " << iteration << " ends with " << discards.size()
                 << " unfinished micro-batch visits here: dropped";
  }
  // The running task (if any) sees its entry gone and drops its result.
  impl_->Finish(discards, finished);
  impl_->SendRelayAborts(aborts, absl::AbortedError("iteration ended"));
  if (idle) impl_->clock_->RunAfter(absl::ZeroDuration(), std::move(quiesced));
}

void StageServer::BeginIteration(uint64_t iteration) {
  std::vector<std::pair<StageCompute*, uint64_t>> discards;
  std::vector<std::pair<MbKey, absl::Status>> finished;
  std::vector<proto::FrameHeader> aborts;
  {
    absl::MutexLock lock(&impl_->mu_);
    impl_->AdvanceLocked(iteration, discards, finished, aborts);
    impl_->paused_ = false;
  }
  if (!discards.empty()) {
    LOG(WARNING) << "iteration " << iteration << " begins: dropped " << discards.size()
                 << " unfinished micro-batch visits of earlier iterations";
  }
  impl_->Finish(discards, finished);
  impl_->SendRelayAborts(aborts, absl::AbortedError("iteration ended"));
  impl_->MaybeDispatch();
}

void StageServer::ReleaseAll() {
  std::vector<std::pair<StageCompute*, uint64_t>> discards;
  std::vector<std::pair<MbKey, absl::Status>> finished;
  std::vector<proto::FrameHeader> aborts;
  const absl::Status why = absl::AbortedError("stage server released");
  {
    absl::MutexLock lock(&impl_->mu_);
    impl_->released_ = true;
    impl_->DropIterationsLocked([](uint64_t) { return true; }, why, "released", discards,
                                finished, aborts);
  }
  if (!discards.empty()) {
    LOG(WARNING) << "released " << discards.size() << " micro-batch visits; telling the hops before";
  }
  impl_->Finish(discards, finished);
  impl_->SendRelayAborts(aborts, why);
}

int StageServer::HeldBefore(uint64_t iteration) const {
  absl::MutexLock lock(&impl_->mu_);
  int n = 0;
  for (const auto& [key, entry] : impl_->entries_) n += key.iteration < iteration;
  return n;
}

StageServerStats StageServer::stats() const {
  absl::MutexLock lock(&impl_->mu_);
  StageServerStats s = impl_->stats_;
  s.hop_latency = impl_->hops_.Histogram();
  s.traffic = impl_->hops_.Traffic();
  s.slots_in_use = impl_->slots_in_use_;
  s.memory_slots = impl_->memory_slots_;
  s.queued = static_cast<int>(impl_->forward_q_.size() + impl_->backward_q_.size() +
                              impl_->deferred_.size());
  s.checks = impl_->checks_.stats();
  s.trusted_checks = impl_->trusted_checks_.stats();
  return s;
}

}  // namespace skipswarm::node
