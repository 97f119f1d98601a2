#include "tests/adversarial/hostile/hostile_client.h"

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "common/crc32c.h"
#include "common/node_id.h"
#include "common/real_clock.h"
#include "manifest/manifest.grpc.pb.h"
#include "proto/gossip.grpc.pb.h"
#include "proto/pipeline.grpc.pb.h"
#include "proto/stage.grpc.pb.h"

namespace skipswarm::hostile {
namespace {

constexpr size_t kChunk = size_t{1} << 20;

std::string CodeName(grpc::StatusCode code) {
  static const char* const kNames[] = {
      "OK",           "CANCELLED",          "UNKNOWN",           "INVALID_ARGUMENT",
      "DEADLINE_EXCEEDED", "NOT_FOUND",     "ALREADY_EXISTS",    "PERMISSION_DENIED",
      "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",    "OUT_OF_RANGE",
      "UNIMPLEMENTED", "INTERNAL",          "UNAVAILABLE",       "DATA_LOSS",
      "UNAUTHENTICATED"};
  const int i = static_cast<int>(code);
  return i >= 0 && i <= 16 ? kNames[i] : absl::StrCat("CODE_", i);
}

bool IsRefusal(grpc::StatusCode code) {
  return code == grpc::StatusCode::RESOURCE_EXHAUSTED ||
         code == grpc::StatusCode::PERMISSION_DENIED ||
         code == grpc::StatusCode::INVALID_ARGUMENT ||
         code == grpc::StatusCode::FAILED_PRECONDITION ||
         code == grpc::StatusCode::UNAUTHENTICATED;
}

std::shared_ptr<grpc::Channel> Channel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(64 << 20);
  args.SetMaxReceiveMessageSize(64 << 20);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection per attacker thread
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

// The tallies of one attack, shared by its threads.
class Tally {
 public:
  Tally(common::Clock* clock, absl::Duration start) : clock_(clock), start_(start) {}
  void Answer(grpc::StatusCode code, uint64_t bytes = 0) {
    absl::MutexLock lock(&mu_);
    ++report_.sent;
    report_.bytes_sent += bytes;
    ++report_.answers[CodeName(code)];
    if (IsRefusal(code) && report_.first_refusal_s < 0) {
      report_.first_refusal_s = absl::ToDoubleSeconds(clock_->SteadyNow() - start_);
    }
  }
  // One stream ended after `written` bytes of messages.
  void Stream(uint64_t written) {
    absl::MutexLock lock(&mu_);
    ++report_.streams;
    report_.bytes_sent += written;
  }
  // The first few distinct reasons a call ended, on stderr (what the
  // counts alone do not say).
  void Explain(const grpc::Status& status) {
    absl::MutexLock lock(&mu_);
    std::string why = absl::StrCat(CodeName(status.error_code()), ": ", status.error_message());
    if (explained_.size() < 8 && explained_.insert(why).second) {
      fprintf(stderr, "call ended %s\n", why.c_str());
    }
  }
  AttackReport Take() {
    absl::MutexLock lock(&mu_);
    return report_;
  }

 private:
  common::Clock* const clock_;
  const absl::Duration start_;
  absl::Mutex mu_;
  AttackReport report_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> explained_ ABSL_GUARDED_BY(mu_);
};

proto::FrameHeader FarFutureHeader(const HostileOptions& o, const std::string& self,
                                   const Member& victim, uint64_t mb, const std::string& payload) {
  proto::FrameHeader h;
  h.set_protocol_version(proto::PROTOCOL_VERSION_5);
  h.set_swarm_id(o.swarm_id);
  h.set_iteration(o.frame_iteration + mb / 64);
  h.set_mb_id(mb);
  h.set_origin(self);
  const uint32_t stage = victim.stages.empty() ? 1 : victim.stages.front();
  proto::Hop* first = h.add_route();
  first->set_node_id(self);
  first->set_stage(0);
  proto::Hop* hop = h.add_route();
  hop->set_node_id(victim.id);
  hop->set_stage(stage == 0 ? 1 : stage);
  proto::Hop* back = h.add_route();
  back->set_node_id(self);
  back->set_stage(0);
  h.set_hop_index(1);
  h.set_direction(proto::DIRECTION_FORWARD);
  h.mutable_tensor()->set_dtype(proto::DTYPE_FLOAT32);
  h.mutable_tensor()->set_codec(proto::CODEC_RAW_FP32);
  h.mutable_tensor()->add_shape(static_cast<int64_t>(payload.size() / 4));
  h.mutable_tensor()->set_payload_bytes(payload.size());
  h.mutable_tensor()->set_payload_crc32c(common::Crc32c(payload));
  h.set_chunk_count(static_cast<uint32_t>((payload.size() + kChunk - 1) / kChunk));
  h.set_deadline_ms(600'000);
  return h;
}

// Far-future frames on one stream per member, rewritten as fast as the
// member reads them; a refused or broken stream is opened again.
void Frames(const HostileOptions& o, const std::string& self, const Member& m,
            absl::Duration until, common::Clock* clock, Tally* tally) {
  auto stub = proto::PipelineService::NewStub(Channel(m.address));
  const std::string payload(o.frame_bytes, '\x01');
  uint64_t mb = 0;
  while (clock->SteadyNow() < until) {
    grpc::ClientContext context;
    context.AddMetadata("ss-node-id", common::NodeId::FromBytes(self)->Hex());
    context.set_deadline(common::SystemDeadlineAfter(until - clock->SteadyNow() +
                                                    absl::Seconds(2)));
    auto stream = stub->Stream(&context);
    std::thread reader([&] {
      proto::FrameAck ack;
      while (stream->Read(&ack)) {
        tally->Answer(static_cast<grpc::StatusCode>(ack.code()), 0);
      }
    });
    uint64_t written = 0;  // bytes of the messages gRPC took
    const uint64_t first_mb = mb;
    const absl::Duration opened = clock->SteadyNow();
    while (clock->SteadyNow() < until) {
      proto::PipelineMessage header;
      *header.mutable_header() = FarFutureHeader(o, self, m, mb++, payload);
      if (!stream->Write(header)) break;
      written += header.ByteSizeLong();
      bool ok = true;
      for (size_t at = 0; ok && at < payload.size(); at += kChunk) {
        proto::PipelineMessage chunk;
        chunk.mutable_chunk()->set_index(static_cast<uint32_t>(at / kChunk));
        chunk.mutable_chunk()->set_data(payload.substr(at, kChunk));
        ok = stream->Write(chunk);
        if (ok) written += chunk.ByteSizeLong();
      }
      if (!ok) break;
    }
    stream->WritesDone();
    reader.join();
    tally->Stream(written);
    grpc::Status end = stream->Finish();
    if (o.trace_streams) {
      fprintf(stderr, "stream to %s: %llu frames, %llu bytes, %.3f s, %s\n", m.address.c_str(),
              static_cast<unsigned long long>(mb - first_mb),
              static_cast<unsigned long long>(written),
              absl::ToDoubleSeconds(clock->SteadyNow() - opened), end.error_message().c_str());
    }
    if (!end.ok()) {  // the stream itself refused
      tally->Answer(end.error_code());
      tally->Explain(end);
    }
  }
}

void Pushes(const HostileOptions& o, const std::string& self, const Member& m,
            absl::Duration until, common::Clock* clock, Tally* tally) {
  auto stub = proto::StageService::NewStub(Channel(m.address));
  const std::string data(kChunk, '\0');
  const uint32_t count = static_cast<uint32_t>(o.push_elements * 4 / kChunk);
  uint64_t k = 0;
  while (clock->SteadyNow() < until) {
    grpc::ClientContext context;
    context.set_deadline(common::SystemDeadlineAfter(absl::Seconds(30)));
    auto stream = stub->PushGradients(&context);
    uint64_t bytes = 0;
    for (uint32_t i = 0; i < count && clock->SteadyNow() < until; ++i) {
      proto::GradientChunk chunk;
      chunk.set_protocol_version(proto::PROTOCOL_VERSION_5);
      chunk.set_swarm_id(o.swarm_id);
      chunk.set_from(self);
      chunk.set_stage(m.stages.empty() ? 1 : m.stages.front());
      chunk.set_iteration(1'000 + k);
      chunk.set_phase(1);
      chunk.set_total_elements(static_cast<uint64_t>(o.push_elements));
      chunk.set_visits(1);
      if (i == 0) chunk.add_members(self);
      chunk.set_chunk_index(i);
      chunk.set_chunk_count(count);
      chunk.set_offset(static_cast<uint64_t>(i) * (kChunk / 4));
      chunk.mutable_tensor()->set_dtype(proto::DTYPE_FLOAT32);
      chunk.mutable_tensor()->set_codec(proto::CODEC_RAW_FP32);
      chunk.mutable_tensor()->add_shape(o.push_elements);
      chunk.set_data(data);
      if (!stream->Write(chunk)) break;
      bytes += data.size();
    }
    stream->WritesDone();
    proto::GradientAck ack;
    while (stream->Read(&ack)) {
    }
    tally->Answer(stream->Finish().error_code(), bytes);
    ++k;
  }
}

// Sends `req` through `stub` again and again (a new seq each time) until `until`.
void PingUntil(proto::GossipService::Stub* stub, proto::PingRequest* req, absl::Duration until,
               common::Clock* clock, Tally* tally) {
  for (uint64_t seq = 1; clock->SteadyNow() < until; ++seq) {
    req->set_seq(seq);
    grpc::ClientContext context;
    context.set_deadline(common::SystemDeadlineAfter(absl::Seconds(10)));
    proto::Ack ack;
    tally->Answer(stub->Ping(&context, *req, &ack).error_code(), req->ByteSizeLong());
  }
}

void GossipCost(const HostileOptions& o, const std::string& self, const Member& m,
                absl::Duration until, common::Clock* clock, Tally* tally) {
  auto stub = proto::GossipService::NewStub(Channel(m.address));
  proto::PingRequest req;
  req.set_protocol_version(proto::PROTOCOL_VERSION_5);
  req.set_swarm_id(o.swarm_id);
  req.set_from(self);
  for (int i = 0; i < 64; ++i) {
    proto::SignedNodeRecord* r = req.mutable_gossip()->add_records();
    r->set_record(std::string(8000, static_cast<char>('a' + i % 26)));
    r->set_signature(std::string(64, 's'));
  }
  PingUntil(stub.get(), &req, until, clock, tally);
}

void Suspicion(const HostileOptions& o, const std::string& self,
               const std::vector<Member>& all, const Member& m, absl::Duration until,
               common::Clock* clock, Tally* tally) {
  auto stub = proto::GossipService::NewStub(Channel(m.address));
  proto::PingRequest req;
  req.set_protocol_version(proto::PROTOCOL_VERSION_5);
  req.set_swarm_id(o.swarm_id);
  req.set_from(self);
  for (const Member& victim : all) {
    for (uint64_t inc : {~uint64_t{0}, ~uint64_t{0} - 1}) {
      proto::MembershipUpdate* u = req.mutable_gossip()->add_updates();
      u->set_node_id(victim.id);
      u->set_state(proto::MEMBER_STATE_DEAD);
      u->set_incarnation(inc);
      u->set_reporter(all.front().id == victim.id ? all.back().id : all.front().id);
    }
  }
  PingUntil(stub.get(), &req, until, clock, tally);
}

template <typename Stub>
void FetchOnce(Stub* stub, const HostileOptions& o, const std::string& self, uint32_t stage,
               uint64_t iteration, Tally* tally) {
  grpc::ClientContext context;
  context.set_deadline(common::SystemDeadlineAfter(absl::Seconds(5)));
  proto::StateRequest req;
  req.set_protocol_version(proto::PROTOCOL_VERSION_5);
  req.set_swarm_id(o.swarm_id);
  req.set_from(self);
  req.set_stage(stage);
  req.set_iteration(iteration);
  auto reader = stub->FetchState(&context, req);
  proto::StateChunk chunk;
  uint64_t bytes = 0;
  while (reader->Read(&chunk)) bytes += chunk.data().size();
  tally->Answer(reader->Finish().error_code(), bytes);
}

void State(const HostileOptions& o, const std::string& self, const Member& m,
           absl::Duration until, common::Clock* clock, Tally* tally) {
  auto group = proto::StageService::NewStub(Channel(m.address));
  auto daemon = proto::StateTransferService::NewStub(Channel(m.address));
  for (uint64_t k = 0; clock->SteadyNow() < until; ++k) {
    for (uint32_t stage : m.stages) {
      FetchOnce(group.get(), o, self, stage, k, tally);
      FetchOnce(daemon.get(), o, self, stage, 0, tally);
    }
    if (m.stages.empty()) FetchOnce(group.get(), o, self, 0, k, tally);
  }
}

void Manifest(const HostileOptions& o, const Member& m, absl::Duration until,
              common::Clock* clock, Tally* tally) {
  auto stub = proto::SwarmManifestService::NewStub(Channel(m.address));
  while (clock->SteadyNow() < until) {
    grpc::ClientContext context;
    context.set_deadline(common::SystemDeadlineAfter(absl::Seconds(5)));
    proto::GetManifestRequest req;
    req.set_protocol_version(proto::PROTOCOL_VERSION_5);
    req.set_swarm_id(o.swarm_id);
    proto::GetManifestResponse resp;
    tally->Answer(stub->GetManifest(&context, req, &resp).error_code());
  }
}

}  // namespace

std::string AttackReport::Json() const {
  std::vector<std::string> answer_items;
  for (const auto& [code, n] : answers) answer_items.push_back(absl::StrCat("\"", code, "\": ", n));
  return absl::StrCat("{\"attack\": \"", attack, "\", \"members\": ", members,
                      ", \"sent\": ", sent, ", \"bytes_sent\": ", bytes_sent, ", \"streams\": ", streams,
                      ", \"answers\": {", absl::StrJoin(answer_items, ", "),
                      "}, \"first_refusal_s\": ", first_refusal_s,
                      ", \"members_alive_after\": ", members_alive_after, "}");
}

absl::StatusOr<std::vector<Member>> Discover(const HostileOptions& o) {
  auto stub = proto::GossipService::NewStub(Channel(o.bootstrap));
  grpc::ClientContext context;
  context.set_deadline(common::SystemDeadlineAfter(absl::Seconds(10)));
  proto::PushPullRequest req;
  req.set_protocol_version(proto::PROTOCOL_VERSION_5);
  req.set_swarm_id(o.swarm_id);
  req.set_from(common::NodeId::ForName(o.name).Bytes());
  proto::PushPullResponse resp;
  grpc::Status s = stub->PushPull(&context, req, &resp);
  if (!s.ok()) {
    return absl::UnavailableError(absl::StrCat("push-pull to ", o.bootstrap, ": ",
                                               CodeName(s.error_code()), " ", s.error_message()));
  }
  std::set<std::string> dead;
  for (const proto::MembershipUpdate& u : resp.gossip().updates()) {
    if (u.state() == proto::MEMBER_STATE_DEAD) dead.insert(u.node_id());
  }
  std::vector<Member> members;
  for (const proto::SignedNodeRecord& signed_record : resp.gossip().records()) {
    proto::NodeRecord r;
    if (!r.ParseFromString(signed_record.record()) || r.addresses().empty()) continue;
    Member m;
    m.id = r.node_id();
    m.address = r.addresses(0);
    m.stages.assign(r.stages().begin(), r.stages().end());
    m.alive = dead.count(m.id) == 0 && r.state() != proto::MEMBER_STATE_LEFT;
    members.push_back(std::move(m));
  }
  return members;
}

absl::StatusOr<AttackReport> RunAttack(const std::string& attack, const HostileOptions& o,
                                       common::Clock* clock) {
  absl::StatusOr<std::vector<Member>> found = Discover(o);
  if (!found.ok()) return found.status();
  std::vector<Member> members;
  for (const Member& m : *found) {
    if (m.alive) members.push_back(m);
  }
  if (members.empty()) return absl::NotFoundError("the bootstrap lists no live member");
  const std::string self = common::NodeId::ForName(o.name).Bytes();
  const absl::Duration start = clock->SteadyNow();
  const absl::Duration until = start + o.duration;
  Tally tally(clock, start);
  std::function<void(const Member&)> one;
  if (attack == "frames") {
    one = [&](const Member& m) { Frames(o, self, m, until, clock, &tally); };
  } else if (attack == "pushes") {
    one = [&](const Member& m) { Pushes(o, self, m, until, clock, &tally); };
  } else if (attack == "gossip") {
    one = [&](const Member& m) { GossipCost(o, self, m, until, clock, &tally); };
  } else if (attack == "suspicion") {
    one = [&](const Member& m) { Suspicion(o, self, members, m, until, clock, &tally); };
  } else if (attack == "state") {
    one = [&](const Member& m) { State(o, self, m, until, clock, &tally); };
  } else if (attack == "manifest") {
    one = [&](const Member& m) { Manifest(o, m, until, clock, &tally); };
  } else {
    return absl::InvalidArgumentError(absl::StrCat("unknown attack '", attack, "'"));
  }
  std::vector<std::thread> threads;
  for (const Member& m : members) threads.emplace_back([&one, &m] { one(m); });
  for (std::thread& t : threads) t.join();
  AttackReport report = tally.Take();
  report.attack = attack;
  report.members = static_cast<int>(members.size());
  absl::StatusOr<std::vector<Member>> after = Discover(o);
  if (after.ok()) {
    for (const Member& m : *after) report.members_alive_after += m.alive;
  }
  return report;
}

}  // namespace skipswarm::hostile
