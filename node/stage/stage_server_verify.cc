// The stage server's part in verified compute (tests/adversarial/README.md,
// "Verified compute"): answering verify-only forwards as Y, and pairing X's
// outputs with Y's sketches as the hop after X.
#include "node/stage/stage_server_impl.h"

namespace skipswarm::node {

// Note [Verify-only frames]
// The hop before replica X sends a copy of X's forward frame to Y with
// header.verify set (the seed, X's id) and route[hop_index] naming Y.
// Y (AdmitVerify):
//  - admits it only for a stage it hosts (not stage 0), of its current
//    iteration (after its step its weights differ from X's: a check would
//    judge two different models; one that comes between our iterations,
//    after our EndIteration(i - 1), for i, waits until BeginIteration(i),
//    as a training forward of i does: refused, as before, it cost the
//    checks of each iteration's first micro-batches whenever the hop
//    before began i ahead of us), within max_verify_queued in all and
//    max_verify_per_sender from one sender, else RESOURCE_EXHAUSTED (the
//    hop before simply skips the check) or the reason; counted in
//    verify_refused. No entry, no duplicate key, no onward hop.
//  - runs it only when no backward or forward can run (verify-only work
//    never delays training), holding a memory slot while it runs, as
//    StageCompute::SketchForward (the kEval forward: nothing stashed,
//    weights untouched), and sends the hop after X (route[hop_index + 1],
//    or the origin's tail, hop 0, after the last hop) a DIRECTION_SKETCH
//    frame: the header as received, no tensor, a SketchAnswer. A failed
//    compute or send is counted (verify_failed) and forgotten.
//  - drops waiting ones whose iteration ended.
// The hop after (HandleSketch, KeepOutputForCheck) feeds OutputChecks
// (Note [Pending output checks]): each forward or tail frame admitted from
// a hop > 0 that is on probation (member_on_probation) is kept by
// reference, and one from a trusted hop too, in a second OutputChecks,
// when on_trusted_verdict is set (Note [Trusted disputes]); each sketch
// frame is decoded (AnswerFromProto, sketch_limits) and must name this
// frame's micro-batch and the hop just before this one, else it is refused
// INVALID_ARGUMENT (sketch_frames_refused).

absl::Status StageServer::Impl::AdmitVerify(const PeerId& from, const Frame& frame,
                                            bool* runnable) {
  const proto::FrameHeader& h = frame.header;
  *runnable = false;
  absl::MutexLock lock(&mu_);
  auto refuse = [&](absl::StatusCode code, absl::string_view why)
                    ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ++stats_.verify_refused;
    return Refuse(code, h, absl::StrCat("verify-only: ", why));
  };
  if (!IsForward(h) || h.hop_index() == 0 ||
      h.hop_index() >= static_cast<uint32_t>(h.route_size()) ||
      h.route(h.hop_index()).node_id() != self_bytes_) {
    return refuse(absl::StatusCode::kInvalidArgument, "not a forward for this node");
  }
  const int stage = static_cast<int>(h.route(h.hop_index()).stage());
  if (stage == 0 || ComputeFor(stage) == nullptr) {
    return refuse(absl::StatusCode::kInvalidArgument,
                  absl::StrCat("stage ", stage, " is not hosted here"));
  }
  if (!PeerId::FromBytes(h.verify().checked()).ok()) {
    return refuse(absl::StatusCode::kInvalidArgument, "no checked replica");
  }
  // Between EndIteration(i - 1) and BeginIteration(i) (iteration_ is i,
  // paused_) a check of i is admitted and waits in verify_q_: nothing is
  // dispatched while paused_, so it runs after our step i - 1, on X's weights.
  if (h.iteration() != iteration_) {
    return refuse(absl::StatusCode::kFailedPrecondition,
                  absl::StrCat("iteration ", h.iteration(), " is not this node's current ",
                               iteration_));
  }
  auto mine = verify_by_sender_.find(from);
  if (verify_in_flight_ >= options_.max_verify_queued ||
      (mine != verify_by_sender_.end() && mine->second >= options_.max_verify_per_sender)) {
    return refuse(absl::StatusCode::kResourceExhausted, "verify queue full");
  }
  ++verify_in_flight_;
  ++verify_by_sender_[from];
  Task task;
  task.kind = Task::kVerify;
  task.header = h;
  task.payload = frame.payload;
  task.from = from;
  verify_q_.push_back(std::move(task));
  *runnable = true;
  return absl::OkStatus();
}

bool StageServer::Impl::TakeVerifyLocked(Task* task) {
  if (verify_q_.empty() || slots_in_use_ >= memory_slots_) return false;
  *task = std::move(verify_q_.front());
  verify_q_.pop_front();
  ++slots_in_use_;
  return true;
}

void StageServer::Impl::RunVerify(Task task) {
  const proto::FrameHeader& h = task.header;
  StageCompute* compute = ComputeFor(static_cast<int>(h.route(h.hop_index()).stage()));
  WireTensor input{h.tensor(), task.payload};
  const uint64_t seed = h.verify().seed();
  std::weak_ptr<Impl> weak = weak_from_this();
  compute->SketchForward(
      std::move(input), seed,
      [weak, task = std::move(task)](absl::StatusOr<model::OutputSketch> sketch) mutable {
        if (auto self = weak.lock()) self->OnVerifyDone(std::move(task), std::move(sketch));
      });
}

void StageServer::Impl::OnVerifyDone(Task task, absl::StatusOr<model::OutputSketch> sketch) {
  const proto::FrameHeader& h = task.header;
  bool current;
  {
    absl::MutexLock lock(&mu_);
    --slots_in_use_;
    EndVerifyLocked(task.from);
    current = h.iteration() == iteration_;
    if (!sketch.ok() || !current) ++stats_.verify_failed;
  }
  if (!sketch.ok() || !current) {
    VLOG(1) << "verify-only forward not answered: " << DescribeFrame(h) << ": "
            << (sketch.ok() ? absl::AbortedError("iteration ended") : sketch.status());
    return Done();
  }
  absl::StatusOr<PeerId> origin = PeerId::FromBytes(h.origin());
  absl::StatusOr<PeerId> checked = PeerId::FromBytes(h.verify().checked());
  const uint32_t hop = h.hop_index();
  const uint32_t next = hop + 1 < static_cast<uint32_t>(h.route_size()) ? hop + 1 : 0;
  absl::StatusOr<PeerId> to = PeerId::FromBytes(h.route(next).node_id());
  if (!origin.ok() || !checked.ok() || !to.ok()) {
    absl::MutexLock lock(&mu_);
    ++stats_.verify_failed;
    return Done();
  }
  Frame answer;
  answer.header = h;
  answer.header.clear_verify();
  answer.header.clear_tensor();
  answer.header.clear_commitment();  // the hop before's, of X's input
  answer.header.clear_input_commitment();
  answer.header.clear_earlier_commitments();
  answer.header.set_hop_index(next);
  answer.header.set_direction(proto::DIRECTION_SKETCH);
  *answer.header.mutable_sketch_answer() = AnswerToProto(
      SketchAnswer{CheckedVisit{*origin, h.iteration(), h.mb_id(), hop, *checked},
                   *std::move(sketch)});
  if (options_.signer != nullptr) {
    // Note [Checkable evidence]: Y signs its answer with the hash of the
    // input it got, which X's commitment must name too.
    absl::Status signed_ok = SignAnswer(*options_.signer, h.swarm_id(), Sha256(task.payload),
                                        answer.header.mutable_sketch_answer());
    if (!signed_ok.ok()) {
      LOG_EVERY_N(ERROR, 100) << "cannot sign a sketch answer: " << signed_ok;
    }
  }
  answer.header.set_deadline_ms(
      static_cast<uint32_t>(absl::ToInt64Milliseconds(options_.hop_deadline)));
  SealFrame(answer);
  {
    absl::MutexLock lock(&mu_);
    ++stats_.verify_answered;
  }
  if (*to == self_) {
    HandleSketch(self_, answer).IgnoreError();
  } else {
    std::weak_ptr<Impl> weak = weak_from_this();
    transport_->Send(*to, std::move(answer), [weak](absl::Status ack) {
      auto self = weak.lock();
      if (!self || ack.ok()) return;
      absl::MutexLock lock(&self->mu_);
      ++self->stats_.verify_failed;
    });
  }
  Done();
}

void StageServer::Impl::KeepOutputForCheck(const Frame& frame) {
  const proto::FrameHeader& h = frame.header;
  if (!options_.output_checks.judge || !options_.member_on_probation) return;
  const bool keep_trusted = static_cast<bool>(options_.on_trusted_verdict);
  // The hop that produced this frame: the one before, or the last after a
  // tail's wrap to hop 0. The origin's stage 0 is never checked.
  const int prev = h.hop_index() > 0 ? static_cast<int>(h.hop_index()) - 1 : h.route_size() - 1;
  if (prev <= 0 || prev >= h.route_size()) return;
  absl::StatusOr<PeerId> x = PeerId::FromBytes(h.route(prev).node_id());
  absl::StatusOr<PeerId> origin = PeerId::FromBytes(h.origin());
  if (!x.ok() || !origin.ok()) return;
  const bool trusted = !options_.member_on_probation(*x);
  if (trusted && !keep_trusted) return;
  const CheckedVisit visit{*origin, h.iteration(), h.mb_id(), static_cast<uint32_t>(prev), *x};
  PeerId verifier;
  OutputChecks& checks = trusted ? trusted_checks_ : checks_;
  std::optional<model::SketchVerdict> verdict =
      checks.OnOutput(visit, WireTensor{h.tensor(), frame.payload}, &verifier,
                      h.has_commitment() ? &h.commitment() : nullptr,
                      h.has_input_commitment() ? &h.input_commitment() : nullptr);
  OnVerdict(*x, verifier, trusted, verdict);
}

absl::Status StageServer::Impl::HandleSketch(const PeerId& from, const Frame& frame) {
  const proto::FrameHeader& h = frame.header;
  auto refuse = [&](absl::StatusCode code, absl::string_view why) {
    absl::MutexLock lock(&mu_);
    ++stats_.sketch_frames_refused;
    return Refuse(code, h, absl::StrCat("sketch: ", why));
  };
  if (!options_.output_checks.judge) {
    return refuse(absl::StatusCode::kFailedPrecondition, "this node checks no outputs");
  }
  absl::StatusOr<SketchAnswer> answer =
      AnswerFromProto(h.sketch_answer(), options_.sketch_limits);
  if (!answer.ok()) return refuse(absl::StatusCode::kInvalidArgument, answer.status().message());
  const CheckedVisit& v = answer->visit;
  const uint32_t expected_prev =
      h.hop_index() > 0 ? h.hop_index() - 1 : static_cast<uint32_t>(h.route_size() - 1);
  if (v.origin.Bytes() != h.origin() || v.iteration != h.iteration() || v.mb != h.mb_id() ||
      v.hop_index != expected_prev) {
    return refuse(absl::StatusCode::kInvalidArgument,
                  "the answer does not name this frame's micro-batch and the hop before");
  }
  {
    absl::MutexLock lock(&mu_);
    if (h.iteration() < iteration_) {
      ++stats_.sketch_frames_refused;
      return Refuse(absl::StatusCode::kFailedPrecondition, h, "sketch: iteration is over");
    }
  }
  const PeerId checked = answer->visit.checked;
  const bool trusted = options_.member_on_probation && !options_.member_on_probation(checked);
  OnVerdict(checked, from, trusted,
            (trusted ? trusted_checks_ : checks_)
                .OnAnswer(from, *std::move(answer),
                          h.sketch_answer().signature().empty() ? nullptr : &h.sketch_answer()));
  return absl::OkStatus();
}

void StageServer::Impl::EndVerifyLocked(const PeerId& from) {
  --verify_in_flight_;
  auto it = verify_by_sender_.find(from);
  if (it != verify_by_sender_.end() && --it->second <= 0) verify_by_sender_.erase(it);
}

void StageServer::Impl::AdvanceVerifyLocked(uint64_t iteration) {
  for (auto it = verify_q_.begin(); it != verify_q_.end();) {
    if (it->header.iteration() >= iteration) {
      ++it;
      continue;
    }
    EndVerifyLocked(it->from);
    it = verify_q_.erase(it);
  }
  if (iteration > 0) {
    checks_.EndIteration(iteration - 1);
    trusted_checks_.EndIteration(iteration - 1);
  }
}

}  // namespace skipswarm::node
