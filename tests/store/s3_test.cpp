// The S3 client and the remote tier against a real S3-compatible server (s3rver), plus AWS's
// published signing example (s3rver does not verify V4 signatures, so the example pins them).
#include <gtest/gtest.h>

#include "dejaview/store/remote_tier.h"
#include "dejaview/store/s3_client.h"
#include "dejaview/store/testing/s3rver_process.h"
#include "testutil.h"

namespace dv::store {
namespace {

// "GET Object" example of the AWS Signature V4 documentation (S3 API reference,
// sig-v4-header-based-auth): fixed keys, date and headers, published signature.
TEST(SigV4, MatchesAwsDocumentedExample) {
  SigV4Request req;
  req.method = "GET";
  req.canonical_uri = "/test.txt";
  req.amz_date = "20130524T000000Z";
  req.payload_sha256_hex = Sha256Hex("", 0);
  req.headers = {{"host", "examplebucket.s3.amazonaws.com"},
                 {"range", "bytes=0-9"},
                 {"x-amz-content-sha256", req.payload_sha256_hex},
                 {"x-amz-date", req.amz_date}};
  EXPECT_EQ(req.payload_sha256_hex,
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(SigV4Authorization(req, "us-east-1", "AKIAIOSFODNN7EXAMPLE",
                               "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
            "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
            "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
  EXPECT_EQ(UriEncode("a b/c~d", true), "a%20b/c~d");
  EXPECT_EQ(UriEncode("a/b", false), "a%2Fb");
}

std::unique_ptr<S3rverProcess> StartS3rver() {
  auto s3 = S3rverProcess::Start(test::ScratchDir() + "/s3", "dv-test");
  EXPECT_TRUE(s3.ok()) << s3.status().ToString();
  return s3.ok() ? std::move(*s3) : nullptr;
}

TEST(S3Client, PutRangeGetListDeleteOnRealServer) {
  auto s3 = StartS3rver();
  ASSERT_TRUE(s3);
  S3Client client(s3->config());
  std::vector<uint8_t> body(100000);
  for (size_t i = 0; i < body.size(); ++i) body[i] = uint8_t(i * 13);
  ASSERT_TRUE(client.PutObject("dir/a b", body.data(), body.size()).ok());
  ASSERT_TRUE(client.PutObject("dir/c", body.data(), 10).ok());
  std::vector<uint8_t> part(1000);
  const Status got = client.GetRange("dir/a b", 5000, part.size(), part.data());
  ASSERT_TRUE(got.ok()) << got.ToString();
  EXPECT_TRUE(std::equal(part.begin(), part.end(), body.begin() + 5000));
  auto whole = client.GetObject("dir/c", 1000);
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(*whole, std::vector<uint8_t>(body.begin(), body.begin() + 10));
  EXPECT_EQ(client.GetObject("dir/a b", 1000).status().code(), Status::Code::kOutOfRange);
  auto keys = client.ListKeys("dir/");
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  EXPECT_EQ(*keys, (std::vector<std::string>{"dir/a b", "dir/c"}));
  ASSERT_TRUE(client.DeleteObject("dir/c").ok());
  EXPECT_EQ(client.GetRange("dir/c", 0, 1, part.data()).code(), Status::Code::kNotFound);
  // Reading past the end is an error, never a short read reported as success.
  EXPECT_FALSE(client.GetRange("dir/a b", 99990, 20, part.data()).ok());
  // Unknown access key: the server refuses, and the error carries S3's code.
  S3Config wrong = s3->config();
  wrong.access_key = "NOT-A-KEY";
  const Status denied = S3Client(wrong).PutObject("x", body.data(), 1);
  EXPECT_EQ(denied.code(), Status::Code::kIoError);
  EXPECT_NE(denied.message().find("HTTP 403 InvalidAccessKeyId"), std::string::npos)
      << denied.ToString();
}

TEST(RemoteTier, PacksAreIndexedAtReopen) {
  auto s3 = StartS3rver();
  ASSERT_TRUE(s3);
  std::vector<std::vector<uint8_t>> objects;
  std::vector<PackMember> members;
  for (int i = 0; i < 5; ++i) {
    objects.emplace_back(size_t(1000 + i * 10), uint8_t(i));
  }
  for (const auto& o : objects)
    members.push_back({ComputeId(o.data(), o.size()), o.data(), o.size()});
  {
    auto tier = RemoteTier::Open(s3->config(), "fleet/");
    ASSERT_TRUE(tier.ok()) << tier.status().ToString();
    auto key = (*tier)->PutPack(members);
    ASSERT_TRUE(key.ok()) << key.status().ToString();
    EXPECT_EQ(key->rfind("fleet/packs/", 0), 0u);
    const std::vector<uint8_t> single(50, 9);
    ASSERT_TRUE((*tier)->Put(ComputeId(single.data(), 50), single.data(), 50).ok());
  }
  auto tier = RemoteTier::Open(s3->config(), "fleet/");
  ASSERT_TRUE(tier.ok());
  EXPECT_EQ((*tier)->objects(), 6u);
  EXPECT_EQ((*tier)->packs(), 2u);
  for (size_t i = 0; i < objects.size(); ++i) {
    auto got = (*tier)->Get(members[i].id);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(*got, objects[i]);
  }
  EXPECT_EQ((*tier)->Delete(members[0].id).code(), Status::Code::kInvalidArgument);
  const std::vector<uint8_t> single(50, 9);
  ASSERT_TRUE((*tier)->Delete(ComputeId(single.data(), 50)).ok());
  EXPECT_EQ((*tier)->packs(), 1u);
  // Another prefix in the same bucket is another store.
  auto other = RemoteTier::Open(s3->config(), "other/");
  ASSERT_TRUE(other.ok());
  EXPECT_EQ((*other)->objects(), 0u);
}

TEST(RemoteTier, ATruncatedPackIsLeftOutNotFatal) {
  auto s3 = StartS3rver();
  ASSERT_TRUE(s3);
  const std::vector<uint8_t> object(4000, 7);
  std::vector<uint8_t> pack;
  {
    auto tier = RemoteTier::Open(s3->config(), "cut/");
    ASSERT_TRUE(tier.ok()) << tier.status().ToString();
    pack = BuildPack({{ComputeId(object.data(), object.size()), object.data(), object.size()}});
    // What an uploader killed mid-PUT can leave behind: the pack's first 5 bytes under its key.
    ASSERT_TRUE((*tier)->client().PutObject((*tier)->PackKey(pack), pack.data(), 5).ok());
  }
  auto tier = RemoteTier::Open(s3->config(), "cut/");
  ASSERT_TRUE(tier.ok()) << tier.status().ToString();
  EXPECT_EQ((*tier)->objects(), 0u);
  ASSERT_EQ((*tier)->unreadable_packs().size(), 1u);
  // The redo writes the whole pack under the same key, after which it is indexed.
  ASSERT_TRUE((*tier)->PutPackBytes(pack).ok());
  EXPECT_EQ((*tier)->objects(), 1u);
  auto again = RemoteTier::Open(s3->config(), "cut/");
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE((*again)->unreadable_packs().empty());
  EXPECT_EQ((*again)->objects(), 1u);
}

}  // namespace
}  // namespace dv::store
