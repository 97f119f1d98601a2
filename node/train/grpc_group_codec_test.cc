// Note [Encoded shards] over gRPC: what replicas push under each
// --avg_codec, measured on the wire, and encoded pushes that lie.
#include <grpcpp/grpcpp.h>

#include <cmath>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "common/real_clock.h"
#include "gtest/gtest.h"
#include "node/train/grpc_group.h"
#include "node/train/shard_codec.h"
#include "proto/stage.grpc.pb.h"
#include "proto/version.h"

namespace skipswarm::node {
namespace {

using common::NodeId;

constexpr int kReplicas = 3;
constexpr int64_t kElements = 200000;  // ~0.8 MB of fp32 per replica

// Three replicas of stage 1 on loopback, all with one codec.
class Group {
 public:
  explicit Group(const char* codec) : clock_(common::RealClock::Create()) {
    std::vector<PeerInfo> members;
    for (int i = 0; i < kReplicas; ++i) {
      ids_.push_back(NodeId::ForName("c" + std::to_string(i)));
      members.push_back({ids_[i], {1}, 4, "", ""});
    }
    for (int i = 0; i < kReplicas; ++i) {
      views_.push_back(std::make_unique<StaticSwarmView>(members));
      GrpcGroupOptions o;
      o.self = ids_[i];
      o.push_deadline = absl::Seconds(10);
      o.credentials = identity::PeerCredentials::Insecure();
      o.codec = *model::ParseAvgCodec(codec);
      auto g = GrpcGroupComm::Create(o, views_[i].get(), clock_.get());
      EXPECT_TRUE(g.ok()) << g.status();
      groups_.push_back(*std::move(g));
    }
    for (int i = 0; i < kReplicas; ++i) {
      for (int j = 0; j < kReplicas; ++j) {
        views_[i]->SetAddresses(ids_[j], "", Address(j));
      }
    }
  }
  ~Group() { groups_.clear(); }

  std::string Address(int i) const { return "127.0.0.1:" + std::to_string(groups_[i]->port()); }

  // One reduce of `contributions` (one per replica); every result.
  std::vector<ReduceResult> Reduce(uint64_t iteration,
                                   std::vector<GradientContribution> contributions) {
    std::vector<std::optional<absl::StatusOr<ReduceResult>>> results(kReplicas);
    std::vector<absl::Notification> done(kReplicas);
    for (int i = 0; i < kReplicas; ++i) {
      groups_[i]->AllReduce(iteration, 1, std::move(contributions[i]),
                            [&, i](absl::StatusOr<ReduceResult> r) {
                              results[i] = std::move(r);
                              done[i].Notify();
                            });
    }
    std::vector<ReduceResult> out;
    for (int i = 0; i < kReplicas; ++i) {
      EXPECT_TRUE(done[i].WaitForNotificationWithTimeout(absl::Seconds(30)));
      if (!results[i].has_value() || !results[i]->ok()) {
        ADD_FAILURE() << "replica " << i << ": "
                      << (results[i].has_value() ? results[i]->status().ToString() : "no result");
        return {};
      }
      out.push_back(std::move(*results[i]).value());
    }
    return out;
  }

  uint64_t PushedBytes() const {
    uint64_t b = 0;
    for (const auto& g : groups_) b += g->pushed_bytes();
    return b;
  }

  std::unique_ptr<common::RealClock> clock_;
  std::vector<NodeId> ids_;
  std::vector<std::unique_ptr<StaticSwarmView>> views_;
  std::vector<std::unique_ptr<GrpcGroupComm>> groups_;
};

std::vector<float> Normal(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = d(gen);
  return v;
}

// Each replica's contribution as the compute's codec would hand it over.
std::vector<GradientContribution> Contributions(const Group& g, const char* codec) {
  const model::AvgCodecSpec spec = *model::ParseAvgCodec(codec);
  std::vector<GradientContribution> out;
  for (int i = 0; i < kReplicas; ++i) {
    GradientContribution c;
    c.from = g.ids_[i];
    c.visits = 1;
    c.params_digest = 9;
    c.flat = Normal(kElements, 100 + i);
    if (spec.kind == model::AvgCodecKind::kTopK) {
      for (int64_t k = 0; k < kElements; ++k) {
        if (k % 100 != i) c.flat[k] = 0;  // 1% kept
      }
    } else if (spec.kind == model::AvgCodecKind::kPowerSgd) {
      auto f = std::make_shared<model::LowRankFactors>();
      model::PowerSgdShape(kElements, &f->rows, &f->cols);
      f->rank = spec.rank;
      f->p = Normal(f->rows * f->rank, 200 + i);
      f->q = Normal(f->cols * f->rank, 300 + i);
      for (int64_t k = 0; k < kElements; ++k) {
        float s = 0;
        for (int64_t j = 0; j < f->rank; ++j) {
          s += f->p[(k / f->cols) * f->rank + j] * f->q[(k % f->cols) * f->rank + j];
        }
        c.flat[k] = s;
      }
      c.factors = std::move(f);
    }
    out.push_back(std::move(c));
  }
  return out;
}

struct Measured {
  uint64_t pushed = 0;
  int64_t reported = 0;
};

Measured RunCodec(const char* codec) {
  Group g(codec);
  std::vector<GradientContribution> in = Contributions(g, codec);
  std::vector<float> exact(kElements, 0.f);
  for (const GradientContribution& c : in) {
    for (int64_t k = 0; k < kElements; ++k) exact[k] += c.flat[k];
  }
  std::vector<ReduceResult> r = g.Reduce(0, std::move(in));
  Measured m;
  if (r.size() != kReplicas) return m;
  double err = 0, norm = 0;
  for (int64_t k = 0; k < kElements; ++k) {
    err += (r[0].sum[k] - exact[k]) * (r[0].sum[k] - exact[k]);
    norm += exact[k] * exact[k];
  }
  // int8 quantizes twice (parts, then the reduced shard): ~1%.
  EXPECT_LT(std::sqrt(err / norm), 0.02) << codec;
  for (int i = 0; i < kReplicas; ++i) {
    EXPECT_EQ(r[i].sum, r[0].sum) << codec << ": replica " << i << " differs";
    m.reported += r[i].sent_bytes;
  }
  m.pushed = g.PushedBytes();
  return m;
}

// The figure behind node/train/README.md's table of bytes on the wire. It
// fails if any codec still pushed float32.
TEST(GrpcGroupCodecTest, EncodedShardsTravelAndAreCountedOnTheWire) {
  const Measured fp32 = RunCodec("fp32");
  // 3 replicas x 2 (R-1)/R x n floats.
  EXPECT_EQ(fp32.pushed, uint64_t{kReplicas} * 2 * (kReplicas - 1) * kElements * 4 / kReplicas);
  EXPECT_EQ(static_cast<uint64_t>(fp32.reported), fp32.pushed);
  struct Want {
    const char* codec;
    double at_most;  // of fp32's bytes
  };
  for (const Want& w : {Want{"bf16", 0.51}, Want{"int8", 0.27}, Want{"topk:0.01", 0.05},
                        Want{"powersgd:4", 0.08}}) {
    const Measured m = RunCodec(w.codec);
    const double share = static_cast<double>(m.pushed) / static_cast<double>(fp32.pushed);
    EXPECT_LE(share, w.at_most) << w.codec << ": " << m.pushed << " bytes vs fp32 " << fp32.pushed;
    EXPECT_EQ(static_cast<uint64_t>(m.reported), m.pushed) << w.codec;
    std::printf("%-11s %9llu bytes pushed by %d replicas (%.4f of fp32's %llu)\n", w.codec,
                static_cast<unsigned long long>(m.pushed), kReplicas, share,
                static_cast<unsigned long long>(fp32.pushed));
  }
}

// A peer's encoded push that cannot be a shard is refused with
// INVALID_ARGUMENT naming the fault; the group averages on afterwards.
TEST(GrpcGroupCodecTest, MalformedEncodedPushesAreRefused) {
  Group g("int8");
  auto stub = proto::StageService::NewStub(
      grpc::CreateChannel(g.Address(0), grpc::InsecureChannelCredentials()));
  const int64_t shard = kElements / kReplicas;  // shard 0 of equal shards
  std::vector<float> v = Normal(shard, 1);
  const std::string good = EncodeShard(*model::ParseAvgCodec("int8"), v.data(), shard, 0, nullptr);
  auto push = [&](std::string payload, uint64_t claimed, uint32_t encoding) {
    grpc::ClientContext context;
    auto stream = stub->PushGradients(&context);
    proto::GradientChunk c;
    c.set_protocol_version(proto::kProtocolVersion);
    c.set_from(g.ids_[1].Bytes());
    c.set_stage(1);
    c.set_iteration(0);
    c.set_phase(1);
    for (const NodeId& id : g.ids_) c.add_members(id.Bytes());
    c.set_shard(0);
    c.set_total_elements(kElements);
    c.set_visits(1);
    c.set_chunk_index(0);
    c.set_chunk_count(1);
    c.mutable_tensor()->add_shape(shard);
    c.set_encoding(encoding);
    c.set_payload_bytes(claimed);
    c.set_data(std::move(payload));
    stream->Write(c);
    stream->WritesDone();
    proto::GradientAck ack;
    stream->Read(&ack);
    return stream->Finish();
  };
  std::string nan_scale = good;
  const float nan = std::nanf("");
  std::memcpy(&nan_scale[5], &nan, 4);
  std::string bf16(1 + 2 * shard, '\0');
  bf16[0] = static_cast<char>(ShardFormat::kBf16);
  const struct {
    std::string payload;
    uint64_t claimed;
    uint32_t encoding;
    const char* says;
  } cases[] = {
      {good.substr(0, good.size() - 7), good.size() - 7, 1, "int8 shard of"},
      {nan_scale, nan_scale.size(), 1, "scale"},
      {bf16, bf16.size(), 1, "is not one --avg_codec=int8 sends"},
      {good, good.size() + 1, 1, ""},                     // fewer bytes than claimed
      {good, uint64_t{4} * shard + 65, 1, "out of range"},  // more than fp32 allows
      {good, good.size(), 7, "unknown push encoding"},
  };
  for (const auto& c : cases) {
    grpc::Status s = push(c.payload, c.claimed, c.encoding);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.says << ": "
                                                                  << s.error_message();
    EXPECT_NE(s.error_message().find(c.says), std::string::npos) << s.error_message();
  }
  // Still a working group: the real reduce goes through.
  std::vector<ReduceResult> r = g.Reduce(1, Contributions(g, "int8"));
  ASSERT_EQ(r.size(), static_cast<size_t>(kReplicas));
  EXPECT_EQ(r[0].sum, r[2].sum);
}

}  // namespace
}  // namespace skipswarm::node
