#include "dejaview/base/status.h"

#include <gtest/gtest.h>

namespace dv {
namespace {

StatusOr<int> Half(int v) {
  if (v % 2) return Status::InvalidArgument("odd value " + std::to_string(v));
  return v / 2;
}

Status Quarter(int v, int* out) {
  DV_ASSIGN_OR_RETURN(int h, Half(v));
  DV_ASSIGN_OR_RETURN(*out, Half(h));
  return Status::Ok();
}

TEST(Status, CarriesCodeAndContext) {
  const Status s = Status::Corruption("truncated").WithContext("a.bin");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Status::Code::kCorruption);
  EXPECT_EQ(s.ToString(), "corruption: a.bin: truncated");
  EXPECT_TRUE(Status::Ok().WithContext("x").ok());
}

TEST(Status, MacrosPropagateTheFirstError) {
  int out = 0;
  EXPECT_TRUE(Quarter(8, &out).ok());
  EXPECT_EQ(out, 2);
  EXPECT_EQ(Quarter(6, &out).message(), "odd value 3");
}

}  // namespace
}  // namespace dv
