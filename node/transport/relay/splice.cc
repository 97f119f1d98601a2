#include "node/transport/relay/splice.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace skipswarm::node {
namespace {

void NoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

bool WriteAll(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

absl::StatusOr<LoopbackListener> ListenOnLoopback() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("socket: ", std::strerror(errno)));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(fd, 64) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    return absl::UnavailableError(absl::StrCat("listen on 127.0.0.1: ", why));
  }
  return LoopbackListener{fd, ntohs(addr.sin_port)};
}

absl::StatusOr<int> ConnectTcp(const std::string& address) {
  const size_t colon = address.rfind(':');
  int port = 0;
  if (colon == std::string::npos ||
      !absl::SimpleAtoi(address.substr(colon + 1), &port) || port <= 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("bad address '", address, "'"));
  }
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0) {
    return absl::UnavailableError(absl::StrCat(address, ": ", ::gai_strerror(rc)));
  }
  std::string why = "no address";
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
      ::freeaddrinfo(found);
      NoDelay(fd);
      return fd;
    }
    why = std::strerror(errno);
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return absl::UnavailableError(absl::StrCat("connect to ", address, ": ", why));
}

SpliceCounts Splice(int fd, RelayStream* stream, grpc::ClientContext* context) {
  NoDelay(fd);
  SpliceCounts counts;
  // Socket -> stream on a thread of its own: a blocking read() has no
  // completion to wait on. Ends at the socket's EOF (or the shutdown below)
  // or a failed write (the call ended).
  std::thread up([&] {
    proto::RelayBytes message;
    std::string* data = message.mutable_data();
    while (true) {
      // Straight into the message (no staging buffer and copy).
      data->resize(kSpliceChunkBytes);
      const ssize_t n = ::recv(fd, data->data(), data->size(), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      data->resize(static_cast<size_t>(n));
      if (!stream->Write(message)) break;
      counts.to_stream += static_cast<uint64_t>(n);
    }
    // Either end closing ends the circuit (gRPC's connections never
    // half-close usefully).
    context->TryCancel();
  });
  proto::RelayBytes message;
  while (stream->Read(&message)) {
    if (message.data().empty()) continue;
    if (!WriteAll(fd, message.data())) break;
    counts.to_socket += message.data().size();
  }
  ::shutdown(fd, SHUT_RDWR);  // wakes the reader thread
  context->TryCancel();       // and its Write
  up.join();
  ::close(fd);
  stream->Finish().ok();  // CANCELLED after TryCancel: expected
  return counts;
}

}  // namespace skipswarm::node
