// DelayProxy: a loopback TCP relay that delays every byte by `one_way` in
// each direction and otherwise forwards at loopback speed: a long link with
// no bandwidth limit, for benchmarks of HTTP/2 flow control over a round
// trip (the development kernel has no netem).
//
//   auto proxy = DelayProxy::Start("127.0.0.1:7420", absl::Milliseconds(50), clock);
//   transport->SetPeerAddress(peer, (*proxy)->address());   // 100 ms round trip
//
// Every accepted connection gets its own connection to the target. The relay
// buffers without bound (it is a delay line, not a router), so only the
// endpoints' flow control limits what is in flight.
//
// Thread rule: Start and the destructor on one thread; address() anywhere.
// The destructor closes every connection and joins every thread.
#ifndef SKIPSWARM_NODE_TRANSPORT_DELAY_PROXY_H_
#define SKIPSWARM_NODE_TRANSPORT_DELAY_PROXY_H_

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace skipswarm::node {

class DelayProxy {
 public:
  // Listens on an ephemeral loopback port; relays to `target` ("host:port",
  // IPv4 literal).
  static absl::StatusOr<std::unique_ptr<DelayProxy>> Start(const std::string& target,
                                                          absl::Duration one_way,
                                                          common::Clock* clock);
  ~DelayProxy();
  DelayProxy(const DelayProxy&) = delete;
  DelayProxy& operator=(const DelayProxy&) = delete;

  std::string address() const;

 private:
  DelayProxy(int listener, int port, std::string target_host, int target_port,
             absl::Duration one_way, common::Clock* clock);
  void AcceptLoop();
  void Relay(int from, int to);

  const int listener_;
  const int port_;
  const std::string target_host_;
  const int target_port_;
  const absl::Duration one_way_;
  common::Clock* const clock_;
  std::thread acceptor_;
  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<int> sockets_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> relays_ ABSL_GUARDED_BY(mu_);
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRANSPORT_DELAY_PROXY_H_
