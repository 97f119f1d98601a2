// Test-only pieces shared by the verified-compute tests
// (verified_compute_test.cc, verified_backward_test.cc): the model, the
// batches, running one compute task on a SimClock, and a lying replica.
//
// Thread rule: single-threaded tests (tasks run on the SimClock's RunDue).
#ifndef SKIPSWARM_NODE_COMPUTE_VERIFY_TEST_UTIL_H_
#define SKIPSWARM_NODE_COMPUTE_VERIFY_TEST_UTIL_H_

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/random.h"
#include "common/sim_clock.h"
#include "model/model_config.h"
#include "model/output_sketch.h"
#include "model/tensor_codec.h"
#include "node/compute/forwarding_stage_compute.h"
#include "node/compute/torch_stage_compute.h"

namespace skipswarm::node::testing {

// 3 stages of 2 blocks, d_model 64: small enough for 100s of micro-batches.
inline model::ModelConfig VerifyConfig() {
  model::ModelConfig c;
  c.num_layers = 6;
  c.d_model = 64;
  c.num_heads = 4;
  c.ffn_dim = 128;
  c.seq_len = 32;
  c.num_stages = 3;
  c.init_seed = 5;
  return c;
}

// 4 samples x 32 random byte tokens.
inline MicroBatchData VerifyBatch(common::Random& rng) {
  MicroBatchData d;
  d.samples = 4;
  d.seq = 32;
  for (int64_t i = 0; i < d.samples * d.seq; ++i) {
    d.tokens.push_back(rng.UniformInt(0, 255));
    d.targets.push_back(rng.UniformInt(0, 255));
  }
  return d;
}

// Runs one task to completion on the sim clock.
template <typename T, typename Call>
absl::StatusOr<T> RunTask(common::SimClock& clock, Call call) {
  std::optional<absl::StatusOr<T>> out;
  call([&](absl::StatusOr<T> r) { out = std::move(r); });
  EXPECT_FALSE(out.has_value()) << "done ran inline";
  clock.RunDue();
  EXPECT_TRUE(out.has_value());
  return out.has_value() ? std::move(*out) : absl::InternalError("task did not run");
}

// A replica that computes honestly, then lies in the tensor it sends on
// its forward (activation) or backward (input gradient): x factor, or
// values of the same norm drawn at random; re-encoded with the codec the
// honest tensor had, as a liar would to pass the decoder. With `armed`
// (not null; it outlives the compute) it lies only in the tasks started
// while `*armed` is true: a replica that turns hostile once told, e.g.
// after it earned trust (tests/integration/open_swarm_daemon_test.cc).
// Thread rule: with kScale, tasks may complete on any thread (a daemon's
// runner); kRandom draws from its own counter and wants one thread.
class LyingCompute final : public ForwardingStageCompute {
 public:
  enum class Lie { kScale, kRandom };
  enum class Where { kForward, kBackward };
  // Borrows `inner`.
  LyingCompute(StageCompute* inner, Where where, Lie lie, double factor,
               const std::atomic<bool>* armed = nullptr)
      : ForwardingStageCompute(inner), where_(where), lie_(lie), factor_(factor), armed_(armed) {}
  // Owns `inner`.
  LyingCompute(std::unique_ptr<StageCompute> inner, Where where, Lie lie, double factor,
               const std::atomic<bool>* armed = nullptr)
      : ForwardingStageCompute(std::move(inner)),
        where_(where),
        lie_(lie),
        factor_(factor),
        armed_(armed) {}

  void Forward(uint64_t mb, WireTensor input, TensorDone done) override {
    inner()->Forward(mb, std::move(input), Twisting(Where::kForward, std::move(done)));
  }
  void Backward(uint64_t mb, WireTensor grad_output, TensorDone done) override {
    inner()->Backward(mb, std::move(grad_output), Twisting(Where::kBackward, std::move(done)));
  }

 private:
  TensorDone Twisting(Where where, TensorDone done) {
    if (where != where_) return done;
    if (armed_ != nullptr && !armed_->load()) return done;
    return [this, done = std::move(done)](absl::StatusOr<WireTensor> y) mutable {
      done(y.ok() ? Twist(*y) : y);
    };
  }

  absl::StatusOr<WireTensor> Twist(const WireTensor& y) {
    const model::TensorMeta meta = FromProto(y.meta);
    model::DecodeExpectations want;
    absl::StatusOr<at::Tensor> t = model::DecodeTensor(meta, std::string(y.payload), want);
    if (!t.ok()) return t.status();
    at::Tensor lie = *t * factor_;
    if (lie_ == Lie::kRandom) {
      at::Generator gen = at::detail::createCPUGenerator(++draws_);
      at::Tensor r = at::randn(t->sizes(), gen);
      lie = r * (t->norm() / r.norm());
    }
    absl::StatusOr<model::EncodedTensor> enc =
        model::EncodeTensor(lie, {meta.codec, meta.block_size == 0 ? 256 : meta.block_size});
    if (!enc.ok()) return enc.status();
    return WireTensor{ToProto(enc->meta), absl::Cord(std::move(enc->payload))};
  }

  const Where where_;
  const Lie lie_;
  const double factor_;
  const std::atomic<bool>* const armed_;
  uint64_t draws_ = 0;
};

// Every wire codec a check must hold under: fp32, fp16, bf16, int8 (blocks
// of 256).
inline std::vector<model::EncodeOptions> WireCodecs() {
  return {{model::Codec::kRawFp32}, {model::Codec::kFp16}, {model::Codec::kBf16},
          {model::Codec::kInt8Blockwise, 256}};
}

// Verdicts over many checks.
struct Tally {
  int checks = 0;
  int flagged = 0;
  double worst_energy = 0;  // energy / energy_limit over the checks
  double worst_gap = 0;     // norm_gap / error_bound
  double worst_rel = 0;     // sqrt(energy) / norm: ~ ||y_X - y_Y|| / ||y||

  void Add(const model::SketchVerdict& v, double sketch_norm) {
    ++checks;
    flagged += v.match ? 0 : 1;
    if (v.energy_limit > 0) worst_energy = std::max(worst_energy, v.energy / v.energy_limit);
    if (v.error_bound > 0) worst_gap = std::max(worst_gap, v.norm_gap / v.error_bound);
    if (sketch_norm > 0) worst_rel = std::max(worst_rel, std::sqrt(v.energy) / sketch_norm);
  }
};

}  // namespace skipswarm::node::testing

#endif  // SKIPSWARM_NODE_COMPUTE_VERIFY_TEST_UTIL_H_
