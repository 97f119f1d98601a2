#include "model/tensor_codec.h"

#include <gtest/gtest.h>

#include <limits>

#include "common/random.h"
#include "common/crc32c.h"

namespace skipswarm::model {
namespace {

at::Tensor Activation(std::vector<int64_t> shape = {2, 8, 16}) {
  at::Generator gen = at::detail::createCPUGenerator(42);
  return at::randn(shape, gen);
}

DecodeExpectations Want(std::vector<int64_t> shape = {-1, 8, 16}) {
  DecodeExpectations w;
  w.shape = std::move(shape);
  return w;
}

// CRC-32C itself is tested in common/crc32c_test.cc.

TEST(TensorCodecTest, RoundTripsEveryCodecWithinItsError) {
  at::Tensor x = Activation();
  struct Case { Codec codec; double max_rel_l2; };
  for (Case c : {Case{Codec::kRawFp32, 0.0}, Case{Codec::kFp16, 1e-3}, Case{Codec::kBf16, 5e-3},
                 Case{Codec::kInt8Blockwise, 1.5e-2}}) {
    EncodeOptions opt;
    opt.codec = c.codec;
    opt.block_size = 64;
    absl::StatusOr<EncodedTensor> enc = EncodeTensor(x, opt);
    ASSERT_TRUE(enc.ok()) << enc.status();
    EXPECT_EQ(enc->meta.payload_bytes, enc->payload.size());
    absl::StatusOr<at::Tensor> dec = DecodeTensor(enc->meta, enc->payload, Want());
    ASSERT_TRUE(dec.ok()) << CodecName(c.codec) << ": " << dec.status();
    CodecError err = MeasureCodecError(x, *dec);
    EXPECT_LE(err.rel_l2, c.max_rel_l2) << CodecName(c.codec);
    std::cout << CodecName(c.codec) << ": " << enc->payload.size() << " bytes, max abs error "
              << err.max_abs << ", relative L2 error " << err.rel_l2 << "\n";
  }
}

TEST(TensorCodecTest, RawDecodeCanAdoptThePayload) {
  at::Tensor x = Activation();
  EncodedTensor enc = EncodeTensor(x, {Codec::kRawFp32}).value();
  std::string payload = enc.payload;
  const char* bytes = payload.data();
  absl::StatusOr<at::Tensor> dec = DecodeTensor(enc.meta, std::move(payload), Want());
  ASSERT_TRUE(dec.ok()) << dec.status();
  EXPECT_TRUE(dec->equal(x));
  EXPECT_EQ(static_cast<const void*>(dec->data_ptr()), static_cast<const void*>(bytes));
  // Checks still apply to the adopting overload.
  std::string corrupt = enc.payload;
  corrupt[3] ^= 1;
  EXPECT_EQ(DecodeTensor(enc.meta, std::move(corrupt), Want()).status().code(),
            absl::StatusCode::kDataLoss);
  EncodedTensor half = EncodeTensor(x, {Codec::kFp16}).value();
  EXPECT_TRUE(DecodeTensor(half.meta, std::move(half.payload), Want()).ok());
}

TEST(TensorCodecTest, Int8HandlesPartialLastBlockAndZeros) {
  at::Tensor x = at::cat({at::zeros({70}), Activation({30})});
  absl::StatusOr<EncodedTensor> enc = EncodeTensor(x, {Codec::kInt8Blockwise, 64});
  ASSERT_TRUE(enc.ok());
  EXPECT_EQ(enc->payload.size(), 2u * 4 + 100);
  DecodeExpectations w;
  absl::StatusOr<at::Tensor> dec = DecodeTensor(enc->meta, enc->payload, w);
  ASSERT_TRUE(dec.ok()) << dec.status();
  EXPECT_TRUE(dec->slice(0, 0, 64).eq(0).all().item<bool>());
  EXPECT_LE(MeasureCodecError(x, *dec).max_abs, 0.05);
}

TEST(TensorCodecTest, TokensRoundTripExactly) {
  at::Tensor tokens = at::arange(24, at::kLong).reshape({2, 12});
  absl::StatusOr<EncodedTensor> enc = EncodeTensor(tokens, {Codec::kRawInt64});
  ASSERT_TRUE(enc.ok());
  DecodeExpectations w;
  w.dtype = WireDType::kInt64;
  w.shape = {2, 12};
  absl::StatusOr<at::Tensor> dec = DecodeTensor(enc->meta, enc->payload, w);
  ASSERT_TRUE(dec.ok()) << dec.status();
  EXPECT_TRUE(dec->equal(tokens));
  // Floats cannot go as int64 and back.
  EXPECT_FALSE(EncodeTensor(Activation(), {Codec::kRawInt64}).ok());
  EXPECT_FALSE(EncodeTensor(tokens, {Codec::kFp16}).ok());
}

class DecoderRejectsTest : public ::testing::Test {
 protected:
  void SetUp() override { enc_ = EncodeTensor(Activation(), {Codec::kFp16}).value(); }
  absl::StatusCode Code(const TensorMeta& meta, absl::string_view payload,
                        const DecodeExpectations& w = Want()) {
    return DecodeTensor(meta, payload, w).status().code();
  }
  EncodedTensor enc_;
};

TEST_F(DecoderRejectsTest, TruncatedAndOversizedPayloads) {
  std::string p = enc_.payload;
  EXPECT_EQ(Code(enc_.meta, p.substr(0, p.size() - 1)), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Code(enc_.meta, ""), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Code(enc_.meta, p + "x"), absl::StatusCode::kInvalidArgument);
  TensorMeta m = enc_.meta;
  m.payload_bytes += 2;
  EXPECT_EQ(Code(m, p), absl::StatusCode::kInvalidArgument);
  // A header claiming a huge shape is refused before anything is allocated.
  m = enc_.meta;
  m.shape = {1 << 30, 1 << 30, 16};
  DecodeExpectations any;
  any.shape = {-1, -1, 16};
  EXPECT_EQ(Code(m, p, any), absl::StatusCode::kResourceExhausted);
  DecodeExpectations small = Want();
  small.max_payload_bytes = 100;
  EXPECT_EQ(Code(enc_.meta, p, small), absl::StatusCode::kResourceExhausted);
}

TEST_F(DecoderRejectsTest, WrongDtypeCodecRankAndShape) {
  TensorMeta m = enc_.meta;
  m.dtype = WireDType::kInt64;
  EXPECT_EQ(Code(m, enc_.payload), absl::StatusCode::kInvalidArgument);
  m = enc_.meta;
  m.codec = static_cast<Codec>(99);
  EXPECT_EQ(Code(m, enc_.payload), absl::StatusCode::kInvalidArgument);
  m = enc_.meta;
  m.codec = Codec::kBf16;  // same size, wrong CRC is not reached: codec disallowed
  DecodeExpectations only_fp16 = Want();
  only_fp16.allowed_codecs = {Codec::kFp16};
  EXPECT_EQ(Code(m, enc_.payload, only_fp16), absl::StatusCode::kInvalidArgument);
  m = enc_.meta;
  m.shape = {2, 8, 8, 2};
  EXPECT_EQ(Code(m, enc_.payload), absl::StatusCode::kInvalidArgument);
  m.shape = {4, 4, 16};
  EXPECT_EQ(Code(m, enc_.payload), absl::StatusCode::kInvalidArgument);
  m.shape = {0, 8, 16};
  EXPECT_EQ(Code(m, enc_.payload), absl::StatusCode::kInvalidArgument);
  m.shape = {-2, 8, 16};
  EXPECT_EQ(Code(m, enc_.payload), absl::StatusCode::kInvalidArgument);
  m.shape = {};
  EXPECT_EQ(Code(m, enc_.payload, DecodeExpectations()), absl::StatusCode::kInvalidArgument);
  m = enc_.meta;
  m.block_size = 7;
  EXPECT_EQ(Code(m, enc_.payload), absl::StatusCode::kInvalidArgument);
  DecodeExpectations tokens;
  tokens.dtype = WireDType::kInt64;
  EXPECT_EQ(Code(enc_.meta, enc_.payload, tokens), absl::StatusCode::kInvalidArgument);
}

TEST_F(DecoderRejectsTest, CorruptedBytesFailTheChecksum) {
  std::string p = enc_.payload;
  p[p.size() / 2] ^= 0x10;
  EXPECT_EQ(Code(enc_.meta, p), absl::StatusCode::kDataLoss);
}

TEST_F(DecoderRejectsTest, NanAndInfRejectedOrCounted) {
  at::Tensor x = Activation();
  x[0][1][2] = std::numeric_limits<float>::quiet_NaN();
  x[1][3][4] = std::numeric_limits<float>::infinity();
  for (Codec codec : {Codec::kRawFp32, Codec::kFp16, Codec::kBf16, Codec::kInt8Blockwise}) {
    EncodedTensor enc = EncodeTensor(x, {codec, 32}).value();
    EXPECT_EQ(Code(enc.meta, enc.payload), absl::StatusCode::kInvalidArgument) << CodecName(codec);
    DecodeExpectations count = Want();
    count.non_finite = NonFinitePolicy::kCount;
    DecodeStats stats;
    absl::StatusOr<at::Tensor> dec = DecodeTensor(enc.meta, enc.payload, count, &stats);
    ASSERT_TRUE(dec.ok()) << dec.status();
    // int8 poisons the whole block of a non-finite value.
    if (codec == Codec::kInt8Blockwise) EXPECT_EQ(stats.non_finite, 64);
    else EXPECT_EQ(stats.non_finite, 2);
  }
}

TEST_F(DecoderRejectsTest, NegativeInt8ScaleRejected) {
  EncodedTensor enc = EncodeTensor(Activation(), {Codec::kInt8Blockwise, 64}).value();
  float neg = -1.0f;
  std::memcpy(enc.payload.data(), &neg, 4);
  enc.meta.payload_crc32c = common::Crc32c(enc.payload.data(), enc.payload.size());
  EXPECT_EQ(Code(enc.meta, enc.payload), absl::StatusCode::kInvalidArgument);
}

// Random mutations of header and payload, each re-checksummed half of the
// time so the decode path behind the CRC is exercised too: never a crash.
TEST_F(DecoderRejectsTest, RandomMutationsNeverCrash) {
  common::Random rng(1234);
  int accepted = 0;
  for (int iter = 0; iter < 2000; ++iter) {
    Codec codec = static_cast<Codec>(rng.UniformInt(1, 4));
    EncodedTensor enc = EncodeTensor(Activation(), {codec, 16}).value();
    TensorMeta m = enc.meta;
    std::string p = enc.payload;
    switch (rng.UniformInt(0, 6)) {
      case 0: p.resize(rng.UniformInt(0, p.size() * 2)); break;
      case 1: p[rng.UniformInt(0, p.size() - 1)] = static_cast<char>(rng()); break;
      case 2: m.shape[rng.UniformInt(0, 2)] = static_cast<int64_t>(rng()); break;
      case 3: m.block_size = static_cast<uint32_t>(rng()); break;
      case 4: m.codec = static_cast<Codec>(rng.UniformInt(0, 7)); break;
      case 5: m.dtype = static_cast<WireDType>(rng.UniformInt(0, 7)); break;
      case 6: m.payload_bytes = rng(); break;
    }
    if (rng.Bernoulli(0.5)) m.payload_crc32c = common::Crc32c(p.data(), p.size());
    DecodeExpectations w;
    w.non_finite = NonFinitePolicy::kCount;
    absl::StatusOr<at::Tensor> dec = DecodeTensor(m, p, w);
    if (dec.ok()) {
      ++accepted;
      EXPECT_EQ(dec->numel(), 2 * 8 * 16);
    }
  }
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, 2000);
}

}  // namespace
}  // namespace skipswarm::model
