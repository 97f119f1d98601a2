#include "model/averaging_options.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "model/codec_options.h"

namespace skipswarm::model {

absl::StatusOr<AvgCodecSpec> ParseAvgCodec(absl::string_view text) {
  AvgCodecSpec s;
  absl::string_view rest = text;
  if (text == "fp32") {
    s.kind = AvgCodecKind::kFp32;
  } else if (text == "bf16") {
    s.kind = AvgCodecKind::kBf16;
  } else if (text == "int8") {
    s.kind = AvgCodecKind::kInt8;
  } else if (absl::ConsumePrefix(&rest, "topk:")) {
    s.kind = AvgCodecKind::kTopK;
    if (!absl::SimpleAtod(rest, &s.topk_fraction) || !(s.topk_fraction > 0) ||
        !(s.topk_fraction <= 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--avg_codec=", text, ": topk:F needs 0 < F <= 1"));
    }
  } else if (absl::ConsumePrefix(&rest, "powersgd:")) {
    s.kind = AvgCodecKind::kPowerSgd;
    if (!absl::SimpleAtoi(rest, &s.rank) || s.rank < 1 || s.rank > 4096) {
      return absl::InvalidArgumentError(
          absl::StrCat("--avg_codec=", text, ": powersgd:R needs 1 <= R <= 4096"));
    }
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--avg_codec=", text, " is not fp32, bf16, int8, topk:F or powersgd:R"));
  }
  return s;
}

std::string AvgCodecName(const AvgCodecSpec& spec) {
  switch (spec.kind) {
    case AvgCodecKind::kFp32: return "fp32";
    case AvgCodecKind::kBf16: return "bf16";
    case AvgCodecKind::kInt8: return "int8";
    case AvgCodecKind::kTopK: return absl::StrFormat("topk:%g", spec.topk_fraction);
    case AvgCodecKind::kPowerSgd: return absl::StrCat("powersgd:", spec.rank);
  }
  return "?";
}

std::string AveragingIdentity(const AveragingOptions& o) {
  return absl::StrCat("H=", o.outer_every, " ", AvgCodecName(o.codec), o.overlap ? " overlap" : "");
}

absl::Status ValidateAveraging(const AveragingOptions& o) {
  if (o.outer_every < 1 || o.outer_every > 1000000) {
    return absl::InvalidArgumentError(
        absl::StrCat("--outer_every=", o.outer_every, " is outside 1..1000000"));
  }
  if (o.overlap && o.outer_every < 2) {
    return absl::InvalidArgumentError(
        "--outer_overlap needs --outer_every > 1 (H = 1 averages gradients, not rounds)");
  }
  if (!std::isfinite(o.sync_deadline_factor) || o.sync_deadline_factor < 0 ||
      !std::isfinite(o.sync_deadline_min_s) || o.sync_deadline_min_s < 0) {
    return absl::InvalidArgumentError(
        "--outer_deadline_factor and --outer_deadline_min_s must be finite and >= 0");
  }
  if (!std::isfinite(o.upload_floor) || o.upload_floor <= 0 || o.upload_floor > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--outer_upload_floor=", o.upload_floor, " must be in (0, 1]"));
  }
  if (!std::isfinite(o.outer_lr) || o.outer_lr <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("--outer_lr=", o.outer_lr, " must be > 0"));
  }
  if (!std::isfinite(o.outer_momentum) || o.outer_momentum < 0 || o.outer_momentum >= 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--outer_momentum=", o.outer_momentum, " must be in [0, 1)"));
  }
  return absl::OkStatus();
}

void PowerSgdShape(int64_t numel, int64_t* rows, int64_t* cols) {
  int64_t r = static_cast<int64_t>(std::ceil(std::sqrt(static_cast<double>(numel))));
  if (r < 1) r = 1;
  *rows = r;
  *cols = (numel + r - 1) / r;
}

double WireBytesPerReplica(const AvgCodecSpec& spec, double numel, int replicas) {
  if (replicas < 2) return 0;
  const double r = replicas;
  const double dense_shard = 4.0 * numel / r;  // fp32 of one shard
  switch (spec.kind) {
    case AvgCodecKind::kFp32:
    case AvgCodecKind::kBf16:
    case AvgCodecKind::kInt8:
      return 2.0 * (r - 1) / r * AveragedBytes(spec, numel);
    case AvgCodecKind::kTopK: {
      const double part = std::min(dense_shard, AveragedBytes(spec, numel) / r);
      return (r - 1) * (part + std::min(dense_shard, r * part));
    }
    case AvgCodecKind::kPowerSgd: {
      int64_t rows = 0, cols = 0;
      PowerSgdShape(static_cast<int64_t>(numel), &rows, &cols);
      const double k = std::min<double>(spec.rank, std::min(rows, cols));
      const double part =
          std::min(dense_shard, 4.0 * k * (static_cast<double>(rows) / r + 1 + cols));
      return (r - 1) * (part + std::min(dense_shard, r * part));
    }
  }
  return 0;
}

double AveragedBytes(const AvgCodecSpec& spec, double numel) {
  switch (spec.kind) {
    case AvgCodecKind::kFp32:
      return EncodedFloatBytes({Codec::kRawFp32}, numel);
    case AvgCodecKind::kBf16:
      return EncodedFloatBytes({Codec::kBf16}, numel);
    case AvgCodecKind::kInt8:
      return EncodedFloatBytes({Codec::kInt8Blockwise, spec.block_size}, numel);
    case AvgCodecKind::kTopK: {
      const double k = std::max(1.0, std::ceil(spec.topk_fraction * numel));
      return 8.0 * std::min(k, numel);
    }
    case AvgCodecKind::kPowerSgd: {
      int64_t rows = 0, cols = 0;
      PowerSgdShape(static_cast<int64_t>(numel), &rows, &cols);
      const double r = std::min<double>(spec.rank, std::min(rows, cols));
      return 4.0 * r * static_cast<double>(rows + cols);
    }
  }
  return 0;
}

}  // namespace skipswarm::model
