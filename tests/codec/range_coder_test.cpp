#include "dejaview/codec/range_coder.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace dv::codec {
namespace {

TEST(RangeCoder, RoundTripsSkewedAndDirectBits) {
  std::mt19937 rng(1);
  std::bernoulli_distribution skew(0.03);
  std::vector<int> bits(20000);
  std::vector<uint32_t> raw(2000);
  for (int& b : bits) b = skew(rng);
  for (uint32_t& r : raw) r = rng() & 0x1fff;
  RangeEncoder enc;
  BitModel m[2];
  for (size_t i = 0; i < bits.size(); ++i) {
    enc.Encode(&m[i & 1], bits[i]);
    if (i % 10 == 0) enc.EncodeDirect(raw[i / 10], 13);
  }
  const std::vector<uint8_t> out = enc.Finish();
  // Entropy of a 3% source is 0.194 bits; 2000 x 13 direct bits on top.
  const double ideal_bytes = (bits.size() * 0.1944 + raw.size() * 13) / 8;
  EXPECT_LT(double(out.size()), ideal_bytes * 1.08);

  RangeDecoder dec(out.data(), out.size());
  BitModel d[2];
  for (size_t i = 0; i < bits.size(); ++i) {
    ASSERT_EQ(dec.Decode(&d[i & 1]), bits[i]) << i;
    if (i % 10 == 0) {
      ASSERT_EQ(dec.DecodeDirect(13), raw[i / 10]);
    }
  }
  EXPECT_EQ(dec.overrun(), 0u);
}

// The models learn a fresh context from its first bits: a coder's contexts are many and most see
// few bits (500 contexts of 100 bits here, 2% ones), so this is where the frames' bytes go.
TEST(RangeCoder, ColdContextsLearnFromTheirFirstBits) {
  std::mt19937 rng(2);
  std::bernoulli_distribution skew(0.02);
  std::vector<int> bits(50000);
  for (int& b : bits) b = skew(rng);
  RangeEncoder enc;
  std::vector<BitModel> m(500);
  for (size_t i = 0; i < bits.size(); ++i) enc.Encode(&m[i % m.size()], bits[i]);
  const std::vector<uint8_t> out = enc.Finish();
  RangeDecoder dec(out.data(), out.size());
  std::vector<BitModel> d(500);
  for (size_t i = 0; i < bits.size(); ++i) ASSERT_EQ(dec.Decode(&d[i % d.size()]), bits[i]);
  // Entropy of a 2% source: 0.1414 bits, 884 bytes for 50000 bits.
  EXPECT_LT(double(out.size()), 1.4 * 884) << out.size();
}

TEST(RangeCoder, EmptyStreamAndAllOnes) {
  RangeEncoder empty;
  const auto e = empty.Finish();
  RangeDecoder de(e.data(), e.size());
  EXPECT_EQ(de.overrun(), 0u);

  RangeEncoder enc;
  BitModel m;
  for (int i = 0; i < 100000; ++i) enc.Encode(&m, 1);
  const auto out = enc.Finish();
  EXPECT_LT(out.size(), 400u);  // adaptive: a constant source costs almost nothing
  RangeDecoder dec(out.data(), out.size());
  BitModel d;
  for (int i = 0; i < 100000; ++i) ASSERT_EQ(dec.Decode(&d), 1);
  EXPECT_EQ(dec.overrun(), 0u);
}

TEST(RangeCoder, IntegersAndBitTrees) {
  std::mt19937_64 rng(3);
  std::vector<uint64_t> values = {
      0, 1, 2, 3, 255, 256, 65535, (uint64_t(1) << 40) + 5, (uint64_t(1) << 62) - 1};
  for (int i = 0; i < 1000; ++i)
    values.push_back(rng() >> (rng() % 62 + 2));  // shift 2..63: below 2^62, no UB
  RangeEncoder enc;
  UIntModel um;
  BitTree<6> tree;
  for (uint64_t v : values) {
    um.Encode(&enc, v);
    tree.Encode(&enc, uint32_t(v & 63));
  }
  const auto out = enc.Finish();
  RangeDecoder dec(out.data(), out.size());
  UIntModel ud;
  BitTree<6> td;
  for (uint64_t v : values) {
    uint64_t got = 0;
    ASSERT_TRUE(ud.Decode(&dec, UINT64_MAX, &got));
    ASSERT_EQ(got, v);
    ASSERT_EQ(td.Decode(&dec), uint32_t(v & 63));
  }
  EXPECT_EQ(dec.overrun(), 0u);
  // A bound below the coded value is refused.
  RangeEncoder five;
  UIntModel u5;
  u5.Encode(&five, 5);
  const auto fb = five.Finish();
  RangeDecoder again(fb.data(), fb.size());
  UIntModel u2;
  uint64_t got = 0;
  EXPECT_FALSE(u2.Decode(&again, 4, &got));
}

TEST(RangeCoder, TruncatedStreamOverruns) {
  std::mt19937 rng(5);
  RangeEncoder enc;
  BitModel m;
  for (int i = 0; i < 5000; ++i) enc.Encode(&m, int(rng() & 1));
  auto out = enc.Finish();
  out.resize(out.size() / 2);
  RangeDecoder dec(out.data(), out.size());
  BitModel d;
  for (int i = 0; i < 5000; ++i) dec.Decode(&d);
  EXPECT_GT(dec.overrun(), 0u);
}

}  // namespace
}  // namespace dv::codec
