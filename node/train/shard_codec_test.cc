#include "node/train/shard_codec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace skipswarm::node {
namespace {

using model::AvgCodecSpec;

AvgCodecSpec Spec(const char* name) { return *model::ParseAvgCodec(name); }

std::vector<float> Random(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = d(gen);
  return v;
}

// The product the codec decodes PowerSGD from, truncated to n.
std::vector<float> Product(const model::LowRankFactors& f, int64_t n) {
  std::vector<float> v(n);
  for (int64_t g = 0; g < n; ++g) {
    float s = 0;
    for (int64_t j = 0; j < f.rank; ++j) {
      s += f.p[(g / f.cols) * f.rank + j] * f.q[(g % f.cols) * f.rank + j];
    }
    v[g] = s;
  }
  return v;
}

model::LowRankFactors Factors(int64_t total, int64_t rank, uint32_t seed) {
  model::LowRankFactors f;
  model::PowerSgdShape(total, &f.rows, &f.cols);
  f.rank = rank;
  f.p = Random(f.rows * rank, seed);
  f.q = Random(f.cols * rank, seed + 1);
  return f;
}

TEST(ShardCodecTest, EachCodecTakesItsSizeAndDecodesWhatItSent) {
  const int64_t total = 10000, offset = 3000, n = 4000;
  std::vector<float> v = Random(total, 1);
  // bf16: values already bf16 (as the codec leaves them) go exactly.
  std::vector<float> b = v;
  for (float& x : b) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    u &= 0xffff0000u;
    std::memcpy(&x, &u, 4);
  }
  std::string wire = EncodeShard(Spec("bf16"), b.data() + offset, n, offset, nullptr);
  EXPECT_EQ(wire.size(), 1 + 2 * n);
  auto d = DecodeShard(Spec("bf16"), wire, n, offset, total);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(*d, std::vector<float>(b.begin() + offset, b.begin() + offset + n));

  // int8 on the stage's 256-element block grid: 3000 is mid-block.
  wire = EncodeShard(Spec("int8"), v.data() + offset, n, offset, nullptr);
  const int64_t blocks = (offset + n - 1) / 256 - offset / 256 + 1;
  EXPECT_EQ(wire.size(), 5 + 4 * blocks + n);
  d = DecodeShard(Spec("int8"), wire, n, offset, total);
  ASSERT_TRUE(d.ok()) << d.status();
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR((*d)[i], v[offset + i], 0.05) << i;

  // top-k: the non-zeros, exactly.
  std::vector<float> sparse(total, 0.f);
  for (int64_t i = 0; i < total; i += 97) sparse[i] = v[i];
  wire = EncodeShard(Spec("topk:0.01"), sparse.data() + offset, n, offset, nullptr);
  int64_t nnz = 0;
  for (int64_t i = offset; i < offset + n; ++i) nnz += sparse[i] != 0;
  EXPECT_EQ(wire.size(), 5 + 8 * nnz);
  d = DecodeShard(Spec("topk:0.01"), wire, n, offset, total);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(*d, std::vector<float>(sparse.begin() + offset, sparse.begin() + offset + n));

  // PowerSGD: P's touched rows and Q instead of n floats.
  model::LowRankFactors f = Factors(total, 4, 7);
  std::vector<float> m = Product(f, total);
  wire = EncodeShard(Spec("powersgd:4"), m.data() + offset, n, offset, &f);
  const int64_t rows = (offset + n - 1) / f.cols - offset / f.cols + 1;
  EXPECT_EQ(wire.size(), 17 + 4 * 4 * (rows + f.cols));
  EXPECT_LT(wire.size(), n);  // a quarter of fp32's 4 n, here
  d = DecodeShard(Spec("powersgd:4"), wire, n, offset, total);
  ASSERT_TRUE(d.ok()) << d.status();
  for (int64_t i = 0; i < n; ++i) EXPECT_FLOAT_EQ((*d)[i], m[offset + i]) << i;

  // fp32: the floats.
  wire = EncodeShard(Spec("fp32"), v.data(), n, 0, nullptr);
  EXPECT_EQ(wire.size(), 1 + 4 * n);
}

TEST(ShardCodecTest, Int8OfTheCodecsOwnValuesIsLosslessOnWholeBlocks) {
  // What model/avg_codec.h hands over: per 256-block q * (amax / 127).
  const int64_t total = 2048;
  std::vector<float> v = Random(total, 3);
  std::string whole = EncodeShard(Spec("int8"), v.data(), total, 0, nullptr);
  std::vector<float> codec = *DecodeShard(Spec("int8"), whole, total, 0, total);
  // A shard on block boundaries re-encodes to the same values (to an ulp).
  std::string part = EncodeShard(Spec("int8"), codec.data() + 512, 1024, 512, nullptr);
  std::vector<float> again = *DecodeShard(Spec("int8"), part, 1024, 512, total);
  for (int64_t i = 0; i < 1024; ++i) {
    EXPECT_NEAR(again[i], codec[512 + i], 1e-6f * std::fabs(codec[512 + i]) + 1e-12f);
  }
}

TEST(ShardCodecTest, ReducedShardsDecodeToOneValueForEveryone) {
  const int64_t total = 9000, offset = 4500, n = 4500;
  // PowerSGD: the sum of two parts travels as both parts' factors.
  model::LowRankFactors a = Factors(total, 2, 11), b = Factors(total, 2, 21);
  std::vector<float> ma = Product(a, total), mb = Product(b, total);
  std::string pa = EncodeShard(Spec("powersgd:2"), ma.data() + offset, n, offset, &a);
  std::string pb = EncodeShard(Spec("powersgd:2"), mb.data() + offset, n, offset, &b);
  std::vector<float> sum(n);
  for (int64_t i = 0; i < n; ++i) sum[i] = ma[offset + i] + mb[offset + i];
  std::string wire =
      EncodeReducedShard(Spec("powersgd:2"), sum.data(), n, offset, nullptr, {pa, pb});
  EXPECT_EQ(wire[0], static_cast<char>(ShardFormat::kLowRankSum));
  EXPECT_EQ(wire.size(), 5 + 8 + pa.size() + pb.size());
  auto d = DecodeShard(Spec("powersgd:2"), wire, n, offset, total);
  ASSERT_TRUE(d.ok()) << d.status();
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR((*d)[i], sum[i], 1e-4f) << i;

  // int8 with the owner's error feedback: an entry far below its block's
  // largest (rounded to zero alone) still arrives on average.
  std::vector<float> reduced(256, 0.f);
  reduced[0] = 100.f;
  reduced[1] = 0.1f;  // 100 / 254 = 0.39 per step of the grid
  std::vector<float> residual(256, 0.f);
  double got = 0;
  for (int round = 0; round < 100; ++round) {
    std::string w = EncodeReducedShard(Spec("int8"), reduced.data(), 256, 0, residual.data(), {});
    got += (*DecodeShard(Spec("int8"), w, 256, 0, 256))[1];
  }
  EXPECT_NEAR(got / 100, 0.1, 0.01);
}

// Hostile bytes: each is refused with INVALID_ARGUMENT, never a crash.
// Note [Thinned uploads] (model/avg_codec.h): a contribution whose int8
// blocks are partly zero goes out without them (kInt8Blocks), decodes to
// what the whole encoding decodes to, and a peer's malformed one is refused.
TEST(ShardCodecTest, Int8LeavesItsZeroBlocksOut) {
  const int64_t total = 8192, offset = 1000, n = 5000;  // cuts blocks 3 and 23
  std::vector<float> v = Random(total, 17);
  for (int64_t b = 0; b < total / 256; ++b) {
    if (b % 4 != 1 && b != 3) std::fill(v.begin() + b * 256, v.begin() + (b + 1) * 256, 0.f);
  }
  const AvgCodecSpec spec = Spec("int8");
  const std::string wire = EncodeShard(spec, v.data() + offset, n, offset, nullptr);
  ASSERT_EQ(wire[0], static_cast<char>(ShardFormat::kInt8Blocks));
  // Touched blocks 3..23 (21); kept: 3 (partly), 5, 9, 13, 17, 21.
  const int64_t kept_values = (4 * 256 - offset) + 5 * 256;
  EXPECT_EQ(wire.size(), 9u + 8 * 6 + kept_values);
  EXPECT_LT(wire.size(), 5u + 4 * 21 + n);  // the whole int8 encoding
  auto d = DecodeShard(spec, wire, n, offset, total);
  ASSERT_TRUE(d.ok()) << d.status();
  for (int64_t i = 0; i < n; ++i) {
    const float x = v[offset + i];
    if (x == 0) {
      EXPECT_EQ((*d)[i], 0.f) << i;
    } else {
      EXPECT_NEAR((*d)[i], x, 0.05) << i;
    }
  }
  // A reduced shard: the same form, one value for everyone.
  std::vector<float> residual(n, 0.f);
  const std::string reduced = EncodeReducedShard(spec, v.data() + offset, n, offset,
                                                 residual.data(), {});
  EXPECT_EQ(reduced[0], static_cast<char>(ShardFormat::kInt8Blocks));
  auto r = DecodeShard(spec, reduced, n, offset, total);
  ASSERT_TRUE(r.ok()) << r.status();
  for (int64_t i = 0; i < n; ++i) EXPECT_FLOAT_EQ((*r)[i] + residual[i], v[offset + i]) << i;
  // No zero block: the whole encoding, as before.
  std::vector<float> dense = Random(total, 18);
  EXPECT_EQ(EncodeShard(spec, dense.data() + offset, n, offset, nullptr)[0],
            static_cast<char>(ShardFormat::kInt8));

  auto refused = [&](const std::string& w, const char* why) {
    auto bad = DecodeShard(spec, w, n, offset, total);
    EXPECT_TRUE(absl::IsInvalidArgument(bad.status())) << why << ": " << bad.status();
  };
  refused(wire.substr(0, wire.size() - 1), "truncated");
  refused(wire + "x", "trailing byte");
  refused(wire.substr(0, 8), "header truncated");
  EXPECT_FALSE(DecodeShard(Spec("bf16"), wire, n, offset, total).ok());
  std::string swapped = wire;  // indices 2, 0, ...
  std::memcpy(&swapped[9], &wire[13], 4);
  std::memcpy(&swapped[13], &wire[9], 4);
  refused(swapped, "decreasing block indices");
  std::string beyond = wire;
  const uint32_t past = 21;
  std::memcpy(&beyond[9 + 4 * 5], &past, 4);
  refused(beyond, "block index past the shard");
  std::string many = wire;
  const uint32_t count = 22;
  std::memcpy(&many[5], &count, 4);
  refused(many, "more blocks than the shard touches");
  std::string nan_scale = wire;
  const float nan = std::nanf("");
  std::memcpy(&nan_scale[9 + 4 * 6], &nan, 4);
  refused(nan_scale, "NaN scale");
  std::string bad_block = wire;
  bad_block[1] = 1;  // block size 257
  refused(bad_block, "block size");
  std::mt19937 gen(43);
  for (int trial = 0; trial < 2000; ++trial) {
    std::string w = wire;
    if (trial % 5 == 0) w.resize(gen() % (w.size() + 1));
    for (int k = 0; k < 3 && !w.empty(); ++k) w[gen() % w.size()] = static_cast<char>(gen());
    auto c = DecodeShard(spec, w, n, offset, total);
    if (c.ok()) {
      EXPECT_EQ(c->size(), static_cast<size_t>(n));
    }
  }
}

TEST(ShardCodecTest, MalformedShardsAreRefused) {
  const int64_t total = 4096, offset = 1024, n = 1024;
  std::vector<float> v = Random(total, 5);
  auto refused = [&](const char* codec, const std::string& wire, const char* why) {
    auto d = DecodeShard(Spec(codec), wire, n, offset, total);
    EXPECT_TRUE(absl::IsInvalidArgument(d.status())) << why << ": " << d.status();
    return d.status().message();
  };
  std::string int8 = EncodeShard(Spec("int8"), v.data() + offset, n, offset, nullptr);
  refused("int8", "", "empty");
  refused("int8", int8.substr(0, int8.size() - 1), "truncated");
  refused("int8", int8 + "x", "trailing byte");
  EXPECT_NE(refused("bf16", int8, "format of another codec").find("--avg_codec=bf16"),
            absl::string_view::npos);
  std::string bad_block = int8;
  bad_block[1] = 1;  // block size 257
  refused("int8", bad_block, "block size");
  std::string nan_scale = int8;
  const float nan = std::nanf("");
  std::memcpy(&nan_scale[5], &nan, 4);
  refused("int8", nan_scale, "NaN scale");
  std::string neg_scale = int8;
  const float neg = -1.f;
  std::memcpy(&neg_scale[5], &neg, 4);
  refused("int8", neg_scale, "negative scale");
  refused("int8", std::string(1, '\x09') + int8.substr(1), "unknown format");

  std::vector<float> sparse(total, 0.f);
  sparse[offset + 3] = 1.f;
  sparse[offset + 9] = 2.f;
  std::string sp = EncodeShard(Spec("topk:0.01"), sparse.data() + offset, n, offset, nullptr);
  std::string swapped = sp;  // indices 9, 3
  std::memcpy(&swapped[5], &sp[9], 4);
  std::memcpy(&swapped[9], &sp[5], 4);
  refused("topk:0.01", swapped, "decreasing indices");
  std::string beyond = sp;
  const uint32_t big = static_cast<uint32_t>(n);
  std::memcpy(&beyond[9], &big, 4);
  refused("topk:0.01", beyond, "index past the shard");
  std::string many = sp;
  const uint32_t count = static_cast<uint32_t>(n + 1);
  std::memcpy(&many[1], &count, 4);
  refused("topk:0.01", many, "more entries than elements");

  model::LowRankFactors f = Factors(total, 4, 9);
  std::vector<float> m = Product(f, total);
  std::string lr = EncodeShard(Spec("powersgd:4"), m.data() + offset, n, offset, &f);
  ASSERT_EQ(lr[0], static_cast<char>(ShardFormat::kLowRank));
  refused("powersgd:2", lr, "rank above this node's");
  std::string cols = lr;
  const uint32_t c = static_cast<uint32_t>(f.cols + 1);
  std::memcpy(&cols[1], &c, 4);
  refused("powersgd:4", cols, "another matrix shape");
  std::string row0 = lr;
  const uint32_t r0 = 0;
  std::memcpy(&row0[9], &r0, 4);
  refused("powersgd:4", row0, "rows of another part");
  std::string sum(1, static_cast<char>(ShardFormat::kLowRankSum));
  const uint32_t parts = 65;
  sum.append(reinterpret_cast<const char*>(&parts), 4);
  refused("powersgd:4", sum, "too many parts");
  std::string lie(1, static_cast<char>(ShardFormat::kLowRankSum));
  const uint32_t one = 1, len = 1u << 30;
  lie.append(reinterpret_cast<const char*>(&one), 4);
  lie.append(reinterpret_cast<const char*>(&len), 4);
  refused("powersgd:4", lie + lr, "part longer than the payload");
  refused("fp32", std::string(1 + 4 * n + 100, '\0'), "larger than fp32");
  EXPECT_FALSE(DecodeShard(Spec("fp32"), std::string(5, '\0'), 1, total, total).ok());

  // Random corruptions of valid shards: a status every time (fixed seed).
  std::mt19937 gen(42);
  const std::vector<std::pair<const char*, std::string>> valid = {
      {"int8", int8}, {"topk:0.01", sp}, {"powersgd:4", lr}};
  for (int trial = 0; trial < 3000; ++trial) {
    const auto& [codec, wire] = valid[trial % valid.size()];
    std::string w = wire;
    if (trial % 5 == 0) w.resize(gen() % (w.size() + 1));
    for (int k = 0; k < 3 && !w.empty(); ++k) w[gen() % w.size()] = static_cast<char>(gen());
    auto d = DecodeShard(Spec(codec), w, n, offset, total);
    if (d.ok()) {
      EXPECT_EQ(d->size(), static_cast<size_t>(n));
    }
  }
}

}  // namespace
}  // namespace skipswarm::node
