// ForwardingTransport: the base of every Transport decorator (faults,
// shaping, link timing, the listed-peers filter, the simulator's world).
// Every method forwards to the inner transport; a decorator overrides only
// what it changes and reaches the inner transport through inner().
//
//   class CountingTransport final : public ForwardingTransport {
//    public:
//     using ForwardingTransport::ForwardingTransport;
//     void Send(const PeerId& to, Frame frame, SendDone done) override {
//       ++sent_;
//       inner()->Send(to, std::move(frame), std::move(done));
//     }
//    private:
//     std::atomic<int64_t> sent_{0};
//   };
//
// Ownership: the owning constructor keeps the inner transport for the
// decorator's life, and longer for whoever copies shared_inner() (a
// decorator whose clock timers may run after it is gone keeps a copy in
// the state those timers hold). The borrowing constructor takes a pointer
// that must outlive the decorator.
//
// Thread rule: as the inner transport's (all methods thread-safe); the
// base adds no state and no lock.
#ifndef SKIPSWARM_NODE_TRANSPORT_FORWARDING_TRANSPORT_H_
#define SKIPSWARM_NODE_TRANSPORT_FORWARDING_TRANSPORT_H_

#include <memory>
#include <string>
#include <utility>

#include "node/transport/transport.h"

namespace skipswarm::node {

class ForwardingTransport : public Transport {
 public:
  // Owns `inner` (not null).
  explicit ForwardingTransport(std::unique_ptr<Transport> inner)
      : inner_(std::move(inner)) {}
  // Borrows `inner` (not null; must outlive this).
  explicit ForwardingTransport(Transport* inner)
      : inner_(std::shared_ptr<Transport>(), inner) {}

  PeerId self() const override { return inner_->self(); }
  void SetFrameHandler(FrameHandler handler) override {
    inner_->SetFrameHandler(std::move(handler));
  }
  void SetPeerFailureHandler(PeerFailureHandler handler) override {
    inner_->SetPeerFailureHandler(std::move(handler));
  }
  void SetPeerAddress(const PeerId& peer, std::string address) override {
    inner_->SetPeerAddress(peer, std::move(address));
  }
  void ForgetPeer(const PeerId& peer) override { inner_->ForgetPeer(peer); }
  void Send(const PeerId& to, Frame frame, SendDone done) override {
    inner_->Send(to, std::move(frame), std::move(done));
  }

 protected:
  Transport* inner() const { return inner_.get(); }
  // The inner transport as a shared reference (empty-owner alias when
  // borrowed): for state that clock timers hold past this object's life.
  const std::shared_ptr<Transport>& shared_inner() const { return inner_; }

 private:
  const std::shared_ptr<Transport> inner_;
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRANSPORT_FORWARDING_TRANSPORT_H_
