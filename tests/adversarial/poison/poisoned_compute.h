// PoisonedStageCompute: a lying replica for the real-process poisoning
// test (tests/adversarial/README.md, "Poisoning replica"). It computes
// honestly and applies the group's step like any replica (so its digest
// agrees), but what it hands to averaging is poisoned: its gradient sum
// (TakeGradients, before any codec) or its pseudo-gradient (outer steps).
//
//   SS_ASSIGN_OR_RETURN(Poison p, ParsePoison("signflip:8"));
//   auto liar = std::make_unique<PoisonedStageCompute>(std::move(honest), p);
//
// Only test binaries link this (testonly); the `skipswarm` daemon has no
// way to lie.
//
// Thread rule: as ForwardingStageCompute (the state methods run between
// iterations, with no task running).
#ifndef SKIPSWARM_TESTS_ADVERSARIAL_POISON_POISONED_COMPUTE_H_
#define SKIPSWARM_TESTS_ADVERSARIAL_POISON_POISONED_COMPUTE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "node/compute/forwarding_stage_compute.h"

namespace skipswarm::tests {

struct Poison {
  enum class Kind {
    kNone,
    kScale,     // the gradient x factor (huge norm)
    kSignFlip,  // the gradient x -factor (ascent, inside a norm bound)
    kNaN,       // every 997th element NaN
  };
  Kind kind = Kind::kNone;
  double factor = 1;
  // An intermittent liar: poisons its 1st, (every+1)-th, ... round and is
  // honest in the others (Note [Offences in a row]'s decayed count).
  int every = 1;
};

// "scale:F", "signflip:F", "nan" or "" (none); a suffix ":K" (K >= 1), e.g.
// "signflip:8:3" or "nan:3", lies in every K-th round only.
absl::StatusOr<Poison> ParsePoison(absl::string_view text);

// Applies `poison` to `flat` in place.
void ApplyPoison(const Poison& poison, std::vector<float>* flat);

class PoisonedStageCompute final : public node::ForwardingStageCompute {
 public:
  PoisonedStageCompute(std::unique_ptr<node::StageCompute> inner, Poison poison)
      : ForwardingStageCompute(std::move(inner)), poison_(poison) {}

  absl::StatusOr<node::GradientSum> TakeGradients() override;
  absl::StatusOr<node::AverageContribution> TakePseudoGradient() override;
  // Through the poisoned TakeGradients (ForwardingStageCompute's rule).
  absl::StatusOr<node::UpdateStats> ApplyLocalUpdate() override {
    return node::StageState::ApplyLocalUpdate();
  }

 private:
  // Whether this round (one TakeGradients or TakePseudoGradient) lies.
  bool LiesThisRound() { return rounds_++ % static_cast<uint64_t>(poison_.every) == 0; }

  const Poison poison_;
  uint64_t rounds_ = 0;  // rounds handed to averaging so far
};

}  // namespace skipswarm::tests

#endif  // SKIPSWARM_TESTS_ADVERSARIAL_POISON_POISONED_COMPUTE_H_
