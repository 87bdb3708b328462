#include "dejaview/base/crc32c.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace dv {
namespace {

TEST(Crc32c, KnownVectors) {
  // RFC 3720 B.4 test vectors and the classic check value.
  EXPECT_EQ(crc32c::Value("123456789", 9), 0xe3069283u);
  std::vector<uint8_t> zeros(32, 0), ones(32, 0xff), inc(32);
  for (int i = 0; i < 32; ++i) inc[i] = uint8_t(i);
  EXPECT_EQ(crc32c::Value(zeros.data(), 32), 0x8a9136aau);
  EXPECT_EQ(crc32c::Value(ones.data(), 32), 0x62a8ab43u);
  EXPECT_EQ(crc32c::Value(inc.data(), 32), 0x46dd794eu);
}

TEST(Crc32c, ExtendEqualsWhole) {
  const std::string s = "hello, route map";
  for (size_t cut = 0; cut <= s.size(); ++cut) {
    EXPECT_EQ(crc32c::Extend(crc32c::Value(s.data(), cut), s.data() + cut, s.size() - cut),
              crc32c::Value(s.data(), s.size()));
  }
}

TEST(Crc32c, MaskRoundTrips) {
  const uint32_t c = crc32c::Value("foo", 3);
  EXPECT_NE(crc32c::Mask(c), c);
  EXPECT_EQ(crc32c::Unmask(crc32c::Mask(c)), c);
}

}  // namespace
}  // namespace dv
