#include "node/transport/frame.h"

#include "absl/strings/str_cat.h"
#include "common/node_id.h"
#include "common/crc32c.h"
#include "proto/version.h"

namespace skipswarm::node {

uint32_t ChunkCountFor(uint64_t payload_bytes, size_t chunk_bytes) {
  return static_cast<uint32_t>((payload_bytes + chunk_bytes - 1) / chunk_bytes);
}

void SealFrame(Frame& frame) {
  proto::FrameHeader& h = frame.header;
  h.set_protocol_version(proto::kProtocolVersion);
  h.mutable_tensor()->set_payload_bytes(frame.payload.size());
  h.mutable_tensor()->set_payload_crc32c(common::Crc32c(frame.payload));
  h.set_chunk_count(ChunkCountFor(frame.payload.size()));
}

FrameKey FrameKey::Of(const proto::FrameHeader& header) {
  FrameKey key;
  key.origin = header.origin();
  key.iteration = header.iteration();
  key.mb_id = header.mb_id();
  key.direction = header.direction();
  key.hop_index = header.hop_index();
  key.verify = header.has_verify();
  return key;
}

std::string DescribeFrame(const proto::FrameHeader& header) {
  const char* dir = header.direction() == proto::DIRECTION_FORWARD    ? "fwd"
                    : header.direction() == proto::DIRECTION_BACKWARD ? "bwd"
                    : header.direction() == proto::DIRECTION_SKETCH   ? "sketch"
                                                                      : "dir?";
  auto origin = common::NodeId::FromBytes(header.origin());
  return absl::StrCat("it=", header.iteration(), " mb=", header.mb_id(), " ",
                      dir, " hop=", header.hop_index(), "/",
                      header.route_size(), " origin=",
                      origin.ok() ? origin->ShortString() : "?",
                      " bytes=", header.tensor().payload_bytes());
}

}  // namespace skipswarm::node
