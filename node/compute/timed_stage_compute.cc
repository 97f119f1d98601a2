#include "node/compute/timed_stage_compute.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/ascii.h"
#include "common/atomic_file.h"

namespace skipswarm::node {
namespace {

uint64_t Mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

}  // namespace

TimedStageCompute::TimedStageCompute(common::Clock* clock, Options options)
    : clock_(clock),
      options_(options),
      // Leaked on purpose: Cords built from it may outlive this object.
      payload_(new std::string(options.payload_bytes, '\0')) {}

absl::Status TimedStageCompute::Admit(uint64_t mb) {
  absl::MutexLock lock(&mu_);
  if (!pending_.insert(mb).second) {
    return absl::AlreadyExistsError(absl::StrCat("micro-batch ", mb, " is already pending on stage ",
                                                 options_.stage));
  }
  return absl::OkStatus();
}

WireTensor TimedStageCompute::Dummy() const {
  WireTensor t;
  t.meta.set_dtype(proto::DTYPE_FLOAT32);
  t.meta.set_codec(proto::CODEC_RAW_FP32);
  t.meta.add_shape(static_cast<int64_t>(options_.payload_bytes / 4));
  const std::string* bytes = payload_;
  t.payload = absl::MakeCordFromExternal(
      absl::string_view(*bytes).substr(0, (options_.payload_bytes / 4) * 4), [] {});
  return t;
}

void TimedStageCompute::Finish(absl::Duration after, TensorDone done,
                               absl::StatusOr<WireTensor> out) {
  clock_->RunAfter(after, [done = std::move(done), out = std::move(out)]() mutable {
    done(std::move(out));
  });
}

void TimedStageCompute::Start(uint64_t mb, MicroBatchData data, TensorDone done) {
  absl::Status admitted = options_.stage == 0
                              ? Admit(mb)
                              : absl::FailedPreconditionError("Start needs stage 0");
  if (admitted.ok()) {
    absl::MutexLock lock(&mu_);
    started_.insert(mb);
  }
  if (!admitted.ok()) return Finish(absl::ZeroDuration(), std::move(done), admitted);
  Finish(options_.forward, std::move(done), Dummy());
}

void TimedStageCompute::Forward(uint64_t mb, WireTensor input, TensorDone done) {
  absl::Status admitted = options_.stage != 0
                              ? Admit(mb)
                              : absl::FailedPreconditionError("Forward needs a stage > 0");
  if (!admitted.ok()) return Finish(absl::ZeroDuration(), std::move(done), admitted);
  Finish(options_.forward, std::move(done), Dummy());
}

void TimedStageCompute::Tail(uint64_t mb, WireTensor activation, TailDone done) {
  bool known;
  {
    absl::MutexLock lock(&mu_);
    known = started_.erase(mb) > 0;
  }
  absl::StatusOr<TailOutput> out;
  absl::Duration after = absl::ZeroDuration();
  if (!known) {
    out = absl::NotFoundError(absl::StrCat("tail of micro-batch ", mb, " that was not started"));
  } else {
    out = TailOutput{1.0, Dummy()};
    after = options_.forward * options_.tail_factor;
  }
  clock_->RunAfter(after, [done = std::move(done), out = std::move(out)]() mutable {
    done(std::move(out));
  });
}

void TimedStageCompute::Backward(uint64_t mb, WireTensor grad_output, TensorDone done) {
  bool known;
  {
    absl::MutexLock lock(&mu_);
    known = pending_.erase(mb) > 0;
    started_.erase(mb);
    if (known) ++visits_;
  }
  if (!known) {
    return Finish(absl::ZeroDuration(), std::move(done),
                  absl::NotFoundError(absl::StrCat("backward of micro-batch ", mb,
                                                   " that is not pending on stage ",
                                                   options_.stage)));
  }
  Finish(options_.forward * options_.backward_factor, std::move(done),
         options_.stage == 0 ? WireTensor{} : Dummy());
}

void TimedStageCompute::FinishSketch(absl::Duration after, uint64_t seed, SketchDone done) {
  absl::StatusOr<model::OutputSketch> out;
  if (options_.stage == 0) {
    out = absl::FailedPreconditionError("a verify-only sketch needs a stage > 0");
    after = absl::ZeroDuration();
  } else {
    model::OutputSketch s;
    s.shape = {static_cast<int64_t>(options_.payload_bytes / 4)};
    s.seed = seed;
    s.projections.assign(model::kDefaultSketchProjections, 0.0);
    out = std::move(s);
  }
  clock_->RunAfter(after, [done = std::move(done), out = std::move(out)]() mutable {
    done(std::move(out));
  });
}

void TimedStageCompute::SketchForward(WireTensor input, uint64_t seed, SketchDone done) {
  FinishSketch(options_.forward, seed, std::move(done));
}

void TimedStageCompute::SketchBackward(WireTensor input, WireTensor grad_output, uint64_t seed,
                                       SketchDone done) {
  FinishSketch(options_.forward * (1 + options_.backward_factor), seed, std::move(done));
}

bool TimedStageCompute::Discard(uint64_t mb) {
  absl::MutexLock lock(&mu_);
  started_.erase(mb);
  return pending_.erase(mb) > 0;
}

size_t TimedStageCompute::pending() const {
  absl::MutexLock lock(&mu_);
  return pending_.size();
}

absl::StatusOr<GradientSum> TimedStageCompute::TakeGradients() {
  absl::MutexLock lock(&mu_);
  GradientSum sum;
  sum.flat.assign(options_.num_params, static_cast<float>(visits_));
  sum.visits = visits_;
  return sum;
}

absl::StatusOr<UpdateStats> TimedStageCompute::ApplyUpdate(const std::vector<float>& summed,
                                                            int64_t total_visits) {
  if (static_cast<int64_t>(summed.size()) != options_.num_params) {
    return absl::InvalidArgumentError(absl::StrCat("update has ", summed.size(),
                                                   " elements, stage has ", options_.num_params));
  }
  absl::MutexLock lock(&mu_);
  ++step_;
  visits_ = 0;
  UpdateStats stats;
  stats.stepped = total_visits > 0;
  return stats;
}

void TimedStageCompute::ZeroGrad() {
  absl::MutexLock lock(&mu_);
  visits_ = 0;
}

uint64_t TimedStageCompute::ParamsDigest() {
  absl::MutexLock lock(&mu_);
  return Mix(Mix(0x5eed, static_cast<uint64_t>(options_.stage)), static_cast<uint64_t>(step_));
}

int64_t TimedStageCompute::step() const {
  absl::MutexLock lock(&mu_);
  return step_;
}

// The timed compute has no weights: its checkpoint is the step number.
absl::Status TimedStageCompute::SaveCheckpoint(const std::string& path) {
  absl::MutexLock lock(&mu_);
  return common::WriteFileAtomically(
      path, absl::StrCat("timed-stage ", options_.stage, " step ", step_, "\n"));
}

absl::StatusOr<int64_t> TimedStageCompute::LoadCheckpoint(const std::string& path) {
  absl::StatusOr<std::string> bytes = common::ReadFileBytes(path);
  if (!bytes.ok()) return bytes.status();
  std::vector<absl::string_view> words =
      absl::StrSplit(absl::StripAsciiWhitespace(*bytes), ' ');
  int stage = -1;
  int64_t step = -1;
  if (words.size() != 4 || words[0] != "timed-stage" || words[2] != "step" ||
      !absl::SimpleAtoi(words[1], &stage) || !absl::SimpleAtoi(words[3], &step) || step < 0) {
    return absl::DataLossError(absl::StrCat("'", path, "' is not a timed-stage checkpoint"));
  }
  if (stage != options_.stage) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", path, "' is stage ", stage, "'s checkpoint, not ", options_.stage));
  }
  absl::MutexLock lock(&mu_);
  step_ = step;
  return step_;
}

absl::StatusOr<std::string> TimedStageCompute::ExportState() {
  absl::MutexLock lock(&mu_);
  return absl::StrCat("timed/", options_.stage, "/", step_);
}

absl::StatusOr<int64_t> TimedStageCompute::ImportState(absl::string_view bytes) {
  std::vector<std::string> parts = absl::StrSplit(bytes, '/');
  int stage = 0;
  int64_t step = 0;
  if (parts.size() != 3 || parts[0] != "timed" || !absl::SimpleAtoi(parts[1], &stage) ||
      !absl::SimpleAtoi(parts[2], &step) || step < 0) {
    return absl::InvalidArgumentError("not a timed stage state");
  }
  absl::MutexLock lock(&mu_);
  if (stage != options_.stage) {
    return absl::InvalidArgumentError(absl::StrCat("state of stage ", stage, ", this is stage ",
                                                   options_.stage));
  }
  step_ = step;
  return step_;
}

}  // namespace skipswarm::node
