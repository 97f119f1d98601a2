#include "node/daemon/reporting/sample_status.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace skipswarm::node {

membership::View SampleView() {
  membership::View v;
  v.self = common::NodeId::ForName("d0");
  v.version = 17;
  const struct {
    const char* name;
    std::vector<uint32_t> stages;
    proto::MemberState state;
    bool outbound_only;
  } kMembers[] = {
      {"d0", {0}, proto::MEMBER_STATE_ALIVE, false},
      {"d1", {0}, proto::MEMBER_STATE_ALIVE, true},
      {"r1", {1}, proto::MEMBER_STATE_ALIVE, false},
      {"r2", {1}, proto::MEMBER_STATE_DEAD, false},
      {"r3", {2}, proto::MEMBER_STATE_SUSPECT, false},
  };
  int port = 7000;
  for (const auto& m : kMembers) {
    membership::MemberInfo info;
    info.id = common::NodeId::ForName(m.name);
    info.state = m.state;
    info.stages = m.stages;
    info.outbound_only = m.outbound_only;
    info.addresses = {absl::StrCat("10.0.0.", port - 6999, ":", port)};
    ++port;
    info.iteration = 29;
    info.memory_slots = 4;
    info.seconds_per_layer_per_sample = 0.0021;
    v.members.push_back(info);
  }
  std::sort(v.members.begin(), v.members.end(),
            [](const membership::MemberInfo& a, const membership::MemberInfo& b) {
              return a.id < b.id;
            });
  membership::LinkInfo l;
  l.from = common::NodeId::ForName("d0");
  l.to = common::NodeId::ForName("r1");
  l.rtt = absl::Milliseconds(42);
  l.bytes_per_second = 12.5e6;
  v.links.push_back(l);
  l.to = common::NodeId::ForName("r3");
  l.rtt = absl::InfiniteDuration();
  l.bytes_per_second = 0;
  v.links.push_back(l);
  return v;
}

void FillSampleBoard(StatusBoard* board, common::SimClock* clock) {
  board->SetStages({0});
  board->SetAddress("10.0.0.1:7000");
  board->SetReachable(true);
  board->UpdateView(SampleView());
  for (int i = 0; i < kSampleIterations; ++i) {
    clock->Advance(absl::Seconds(1));
    NodeIterationReport r;
    r.iteration = i;
    r.data.emplace();
    r.data->loss = 5.5 - 0.08 * i;
    r.data->completed = 4;
    r.data->tokens = 4 * 512;
    r.data->elapsed = absl::Milliseconds(800 + 10 * (i % 3));
    // Note [Route shapes]: one skip route per iteration while r2 was
    // failing, one of them also swapped.
    r.data->completed_by_route = {{"in_order", 4}};
    if (i >= 12 && i < 20) r.data->completed_by_route = {{"in_order", 3}, {"skip", 1}};
    if (i == 16) r.data->completed_by_route = {{"in_order", 2}, {"skip", 1}, {"skip_swap", 1}};
    if (i == 12) {
      r.rerouted_here = 2;
      r.server.rerouted = 2;
    }
    board->ObserveIteration(r);
    if (i == 20) board->AddEvent("member", "r2 (stage 1) ALIVE -> DEAD");
  }
}

}  // namespace skipswarm::node
