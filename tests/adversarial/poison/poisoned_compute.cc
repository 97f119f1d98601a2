#include "tests/adversarial/poison/poisoned_compute.h"

#include <limits>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace skipswarm::tests {

absl::StatusOr<Poison> ParsePoison(absl::string_view text) {
  Poison p;
  if (text.empty()) return p;
  std::vector<absl::string_view> parts = absl::StrSplit(text, ':');
  const size_t base = parts[0] == "nan" ? 1 : 2;  // fields before an optional ":K"
  bool ok = parts.size() == base || parts.size() == base + 1;
  if (ok && parts.size() == base + 1) {
    ok = absl::SimpleAtoi(parts[base], &p.every) && p.every >= 1;
  }
  if (ok && parts[0] == "nan") {
    p.kind = Poison::Kind::kNaN;
  } else if (ok && base == 2 && absl::SimpleAtod(parts[1], &p.factor) && p.factor > 0) {
    if (parts[0] == "scale") p.kind = Poison::Kind::kScale;
    if (parts[0] == "signflip") p.kind = Poison::Kind::kSignFlip;
  }
  if (p.kind == Poison::Kind::kNone) {
    return absl::InvalidArgumentError(
        absl::StrCat("--poison=", text,
                     " is not scale:F, signflip:F (F > 0) or nan, with an optional :K (K >= 1)"));
  }
  return p;
}

void ApplyPoison(const Poison& poison, std::vector<float>* flat) {
  switch (poison.kind) {
    case Poison::Kind::kNone:
      return;
    case Poison::Kind::kScale:
    case Poison::Kind::kSignFlip: {
      const float f = static_cast<float>(poison.kind == Poison::Kind::kScale ? poison.factor
                                                                            : -poison.factor);
      for (float& x : *flat) x *= f;
      return;
    }
    case Poison::Kind::kNaN:
      for (size_t i = 0; i < flat->size(); i += 997) {
        (*flat)[i] = std::numeric_limits<float>::quiet_NaN();
      }
      return;
  }
}

absl::StatusOr<node::GradientSum> PoisonedStageCompute::TakeGradients() {
  absl::StatusOr<node::GradientSum> g = inner()->TakeGradients();
  if (g.ok() && LiesThisRound()) ApplyPoison(poison_, &g->flat);
  return g;
}

absl::StatusOr<node::AverageContribution> PoisonedStageCompute::TakePseudoGradient() {
  absl::StatusOr<node::AverageContribution> c = inner()->TakePseudoGradient();
  if (c.ok() && c->factors == nullptr && LiesThisRound()) ApplyPoison(poison_, &c->flat);
  return c;
}

}  // namespace skipswarm::tests
