// WAN shaping around any Transport: per-peer one-way latency and
// a bandwidth token bucket per link, plus this node's uplink and downlink
// buckets, all timed on the injected clock. The same wrapper is the
// operator's bandwidth cap (`--max_upload_mbps` / `--max_download_mbps`:
// set only uplink/downlink).
//
//   ShapingOptions opts;
//   opts.default_link = {absl::Milliseconds(50), 10e6};   // 50 ms, 10 MB/s
//   ShapingTransport shaped(std::move(inner), &clock, opts);
//   shaped.SetLink(peer, {absl::Milliseconds(120), 2e6});
//
// Model: a sent frame (header + payload bytes) passes the uplink bucket and
// the link's bucket at the same time (cut-through: it is done when the
// slower one is), then takes the link latency; only then is it handed to the
// wrapped transport. Its ack comes back after the link latency again. A
// received frame passes the downlink bucket before the frame handler sees
// it (store-and-forward; the wrapped transport has already carried it).
// Both ends of a link should be shaped with the same link table; each end
// shapes only what it sends plus its own downlink.
//
// Thread rule: thread-safe; see transport.h. The clock must outlive the
// wrapper and its pending timers (sends still waiting when the wrapper is
// destroyed complete with UNAVAILABLE).
#ifndef SKIPSWARM_NODE_TRANSPORT_SHAPING_TRANSPORT_H_
#define SKIPSWARM_NODE_TRANSPORT_SHAPING_TRANSPORT_H_

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "common/clock.h"
#include "node/transport/forwarding_transport.h"

namespace skipswarm::node {

struct LinkShape {
  absl::Duration latency = absl::ZeroDuration();  // one way
  double bytes_per_second = 0;                    // <= 0: unlimited
};

struct ShapingOptions {
  double uplink_bytes_per_second = 0;    // <= 0: unlimited
  double downlink_bytes_per_second = 0;  // <= 0: unlimited
  LinkShape default_link;                // for peers without SetLink
  uint64_t burst_bytes = 64 << 10;       // every bucket's burst
};

// Megabits per second (operator flags) to bytes per second.
inline double MbpsToBytesPerSecond(double mbps) { return mbps * 1e6 / 8; }

class ShapingTransport final : public ForwardingTransport {
 public:
  ShapingTransport(std::unique_ptr<Transport> inner, common::Clock* clock,
                   ShapingOptions options);
  ~ShapingTransport() override;

  // Shape of the link to `peer` (replaces the previous one; its bucket
  // starts empty).
  void SetLink(const PeerId& peer, LinkShape shape);

  void SetFrameHandler(FrameHandler handler) override;
  void Send(const PeerId& to, Frame frame, SendDone done) override;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRANSPORT_SHAPING_TRANSPORT_H_
