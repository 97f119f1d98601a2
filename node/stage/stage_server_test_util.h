// Test-only pieces shared by the stage server tests of Note [Checkable
// evidence]: a recorder of each micro-batch's end at the origin, a
// transport that lets a test rewrite the forward frames a node sends, and
// a swarm of signing stage servers on the simulated in-process transport.
//
//   SigningSwarm swarm({0, 1, 2}, /*require=*/true);
//   swarm.editing_[1]->edit = [](Frame& f) { /* lie */ };
//   swarm.servers_[0]->Inject(0, 1, route, {});
//   swarm.clock_.Advance(absl::Seconds(1));
//   swarm.recorder_.finished[1];  // the micro-batch's end
//
// Thread rule: single-threaded, as the simulated clock that runs it all.
#ifndef SKIPSWARM_NODE_STAGE_STAGE_SERVER_TEST_UTIL_H_
#define SKIPSWARM_NODE_STAGE_STAGE_SERVER_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/sim_clock.h"
#include "identity/identity.h"
#include "node/compute/timed_stage_compute.h"
#include "node/stage/stage_server.h"
#include "node/transport/forwarding_transport.h"
#include "node/transport/frame.h"
#include "node/transport/inproc_transport.h"

namespace skipswarm::node::testing {

// What the origin was told of each micro-batch's end.
struct OriginRecorder : OriginListener {
  void OnTail(uint64_t, uint64_t, double) override {}
  void OnFinished(uint64_t, uint64_t mb, const absl::Status& s) override { finished[mb] = s; }
  std::map<uint64_t, absl::Status> finished;
};

// A node's outgoing side: `edit` may change each forward frame it sends;
// every sketch answer sent is kept in `answers`.
class EditingTransport final : public ForwardingTransport {
 public:
  using ForwardingTransport::ForwardingTransport;
  void Send(const PeerId& to, Frame frame, SendDone done) override {
    if (frame.header.direction() == proto::DIRECTION_FORWARD && edit) edit(frame);
    if (frame.header.direction() == proto::DIRECTION_SKETCH) answers.push_back(frame.header);
    if (frame.header.direction() == proto::DIRECTION_BACKWARD) backwards.push_back(frame.header);
    inner()->Send(to, std::move(frame), std::move(done));
  }
  std::function<void(Frame&)> edit;
  std::vector<proto::FrameHeader> answers;
  std::vector<proto::FrameHeader> backwards;  // gradients and abort notices sent
};

// Node i hosts stages[i] with a timed compute (10 ms a forward) and its own
// key (seeded by its index); every server signs its commitments and, with
// `require`, requires them; `tweak` may change node i's options last. One
// view shared by all; every server reports to `recorder_`.
class SigningSwarm {
 public:
  SigningSwarm(const std::vector<int>& stages, bool require,
               std::function<void(int, StageServerOptions&)> tweak = nullptr)
      : board_(&clock_, SwitchboardOptions{}) {
    std::vector<PeerInfo> members;
    for (size_t i = 0; i < stages.size(); ++i) {
      auto key = identity::Identity::FromSeed(std::string(32, static_cast<char>('a' + i)));
      EXPECT_TRUE(key.ok());
      keys_.push_back(*std::move(key));
      public_keys_[keys_.back()->id()] = keys_.back()->public_key();
      members.push_back({keys_.back()->id(), {stages[i]}, 4, "", ""});
    }
    view_ = std::make_unique<StaticSwarmView>(members);
    for (size_t i = 0; i < stages.size(); ++i) {
      auto t = board_.Attach(keys_[i]->id());
      EXPECT_TRUE(t.ok());
      auto editing = std::make_unique<EditingTransport>(*std::move(t));
      editing_.push_back(editing.get());
      computes_.push_back(std::make_unique<TimedStageCompute>(
          &clock_, TimedStageCompute::Options{.stage = stages[i],
                                              .forward = absl::Milliseconds(10)}));
      StageServerOptions o;
      o.signer = keys_[i].get();
      o.public_key_of = [this](const PeerId& p) -> std::optional<std::string> {
        auto it = public_keys_.find(p);
        if (it == public_keys_.end()) return std::nullopt;
        return it->second;
      };
      o.require_commitments = require;
      if (tweak) tweak(static_cast<int>(i), o);
      servers_.push_back(std::make_unique<StageServer>(
          editing.get(), &clock_, view_.get(),
          std::map<int, StageCompute*>{{stages[i], computes_.back().get()}}, o));
      servers_.back()->Attach();
      servers_.back()->SetOriginListener(&recorder_);
      transports_.push_back(std::move(editing));
    }
  }
  SigningSwarm(const SigningSwarm&) = delete;
  SigningSwarm& operator=(const SigningSwarm&) = delete;

  common::SimClock clock_;
  Switchboard board_;
  std::vector<std::unique_ptr<identity::Identity>> keys_;
  std::map<PeerId, std::string> public_keys_;
  std::unique_ptr<StaticSwarmView> view_;
  std::vector<EditingTransport*> editing_;
  std::vector<std::unique_ptr<Transport>> transports_;
  std::vector<std::unique_ptr<TimedStageCompute>> computes_;
  std::vector<std::unique_ptr<StageServer>> servers_;
  OriginRecorder recorder_;
};

}  // namespace skipswarm::node::testing

#endif  // SKIPSWARM_NODE_STAGE_STAGE_SERVER_TEST_UTIL_H_
