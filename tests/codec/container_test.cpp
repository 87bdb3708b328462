// The container (container.h): the pinned bitstream, and damaged, truncated or misdirected frames.
#include "codec_test_util.h"

namespace dv::codec {
namespace {

// The bitstream is pinned: the encoder writes the committed files byte for byte (with and without
// the AVX2 paths), and each decodes within its bound. An intra frame, a delta frame against the
// map without codec priors, and one against the map with the committed priors.
// DEJAVIEW_UPDATE_GOLDEN=1 rewrites them; until the format's first release a format change
// replaces the files, it does not add a version.
TEST_F(StreetMap, GoldenFilesPinTheBitstream) {
  const PointCloud frame = test::StreetFrame(test::StreetPose(3), {test::CarAt(5, 3)});
  const std::unique_ptr<maps::RouteMap> priors = GoldenPriorsMap();
  ASSERT_TRUE(priors);
  ASSERT_FALSE(priors->codec_priors().empty());
  ASSERT_TRUE(map_->codec_priors().empty());
  struct Golden {
    const char* name;
    maps::RouteMap* map;
  };
  for (const Golden& g :
       {Golden{"golden_intra.dvd", nullptr}, Golden{"golden_delta_without_priors.dvd", map_.get()},
        Golden{"golden_delta.dvd", priors.get()}}) {
    const std::string path = test::FixturePath(g.name);
    EncoderParams p;
    p.tolerance_m = 0.15;
    auto bytes = Encode(frame, test::StreetPose(3), {42, 1000, 0}, p, g.map).value();
    if (std::getenv("DEJAVIEW_UPDATE_GOLDEN")) {
      ASSERT_TRUE(WriteFileAtomic(path, bytes).ok());
    }
    auto golden = ReadFileBytes(path);
    ASSERT_TRUE(golden.ok()) << golden.status().ToString();
    EXPECT_EQ(bytes, *golden) << g.name << " differs from the committed bitstream";
    // Without the AVX2 paths (projection, classification), as on a CPU without AVX2.
    AllowAvx2(false);
    auto sse2 = Encode(frame, test::StreetPose(3), {42, 1000, 0}, p, g.map);
    AllowAvx2(true);
    ASSERT_TRUE(sse2.ok());
    EXPECT_EQ(*sse2, *golden) << g.name << " differs without AVX2";
    auto dec = Decode(golden->data(), golden->size(), g.map);
    ASSERT_TRUE(dec.ok()) << g.name << ": " << dec.status().ToString();
    EXPECT_EQ(dec->info.sequence, 42u);
    EXPECT_EQ((*golden)[4], 1) << g.name;
    // Gap and fill points in the delta frames only, and never more points than the original.
    EXPECT_EQ(std::count(dec->source.begin(), dec->source.end(), 2) > 0, g.map != nullptr)
        << g.name;
    EXPECT_EQ(std::count(dec->source.begin(), dec->source.end(), 3) > 0, g.map != nullptr)
        << g.name;
    EXPECT_LE(dec->cloud.size(), frame.size()) << g.name;
    EXPECT_LE(bench::CompareFrames(frame.xyz, dec->cloud.xyz).hausdorff_m(), 0.15) << g.name;
  }
}

TEST_F(StreetMap, CorruptTruncatedAndWrongMapInputsAreRejected) {
  const PointCloud frame = test::StreetFrame(test::StreetPose(5));
  auto bytes = Encode(frame, test::StreetPose(5), {}, {}, map_.get()).value();
  ASSERT_TRUE(Decode(bytes.data(), bytes.size(), map_.get()).ok());

  for (size_t n = 0; n < bytes.size(); n += 1 + n / 3) {
    auto d = Decode(bytes.data(), n, map_.get());
    ASSERT_FALSE(d.ok()) << "truncated to " << n;
    EXPECT_EQ(d.status().code(), Status::Code::kCorruption);
  }
  for (size_t i = 0; i < bytes.size(); i += 7) {
    auto copy = bytes;
    copy[i] ^= 0x10;
    ASSERT_FALSE(Decode(copy.data(), copy.size(), map_.get()).ok()) << "flipped byte " << i;
  }
  auto longer = bytes;
  longer.push_back(0);
  EXPECT_NE(Decode(longer.data(), longer.size(), map_.get()).status().message().find("trailing"),
            std::string::npos);
  auto truncated = Decode(bytes.data(), bytes.size() - 10, map_.get());
  EXPECT_NE(truncated.status().message().find("truncated"), std::string::npos)
      << truncated.status().message();

  auto no_map = Decode(bytes.data(), bytes.size(), nullptr);
  EXPECT_NE(no_map.status().message().find(map_->version()), std::string::npos);
  const Drive other = test::WriteStreetDrive(root_ + "/other", {0, 3});
  maps::BuildOptions opt;
  opt.resolution_m = 0.1;
  ASSERT_TRUE(maps::BuildMap({other}, opt, root_ + "/other_map").ok());
  auto other_map = maps::OpenMap(root_ + "/other_map", 0).value();
  auto wrong = Decode(bytes.data(), bytes.size(), other_map.get());
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("coded against map " + map_->version()),
            std::string::npos)
      << wrong.status().message();
}

}  // namespace
}  // namespace dv::codec
