// Fuzz target: a verify-only replica's answer (proto::OutputSketch,
// proto/verify.proto) as the checking side receives it. The target runs the
// receiver's decoder SketchFromProto (node/compute/sketch_wire.h) and, on
// what passes, the check CheckAgainstSketch (model/output_sketch.h) against
// an output built from the input's tail. Nothing may crash, read out of
// bounds or allocate beyond the limits, and three contracts are asserted
// (abort, so both libFuzzer and fuzz_driver.cc report the input):
//  - what SketchFromProto accepts, CheckAgainstSketch accepts as well formed
//    (a verdict, never an error);
//  - the decoded sketch goes back to the wire unchanged (SketchToProto);
//  - an honest pair matches: the sketch of a finite received output itself,
//    checked against that output, is well formed and a match.
//
// Input: byte 0 = flags (bits 0-1: the codec X's frame declared: raw fp32,
// fp16, bf16, int8 blockwise with blocks of 16; bit 2: the received output
// has a different first dimension than the sketch; bit 3: allow up to
// kMaxSketchProjections instead of 64; bit 4: the message is a SketchAnswer,
// not a bare OutputSketch); bytes 1-2 = sketch length
// (little-endian); then the serialized sketch; the rest is the received
// output's float32 values (repeated to fill the shape, zeros when empty).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <google/protobuf/stubs/logging.h>

#include "model/codec_options.h"
#include "model/output_sketch.h"
#include "node/compute/sketch_wire.h"
#include "proto/verify.pb.h"

namespace {

namespace model = skipswarm::model;
namespace node = skipswarm::node;
namespace proto = skipswarm::proto;

// Small limits keep one input cheap (at most 4 * 8 * 16 = 512 values) while
// every check in the decoder stays reachable.
constexpr int64_t kMaxShape[] = {4, 8, 16};

void Fail(const char* what) {
  std::fprintf(stderr, "sketch_fuzzer: %s\n", what);
  std::abort();
}

// How far inputs got (printed at exit with FUZZ_STATS=1).
struct Reached {
  long inputs = 0, parsed = 0, decoded = 0, matched = 0;
  ~Reached() {
    if (std::getenv("FUZZ_STATS") != nullptr) {
      std::fprintf(stderr, "sketch_fuzzer: %ld inputs, %ld parsed, %ld decoded, %ld matched\n",
                   inputs, parsed, decoded, matched);
    }
  }
};
Reached reached;

model::EncodeOptions CodecFor(uint8_t flags) {
  model::EncodeOptions o;
  switch (flags & 3) {
    case 0: o.codec = model::Codec::kRawFp32; break;
    case 1: o.codec = model::Codec::kFp16; break;
    case 2: o.codec = model::Codec::kBf16; break;
    default: o.codec = model::Codec::kInt8Blockwise; o.block_size = 16; break;
  }
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet = [] {
    google::protobuf::SetLogHandler([](google::protobuf::LogLevel, const char*, int,
                                       const std::string&) {});
    return true;
  }();
  (void)quiet;
  ++reached.inputs;
  if (size < 3) return 0;
  const uint8_t flags = data[0];
  const size_t len = data[1] | (static_cast<size_t>(data[2]) << 8);
  data += 3;
  size -= 3;
  if (len > size) return 0;
  node::SketchLimits limits;
  limits.max_shape.assign(std::begin(kMaxShape), std::end(kMaxShape));
  limits.max_projections = (flags & 8) ? model::kMaxSketchProjections : 64;
  proto::OutputSketch wire;
  absl::StatusOr<model::OutputSketch> sketch;
  if (flags & 16) {
    proto::SketchAnswer answer_wire;
    if (!answer_wire.ParseFromArray(data, static_cast<int>(len))) return 0;
    ++reached.parsed;
    absl::StatusOr<node::SketchAnswer> answer = node::AnswerFromProto(answer_wire, limits);
    if (!answer.ok()) return 0;
    proto::SketchAnswer kept = answer_wire;
    kept.DiscardUnknownFields();
    if (node::AnswerToProto(*answer).SerializeAsString() != kept.SerializeAsString()) {
      Fail("round trip changed the answer");
    }
    wire = answer_wire.sketch();
    sketch = std::move(answer->sketch);
  } else {
    if (!wire.ParseFromArray(data, static_cast<int>(len))) return 0;
    ++reached.parsed;
    sketch = node::SketchFromProto(wire, limits);
    if (!sketch.ok()) return 0;
  }
  ++reached.decoded;

  // Unknown fields are the only thing the decoder may drop.
  proto::OutputSketch kept = wire;
  kept.DiscardUnknownFields();
  if (node::SketchToProto(*sketch).SerializeAsString() != kept.SerializeAsString()) {
    Fail("round trip changed the sketch");
  }

  // The received output: the sketch's shape (or, with bit 2, another first
  // dimension), values from the tail.
  std::vector<int64_t> shape = sketch->shape;
  if (flags & 4) shape[0] = shape[0] % kMaxShape[0] + 1;
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  const uint8_t* tail = data + len;
  const size_t tail_floats = (size - len) / sizeof(float);
  std::vector<float> values(static_cast<size_t>(numel), 0.0f);
  for (size_t i = 0; tail_floats > 0 && i < values.size(); ++i) {
    std::memcpy(&values[i], tail + (i % tail_floats) * sizeof(float), sizeof(float));
  }
  const model::EncodeOptions codec = CodecFor(flags);
  auto verdict = model::CheckAgainstSketch(values, shape, codec, *sketch);
  if (!verdict.ok()) Fail("CheckAgainstSketch refused a sketch SketchFromProto accepted");

  // An output with a NaN or an Inf sketches to non-finite numbers, which
  // the receiver refuses as a malformed sketch (Y's fault): Y's own output
  // is not a valid activation then. Only finite outputs make an honest pair.
  for (float v : values) {
    if (!std::isfinite(v)) return 0;
  }
  const model::OutputSketch own = model::SketchOutput(
      values, shape, sketch->seed, static_cast<int>(sketch->projections.size()));
  auto self = model::CheckAgainstSketch(values, shape, codec, own);
  if (!self.ok()) Fail("CheckAgainstSketch refused SketchOutput's sketch of a finite output");
  if (!self->match) Fail("an honest pair did not match");
  ++reached.matched;
  return 0;
}
