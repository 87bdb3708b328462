#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "dejaview/bench/codec.h"
#include "dejaview/bench/metrics.h"

namespace dv::bench {
namespace {

PointCloud RandomCloud(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-40, 40), v(0, 1);
  PointCloud c;
  for (size_t i = 0; i < n; ++i) c.push_back({u(rng), u(rng), u(rng) / 10}, v(rng));
  return c;
}

EncodedFrame MustEncode(Codec& codec, const PointCloud& c, bool intensity, double knob) {
  FrameContext ctx;
  ctx.intensity = intensity;
  auto e = codec.Encode(c, Pose::Identity(), ctx, knob);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? std::move(e).value() : EncodedFrame{};
}

TEST(Peers, LosslessCodecsRoundTripBitExact) {
  const PointCloud c = RandomCloud(2000, 1);
  for (auto make : {MakeZstdCodec, MakeLz4Codec}) {
    auto codec = make();
    for (double knob : codec->DefaultKnobs()) {
      for (bool intensity : {false, true}) {
        const EncodedFrame e = MustEncode(*codec, c, intensity, knob);
        auto d = codec->Decode(e.bytes);
        ASSERT_TRUE(d.ok()) << d.status().ToString();
        ASSERT_EQ(d->cloud.size(), c.size());
        for (size_t i = 0; i < c.size(); ++i) {
          ASSERT_EQ(d->cloud.xyz[i], c.xyz[i]) << codec->name() << " " << i;
          ASSERT_EQ(d->cloud.intensity[i], intensity ? c.intensity[i] : 0.0f);
        }
      }
    }
  }
}

TEST(Peers, GridErrorIsAtMostHalfADiagonal) {
  const PointCloud c = RandomCloud(3000, 2);
  auto codec = MakeGridZstdCodec();
  for (double step : codec->DefaultKnobs()) {
    const EncodedFrame e = MustEncode(*codec, c, true, step);
    auto d = codec->Decode(e.bytes);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    ASSERT_EQ(d->cloud.size(), c.size());
    double worst = 0;
    for (size_t i = 0; i < c.size(); ++i) {
      worst = std::max(worst, (d->cloud.xyz[i].cast<double>() - c.xyz[i].cast<double>()).norm());
      ASSERT_LE(std::fabs(d->cloud.intensity[i] - c.intensity[i]), 0.5f / 255 + 1e-6f);
    }
    // Half a step per axis, plus float32 rounding of the decoded coordinate.
    EXPECT_LE(worst, step * std::sqrt(3.0) / 2 + 1e-5) << step;
    EXPECT_LE(CompareFrames(c.xyz, d->cloud.xyz).hausdorff_m(), step * std::sqrt(3.0) / 2 + 1e-5);
  }
}

TEST(Peers, DracoErrorFollowsItsQuantisationStep) {
  auto codec = MakeDracoCodec();
  if (!codec) GTEST_SKIP() << "built without Draco";
  const PointCloud c = RandomCloud(3000, 3);
  for (double bits : codec->DefaultKnobs()) {
    const EncodedFrame e = MustEncode(*codec, c, true, bits);
    auto d = codec->Decode(e.bytes);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    ASSERT_EQ(d->cloud.size(), c.size());
    // Draco quantises in the bounding cube: the largest extent (80 m here) over 2^bits - 1.
    const double step = 80.0 / (std::pow(2.0, bits) - 1);
    EXPECT_LE(CompareFrames(c.xyz, d->cloud.xyz).hausdorff_m(), step * std::sqrt(3.0) / 2 + 1e-4)
        << bits;
  }
}

TEST(Peers, CorruptInputIsAnErrorNotACrash) {
  const PointCloud c = RandomCloud(500, 4);
  std::vector<std::unique_ptr<Codec>> codecs;
  codecs.push_back(MakeZstdCodec());
  codecs.push_back(MakeLz4Codec());
  codecs.push_back(MakeGridZstdCodec());
  if (auto d = MakeDracoCodec()) codecs.push_back(std::move(d));
  for (auto& codec : codecs) {
    const EncodedFrame e = MustEncode(*codec, c, true, codec->DefaultKnobs()[1]);
    for (size_t cut : {size_t(0), size_t(1), size_t(3), e.bytes.size() / 2, e.bytes.size() - 1}) {
      const std::vector<uint8_t> truncated(e.bytes.begin(), e.bytes.begin() + long(cut));
      EXPECT_FALSE(codec->Decode(truncated).ok()) << codec->name() << " cut " << cut;
    }
    std::vector<uint8_t> huge = e.bytes;
    if (codec->name() != "draco") {
      huge[2] = 0xff;  // point count varint now claims far more points than the payload holds
      huge.insert(huge.begin() + 3, {0xff, 0xff, 0xff, 0x7f});
      EXPECT_FALSE(codec->Decode(huge).ok()) << codec->name();
    }
  }
}

TEST(Peers, RegistryNamesEveryBuiltInCodec) {
  for (const auto& name : AvailableCodecs()) {
    auto c = MakeCodec(name);
    ASSERT_TRUE(c.ok()) << name;
    EXPECT_EQ((*c)->name(), name);
  }
  auto bad = MakeCodec("gzip");
  EXPECT_EQ(bad.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("zstd"), std::string::npos);
}

}  // namespace
}  // namespace dv::bench
