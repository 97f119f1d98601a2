// Byte plumbing for relayed connections (README.md): a loopback listening
// socket, a TCP connect, and Splice, which copies bytes both ways between a
// connected socket and a relay circuit's gRPC stream until either end
// closes.
//
//   SS_ASSIGN_OR_RETURN(int fd, ConnectTcp("127.0.0.1:7000"));
//   grpc::ClientContext ctx;
//   auto stream = stub->Accept(&ctx);
//   Splice(fd, stream.get(), &ctx);   // blocks; closes fd; finishes stream
//
// Thread rule: Splice blocks its caller and runs the socket-to-stream
// direction on a thread of its own; the other functions are plain calls.
#ifndef SKIPSWARM_NODE_TRANSPORT_RELAY_SPLICE_H_
#define SKIPSWARM_NODE_TRANSPORT_RELAY_SPLICE_H_

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/sync_stream.h>

#include <string>

#include "absl/status/statusor.h"
#include "node/transport/relay/relay.pb.h"

namespace skipswarm::node {

using RelayStream = grpc::ClientReaderWriterInterface<proto::RelayBytes, proto::RelayBytes>;

// A TCP socket listening on 127.0.0.1 on a port the kernel picks.
struct LoopbackListener {
  int fd = -1;
  int port = 0;
};
absl::StatusOr<LoopbackListener> ListenOnLoopback();

// A connected TCP socket to "host:port" (IPv4 or [IPv6]); Unavailable on
// failure, naming the address.
absl::StatusOr<int> ConnectTcp(const std::string& address);

// The largest data field Splice writes per message. Each message costs a
// gRPC write, a relay read and write and a thread wake-up per hop, so
// fewer, larger ones are cheaper; well under the relay's and the
// attacher's receive limits (8 MiB, 4 MiB).
inline constexpr size_t kSpliceChunkBytes = 256 << 10;

// Copies socket -> stream and stream -> socket until either side ends,
// then shuts both down: the socket is closed, the call cancelled and
// finished. Messages without data are skipped. Returns the bytes copied
// each way (for logs and tests).
struct SpliceCounts {
  uint64_t to_stream = 0;
  uint64_t to_socket = 0;
};
SpliceCounts Splice(int fd, RelayStream* stream, grpc::ClientContext* context);

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRANSPORT_RELAY_SPLICE_H_
