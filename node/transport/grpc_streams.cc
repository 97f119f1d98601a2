#include "node/transport/grpc_streams.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "common/crc32c.h"
#include "proto/grpc_status.h"

namespace skipswarm::node::internal {
namespace {

proto::FrameAck AckFor(const proto::FrameHeader& header) {
  proto::FrameAck ack;
  ack.set_iteration(header.iteration());
  ack.set_mb_id(header.mb_id());
  ack.set_direction(header.direction());
  return ack;
}

}  // namespace

// ---------------------------------------------------------------- server end

ServerStream::ServerStream(grpc::CallbackServerContext* context,
                           ServerStreamEnv env)
    : env_(std::move(env)) {
  const auto& metadata = context->client_metadata();
  auto it = metadata.find(kNodeIdMetadata);
  absl::StatusOr<PeerId> id =
      it == metadata.end()
          ? absl::StatusOr<PeerId>(absl::InvalidArgumentError(absl::StrCat(
                "pipeline stream without ", kNodeIdMetadata, " metadata")))
          : PeerId::FromHex(absl::string_view(it->second.data(), it->second.size()));
  if (!id.ok()) {
    id = absl::InvalidArgumentError(
        absl::StrCat("bad ", kNodeIdMetadata, ": ", id.status().message()));
  } else if (env_.credentials != nullptr) {
    // Note [Peer authentication]: the certificate must be the claimed node's.
    absl::Status auth = env_.credentials->CheckPeer(context->auth_context(), *id);
    if (!auth.ok()) id = auth;
  }
  bool over_quota = false;  // the quota logs its refusals, one line per interval
  if (id.ok() && env_.quota != nullptr) {
    absl::StatusOr<common::PeerQuota::StreamSlot> slot = env_.quota->OpenStream(*id);
    if (slot.ok()) {
      slot_ = std::move(*slot);
    } else {
      id = slot.status();
      over_quota = true;
    }
  }
  if (!id.ok()) {
    if (!over_quota) {
      LOG(WARNING) << "refused pipeline stream from " << context->peer() << ": "
                   << id.status();
    }
    {
      absl::MutexLock lock(&mu_);
      cancelled_ = true;
      finish_status_ = proto::ToGrpcStatus(id.status());
      // Note [Refusal hold]: the stream does not finish while an answer is
      // owed, so a held refusal keeps it (and this reactor) until its timer.
      if (over_quota) ++unfilled_;
    }
    if (over_quota) {
      // The answer pumps (now or at the timer); `this` may be gone after it.
      env_.quota->AnswerAfterHold(id.status(), [this] {
        {
          absl::MutexLock lock(&mu_);
          --unfilled_;
        }
        Pump();
      });
      return;
    }
    Pump();
    return;
  }
  from_ = *id;
  {
    absl::MutexLock lock(&mu_);
    in_read_ = true;
  }
  StartRead(&in_);
}

void ServerStream::OnReadDone(bool ok) {
  if (!ok) {
    if (assembling_.has_value()) {  // every header gets its ack
      RejectCurrent(assembling_->header,
                    absl::InvalidArgumentError(absl::StrCat(
                        "stream ended after ", next_chunk_, " of ",
                        assembling_->header.chunk_count(), " chunks")));
    }
    {
      absl::MutexLock lock(&mu_);
      in_read_ = false;
      reads_done_ = true;
    }
    Pump();
    return;
  }
  std::optional<Frame> frame = Consume(in_);
  if (frame.has_value()) {
    const uint64_t seq = ReserveAck();
    proto::FrameAck ack = AckFor(frame->header);
    AdmitFrame(env_.validator, env_.handler(), from_, std::move(*frame),
               [this, seq, ack = std::move(ack)](absl::Status status) mutable {
                 FillAck(seq, std::move(ack), status);
               },
               crc_so_far_);
  }
  bool again;
  {
    absl::MutexLock lock(&mu_);
    again = !cancelled_ && !finished_ && !ending_;
    if (again && unfilled_ >= env_.max_unacked_frames) {
      read_paused_ = true;  // FillAck resumes
      again = false;
    }
    in_read_ = again;
  }
  if (again) {
    StartRead(&in_);
  } else {
    Pump();
  }
}

std::optional<Frame> ServerStream::Consume(proto::PipelineMessage& message) {
  if (message.has_header()) {
    if (assembling_.has_value()) {
      RejectCurrent(assembling_->header,
                    absl::InvalidArgumentError(absl::StrCat(
                        "frame cut short: a new header arrived after ",
                        next_chunk_, " of ", assembling_->header.chunk_count(),
                        " chunks")));
    }
    skipping_ = false;
    Frame frame;
    frame.header = std::move(*message.mutable_header());
    absl::Status status = env_.validator->CheckHeader(frame.header);
    bool quiet = false;  // the quota logs its refusals, one line per interval
    if (env_.quota != nullptr) {
      // Note [Peer quotas]: a header pays its message and the payload it
      // declares; one the validator refuses still pays its message.
      absl::Status paid = env_.quota->Admit(
          from_, status.ok() ? frame.header.tensor().payload_bytes() : 0);
      if (!paid.ok()) {
        status = std::move(paid);
        quiet = true;
      }
    }
    if (!status.ok()) {
      if (quiet) {
        // Note [Peer quotas]: a peer over its quota loses the stream (after
        // this frame's ack): it reads no more of what the peer sends, and a
        // new stream costs the peer a message of its budget.
        absl::MutexLock lock(&mu_);
        ending_ = true;
        finish_status_ = proto::ToGrpcStatus(status);
      }
      RejectCurrent(frame.header, std::move(status), quiet);
      skipping_ = true;
      return std::nullopt;
    }
    next_chunk_ = 0;
    bytes_so_far_ = 0;
    crc_so_far_ = 0;
    if (frame.header.chunk_count() == 0) return frame;
    assembling_ = std::move(frame);
    return std::nullopt;
  }
  if (!message.has_chunk() || skipping_ || !assembling_.has_value()) {
    // Not part of a frame whose header paid for it: a chunk of a refused
    // frame, a chunk without a header, an empty message. Each pays its
    // bytes (an empty one a message), or the stream ends for its quota:
    // reading them is not free, and nothing else bounds how many follow.
    if (!PayForUnframed(message)) return std::nullopt;
    if (message.has_chunk() && !skipping_) {
      LOG_EVERY_N(WARNING, 1000) << "discarded a payload chunk without a frame header from "
                                 << from_ << " (" << google::COUNTER << " so far)";
    }
    return std::nullopt;
  }
  absl::Status status = env_.validator->CheckChunk(
      assembling_->header, next_chunk_, bytes_so_far_, message.chunk());
  if (!status.ok()) {
    RejectCurrent(assembling_->header, std::move(status));
    skipping_ = true;
    return std::nullopt;
  }
  std::string* data = message.mutable_chunk()->mutable_data();
  bytes_so_far_ += data->size();
  crc_so_far_ = common::Crc32cExtend(crc_so_far_, *data);
  ++next_chunk_;
  // Moving the string into the Cord adopts its buffer without a copy.
  assembling_->payload.Append(absl::Cord(std::move(*data)));
  if (next_chunk_ < assembling_->header.chunk_count()) return std::nullopt;
  std::optional<Frame> done = std::move(assembling_);
  assembling_.reset();
  return done;
}

bool ServerStream::PayForUnframed(const proto::PipelineMessage& message) {
  if (env_.quota == nullptr) return true;
  absl::Status paid = env_.quota->Admit(from_, message.ByteSizeLong(),
                                        message.has_chunk() ? 0 : 1);
  if (paid.ok()) return true;
  {
    absl::MutexLock lock(&mu_);
    ending_ = true;  // no more reads; the stream ends with the refusal
    finish_status_ = proto::ToGrpcStatus(paid);
    ++unfilled_;  // Note [Refusal hold]: the end waits for the hold
  }
  env_.quota->AnswerAfterHold(paid, [this] {
    {
      absl::MutexLock lock(&mu_);
      --unfilled_;
    }
    Pump();
  });
  return false;
}

void ServerStream::RejectCurrent(const proto::FrameHeader& header,
                                 absl::Status why, bool quiet) {
  env_.validator->LogRejected(from_, header, why, /*by_quota=*/quiet);
  proto::FrameAck ack = AckFor(header);  // `header` may live in assembling_
  assembling_.reset();
  const uint64_t seq = ReserveAck();
  if (env_.quota == nullptr) return FillAck(seq, std::move(ack), why);
  // Note [Refusal hold]: a held quota refusal's ack (and so, for a stream
  // that is ending, its end) waits on the quota's timer; any other answer
  // goes now.
  env_.quota->AnswerAfterHold(why, [this, seq, ack = std::move(ack), why]() mutable {
    FillAck(seq, std::move(ack), why);
  });
}

uint64_t ServerStream::ReserveAck() {
  absl::MutexLock lock(&mu_);
  acks_.emplace_back(std::nullopt);
  ++unfilled_;
  return first_seq_ + acks_.size() - 1;
}

void ServerStream::FillAck(uint64_t seq, proto::FrameAck ack,
                           const absl::Status& status) {
  ack.set_code(static_cast<int>(status.code()));
  ack.set_message(std::string(status.message()));
  bool resume;
  {
    absl::MutexLock lock(&mu_);
    acks_[seq - first_seq_] = std::move(ack);
    --unfilled_;
    resume = read_paused_ && !cancelled_ && !finished_ && !ending_ &&
             unfilled_ < env_.max_unacked_frames;
    if (resume) {
      read_paused_ = false;
      in_read_ = true;
    }
  }
  if (resume) StartRead(&in_);
  Pump();
}

void ServerStream::Pump() {
  enum class Action { kNone, kWrite, kFinish } action = Action::kNone;
  grpc::Status status;
  {
    absl::MutexLock lock(&mu_);
    if (finished_ || write_in_flight_) return;
    if (!cancelled_ && !acks_.empty() && acks_.front().has_value()) {
      out_ = std::move(*acks_.front());
      acks_.pop_front();
      ++first_seq_;
      write_in_flight_ = true;
      action = Action::kWrite;
    } else if (unfilled_ == 0 && !in_read_ &&
               (cancelled_ || ((reads_done_ || ending_) && acks_.empty()))) {
      finished_ = true;
      status = finish_status_;
      action = Action::kFinish;
    }
  }
  if (action == Action::kWrite) StartWrite(&out_);
  if (action == Action::kFinish) Finish(status);
}

void ServerStream::OnWriteDone(bool ok) {
  {
    absl::MutexLock lock(&mu_);
    write_in_flight_ = false;
    if (!ok && !cancelled_) {
      cancelled_ = true;
      finish_status_ = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                    "could not write an ack");
    }
  }
  Pump();
}

void ServerStream::OnCancel() {
  {
    absl::MutexLock lock(&mu_);
    if (!cancelled_) {
      cancelled_ = true;
      finish_status_ = grpc::Status::CANCELLED;
    }
  }
  Pump();
}

void ServerStream::OnDone() {
  std::function<void()> on_done = std::move(env_.on_done);
  delete this;
  if (on_done) on_done();
}

// ---------------------------------------------------------------- client end

PeerStream::PeerStream(PeerStreamEnv env)
    : on_destroyed_{std::move(env.on_destroyed)}, env_(std::move(env)) {}

std::shared_ptr<PeerStream> PeerStream::Create(PeerStreamEnv env) {
  std::shared_ptr<PeerStream> stream(new PeerStream(std::move(env)));
  stream->context_.AddMetadata(kNodeIdMetadata, stream->env_.self.Hex());
  // Fail fast when the peer is down: the sender re-routes instead of
  // waiting for it to come back.
  stream->context_.set_wait_for_ready(false);
  return stream;
}

void PeerStream::Start() {
  self_ = shared_from_this();
  env_.stub->async()->Stream(&context_, this);  // last use of the stub
  AddHold();
  StartRead(&in_);
  StartCall();
  {
    absl::MutexLock lock(&mu_);
    started_ = true;
  }
  Pump();  // frames queued before the call was bound
}

absl::Status PeerStream::Enqueue(Frame frame,
                                 std::shared_ptr<PendingSend> pending) {
  {
    absl::MutexLock lock(&mu_);
    if (broken_) {
      return absl::UnavailableError(absl::StrCat(
          "stream to ", env_.peer.ShortString(), " is closed: ", break_reason_));
    }
    if (queue_.size() >= env_.max_queued_frames) {
      return absl::ResourceExhaustedError(
          absl::StrCat("send queue to ", env_.peer.ShortString(), " is full (",
                       queue_.size(), " frames)"));
    }
    queue_.push_back(Outgoing{std::move(frame), std::move(pending)});
  }
  Pump();
  return absl::OkStatus();
}

void PeerStream::Close() {
  {
    absl::MutexLock lock(&mu_);
    deliberate_ = true;
  }
  context_.TryCancel();
}

void PeerStream::Pump() {
  {
    absl::MutexLock lock(&mu_);
    if (!started_ || broken_ || write_in_flight_) return;
    // Frames whose send already timed out are not worth the bandwidth.
    while (!queue_.empty() && !header_sent_ &&
           queue_.front().pending->completed()) {
      queue_.pop_front();
    }
    if (queue_.empty()) return;
    Outgoing& front = queue_.front();
    const uint32_t chunks = front.frame.header.chunk_count();
    bool last;
    out_.Clear();
    if (!header_sent_) {
      *out_.mutable_header() = front.frame.header;
      header_sent_ = true;
      next_chunk_ = 0;
      last = chunks == 0;
    } else {
      const size_t offset = size_t{next_chunk_} * kMaxChunkBytes;
      const size_t length =
          std::min(kMaxChunkBytes, front.frame.payload.size() - offset);
      proto::PayloadChunk* chunk = out_.mutable_chunk();
      chunk->set_index(next_chunk_);
      absl::CopyCordToString(front.frame.payload.Subcord(offset, length),
                             chunk->mutable_data());
      ++next_chunk_;
      last = next_chunk_ == chunks;
    }
    if (last) {
      // Waits for its ack from now on: the ack may overtake OnWriteDone.
      awaiting_.push_back(
          AwaitingAck{std::move(front.frame.header), std::move(front.pending)});
      queue_.pop_front();
      header_sent_ = false;
    }
    write_in_flight_ = true;
  }
  StartWrite(&out_);
}

bool PeerStream::TakeHoldReleaseLocked() {
  if (!broken_ || write_in_flight_ || hold_released_) return false;
  hold_released_ = true;
  return true;
}

void PeerStream::Break() {
  bool release;
  {
    absl::MutexLock lock(&mu_);
    broken_ = true;
    release = TakeHoldReleaseLocked();
  }
  if (release) RemoveHold();
}

void PeerStream::OnWriteDone(bool ok) {
  bool release;
  {
    absl::MutexLock lock(&mu_);
    write_in_flight_ = false;
    if (!ok && !broken_) {
      broken_ = true;
      break_reason_ = "write failed";
    }
    release = TakeHoldReleaseLocked();
  }
  if (release) {
    RemoveHold();
    return;
  }
  Pump();
}

void PeerStream::OnReadDone(bool ok) {
  if (!ok) {
    {
      absl::MutexLock lock(&mu_);
      if (break_reason_.empty()) break_reason_ = "peer ended the stream";
    }
    Break();
    return;
  }
  std::shared_ptr<PendingSend> pending;
  bool matches = false;
  bool again;
  {
    absl::MutexLock lock(&mu_);
    if (!awaiting_.empty()) {
      AwaitingAck& front = awaiting_.front();
      matches = front.header.iteration() == in_.iteration() &&
                front.header.mb_id() == in_.mb_id() &&
                front.header.direction() == in_.direction();
      pending = std::move(front.pending);
      awaiting_.pop_front();
    }
    if (!matches) break_reason_ = "peer sent an ack that matches no frame";
    again = matches && !broken_;
  }
  if (!matches) {
    LOG(WARNING) << "closing stream to " << env_.peer
                 << ": ack for it=" << in_.iteration() << " mb=" << in_.mb_id()
                 << " matches no frame sent";
    if (pending) {
      pending->Complete(absl::UnavailableError("peer acked out of order"));
    }
    context_.TryCancel();
    Break();
    return;
  }
  pending->Complete(proto::StatusFromCode(in_.code(), in_.message()));
  if (env_.on_ack) env_.on_ack();
  if (again) {
    StartRead(&in_);
  } else {
    Break();
  }
}

void PeerStream::OnDone(const grpc::Status& status) {
  // Released last: destroying it may destroy this object.
  std::shared_ptr<PeerStream> keep_alive = std::move(self_);
  std::deque<Outgoing> queue;
  std::deque<AwaitingAck> awaiting;
  bool deliberate;
  std::string reason;
  {
    absl::MutexLock lock(&mu_);
    broken_ = true;
    queue.swap(queue_);
    awaiting.swap(awaiting_);
    deliberate = deliberate_;
    reason = break_reason_;
  }
  absl::Status why = absl::UnavailableError(absl::StrCat(
      "stream to ", env_.peer.ShortString(), " ended",
      deliberate ? " (closed locally)" : "", ": ",
      status.ok() ? reason : proto::ToAbslStatus(status).ToString()));
  for (Outgoing& o : queue) o.pending->Complete(why);
  for (AwaitingAck& a : awaiting) a.pending->Complete(why);
  if (env_.on_done) env_.on_done(this, why, deliberate);
}

}  // namespace skipswarm::node::internal
