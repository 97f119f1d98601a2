// Fuzz target: what a peer's frame goes through before the model sees it.
// The input is a FrameHeader and a payload as a peer could send them; the
// target runs Note [Frame validation] (node/transport/frame_validator.h:
// header, chunks, payload) and then the wire codec's DecodeTensor
// (model/tensor_codec.h, Note [Decoder checks]) on what passed. Nothing may
// crash, read out of bounds or allocate beyond the limits.
//
// Input: byte 0 = flags (bit 0: the validator's self is the header's
// route[hop_index], so the route check passes; bit 1: recompute the CRC
// after mutation, so the decoder runs; bit 2: expect int64 token ids
// instead of float32; bit 3: count non-finite values instead of refusing);
// bytes 1-2 = header length (little-endian); then the header; the rest is
// the payload, cut into chunks of (byte 3 + 1) KiB.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <google/protobuf/stubs/logging.h>

#include "absl/strings/cord.h"
#include "common/crc32c.h"
#include "common/node_id.h"
#include "model/tensor_codec.h"
#include "node/transport/frame_validator.h"
#include "proto/pipeline.pb.h"

namespace {

using skipswarm::node::FrameValidator;
using skipswarm::node::ValidatorOptions;
namespace model = skipswarm::model;
namespace proto = skipswarm::proto;

model::TensorMeta FromProto(const proto::TensorMeta& p) {
  model::TensorMeta m;
  m.dtype = static_cast<model::WireDType>(p.dtype());
  m.shape.assign(p.shape().begin(), p.shape().end());
  m.codec = static_cast<model::Codec>(p.codec());
  m.payload_bytes = p.payload_bytes();
  m.payload_crc32c = p.payload_crc32c();
  m.block_size = p.block_size();
  return m;
}

// How far inputs got (printed at exit with FUZZ_STATS=1): a seed corpus
// that never reaches the decoder fuzzes nothing but the first checks.
struct Reached {
  long inputs = 0, header = 0, payload = 0, decoded = 0;
  ~Reached() {
    if (std::getenv("FUZZ_STATS") != nullptr) {
      std::fprintf(stderr, "frame_fuzzer: %ld inputs, %ld passed the header, %ld the payload, %ld decoded\n",
                   inputs, header, payload, decoded);
    }
  }
};
Reached reached;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet = [] {
    google::protobuf::SetLogHandler([](google::protobuf::LogLevel, const char*, int,
                                       const std::string&) {});
    return true;
  }();
  (void)quiet;
  ++reached.inputs;
  if (size < 4) return 0;
  const uint8_t flags = data[0];
  const size_t header_len = data[1] | (static_cast<size_t>(data[2]) << 8);
  const size_t chunk = (static_cast<size_t>(data[3]) + 1) << 10;
  data += 4;
  size -= 4;
  if (header_len > size) return 0;
  proto::FrameHeader header;
  if (!header.ParseFromArray(data, static_cast<int>(header_len))) return 0;
  std::string payload(reinterpret_cast<const char*>(data + header_len), size - header_len);
  if (flags & 2) {
    header.mutable_tensor()->set_payload_crc32c(skipswarm::common::Crc32c(payload));
  }

  ValidatorOptions options;
  options.self = skipswarm::common::NodeId::ForName("fuzz");
  if ((flags & 1) && header.hop_index() < static_cast<uint32_t>(header.route_size())) {
    auto id = skipswarm::common::NodeId::FromBytes(header.route(header.hop_index()).node_id());
    if (id.ok()) options.self = *id;
  }
  options.max_payload_bytes = uint64_t{4} << 20;  // keep the fuzzer's memory small
  FrameValidator validator(options);
  if (!validator.CheckHeader(header).ok()) return 0;
  ++reached.header;

  // The payload arrives in chunks, each checked before it is kept.
  absl::Cord received;
  uint64_t got = 0;
  uint32_t index = 0;
  for (size_t at = 0; at < payload.size(); at += chunk, ++index) {
    proto::PayloadChunk c;
    c.set_index(index);
    c.set_data(payload.substr(at, chunk));
    if (!validator.CheckChunk(header, index, got, c).ok()) return 0;
    got += c.data().size();
    received.Append(c.data());
  }
  if (!validator.CheckPayload(header, received).ok()) return 0;
  ++reached.payload;

  model::DecodeExpectations want;
  want.dtype = (flags & 4) ? model::WireDType::kInt64 : model::WireDType::kFloat32;
  want.max_payload_bytes = options.max_payload_bytes;
  want.max_elements = int64_t{1} << 22;
  want.non_finite = (flags & 8) ? model::NonFinitePolicy::kCount : model::NonFinitePolicy::kReject;
  model::DecodeStats stats;
  if (model::DecodeTensor(FromProto(header.tensor()), std::string(received), want, &stats).ok()) {
    ++reached.decoded;
  }
  return 0;
}
