#include "dejaview/base/percentile.h"

#include <gtest/gtest.h>

namespace dv {
namespace {

TEST(NearestRank, SmallestSampleWithAtLeastPAtOrBelow) {
  const std::vector<double> v = {40, 10, 30, 20};  // unsorted on purpose
  EXPECT_EQ(NearestRank(v, 0.25), 10);
  EXPECT_EQ(NearestRank(v, 0.5), 20);  // an even count: the lower middle value
  EXPECT_EQ(NearestRank(v, 0.51), 30);
  EXPECT_EQ(NearestRank(v, 0.99), 40);
  EXPECT_EQ(NearestRank(v, 1.0), 40);
  EXPECT_EQ(NearestRank(v, 0.0), 10);  // clamped to the first rank
  EXPECT_EQ(NearestRank({7, 3, 5}, 0.5), 5);
  EXPECT_EQ(NearestRank({}, 0.5), 0);
}

}  // namespace
}  // namespace dv
