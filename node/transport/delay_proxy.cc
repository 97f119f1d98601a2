#include "node/transport/delay_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <deque>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace skipswarm::node {
namespace {

// Bytes read from one side, due to be written to the other at `due`.
struct Chunk {
  absl::Duration due;
  std::string bytes;
};

// One direction's bytes in flight.
struct DelayLine {
  absl::Mutex mu;
  std::deque<Chunk> queue ABSL_GUARDED_BY(mu);
  bool ended ABSL_GUARDED_BY(mu) = false;
  bool ReadyOrEnded() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return !queue.empty() || ended; }
};

bool WriteAll(int fd, const std::string& bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

absl::StatusOr<std::unique_ptr<DelayProxy>> DelayProxy::Start(const std::string& target,
                                                              absl::Duration one_way,
                                                              common::Clock* clock) {
  const size_t colon = target.rfind(':');
  int target_port = 0;
  if (colon == std::string::npos ||
      !absl::SimpleAtoi(target.substr(colon + 1), &target_port)) {
    return absl::InvalidArgumentError(absl::StrCat("target ", target, " is not host:port"));
  }
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (listener < 0 || bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(listener, 16) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    if (listener >= 0) close(listener);
    return absl::UnavailableError("delay proxy: cannot listen on loopback");
  }
  return std::unique_ptr<DelayProxy>(new DelayProxy(listener, ntohs(addr.sin_port),
                                                    target.substr(0, colon), target_port,
                                                    one_way, clock));
}

DelayProxy::DelayProxy(int listener, int port, std::string target_host, int target_port,
                       absl::Duration one_way, common::Clock* clock)
    : listener_(listener),
      port_(port),
      target_host_(std::move(target_host)),
      target_port_(target_port),
      one_way_(one_way),
      clock_(clock) {
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

DelayProxy::~DelayProxy() {
  std::vector<std::thread> relays;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    for (int fd : sockets_) shutdown(fd, SHUT_RDWR);
  }
  shutdown(listener_, SHUT_RDWR);
  acceptor_.join();
  {
    absl::MutexLock lock(&mu_);
    relays.swap(relays_);
  }
  for (std::thread& t : relays) t.join();
  absl::MutexLock lock(&mu_);
  for (int fd : sockets_) close(fd);
  close(listener_);
}

std::string DelayProxy::address() const { return absl::StrCat("127.0.0.1:", port_); }

void DelayProxy::AcceptLoop() {
  for (;;) {
    int client = accept(listener_, nullptr, nullptr);
    if (client < 0) return;  // shut down
    int server = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(target_port_));
    inet_pton(AF_INET, target_host_.c_str(), &addr.sin_addr);
    const int one = 1;
    setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(server, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    const bool connected =
        server >= 0 && connect(server, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    absl::MutexLock lock(&mu_);
    sockets_.push_back(client);
    if (server >= 0) sockets_.push_back(server);
    if (stopping_ || !connected) {
      shutdown(client, SHUT_RDWR);
      if (stopping_) return;
      continue;
    }
    relays_.emplace_back([this, client, server] { Relay(client, server); });
    relays_.emplace_back([this, client, server] { Relay(server, client); });
  }
}

// Reads `from` on this thread; a writer thread writes each chunk to `to`
// once it is due. Ends when either side closes (bytes not yet due are
// dropped: the link went down).
void DelayProxy::Relay(int from, int to) {
  DelayLine line;
  std::thread writer([&] {
    for (;;) {
      Chunk chunk;
      {
        absl::MutexLock lock(&line.mu);
        line.mu.Await(absl::Condition(&line, &DelayLine::ReadyOrEnded));
        if (line.ended) return;
        chunk = std::move(line.queue.front());
        line.queue.pop_front();
      }
      // A wait on the injected clock's time that only the end cuts short.
      for (absl::Duration left = chunk.due - clock_->SteadyNow(); left > absl::ZeroDuration();
           left = chunk.due - clock_->SteadyNow()) {
        absl::MutexLock lock(&line.mu);
        if (line.mu.AwaitWithTimeout(absl::Condition(&line.ended), left)) return;
      }
      if (!WriteAll(to, chunk.bytes)) {
        shutdown(from, SHUT_RDWR);
        return;
      }
    }
  });
  std::string buffer(256 << 10, '\0');
  for (;;) {
    ssize_t n = read(from, buffer.data(), buffer.size());
    if (n <= 0) break;
    absl::MutexLock lock(&line.mu);
    line.queue.push_back(
        Chunk{clock_->SteadyNow() + one_way_, buffer.substr(0, static_cast<size_t>(n))});
  }
  {
    absl::MutexLock lock(&line.mu);
    line.ended = true;
  }
  writer.join();
  shutdown(to, SHUT_WR);
}

}  // namespace skipswarm::node
