// The SigV4 session token and the AWS credential chain (environment, shared credentials file),
// pinned by the aws-sig-v4-test-suite's post-sts-header-before vector and run against s3rver.
#include <gtest/gtest.h>

#include <cstdlib>

#include "dejaview/base/file_util.h"
#include "dejaview/store/credentials.h"
#include "dejaview/store/s3_client.h"
#include "dejaview/store/testing/s3rver_process.h"
#include "testutil.h"

namespace dv::store {
namespace {

// The suite's example session token (aws-sig-v4-test-suite, post-sts-token/readme.txt).
constexpr char kSuiteToken[] =
    "AQoDYXdzEPT//////////wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQWLWsKWHGBuFqwAeMicRXmxfpS"
    "PfIeoIYRqTflfKD8YUuwthAx7mSEI/qkPpKPi/kMcGdQrmGdeehM4IC1NtBmUpp2wUE8phUZampKsburEDy0KPkyQDYwT7"
    "WZ0wq5VSXDvp75YU9HFvlRd8Tx6q6fE8YQcHNVXAkiY9q6d+xo0rKwT38xVqr7ZD0u0iPPkUL64lIZbqBAz+scqKmlzm8"
    "FDrypNC9Yjc8fPOLn9FX9KSYvKTr4rvx3iSIlTJabIQwj2ICCR/oLxBA==";

// post-sts-header-before: the token is a signed header. The suite writes ", " between the
// Authorization's parts; AWS accepts either separator, this signer writes ",".
TEST(SigV4, SessionTokenMatchesAwsTestSuite) {
  SigV4Request req;
  req.service = "service";
  req.method = "POST";
  req.canonical_uri = "/";
  req.amz_date = "20150830T123600Z";
  req.payload_sha256_hex = Sha256Hex("", 0);
  req.headers = {{"host", "example.amazonaws.com"},
                 {"x-amz-date", req.amz_date},
                 {"x-amz-security-token", kSuiteToken}};
  EXPECT_EQ(SigV4Authorization(req, "us-east-1", "AKIDEXAMPLE",
                               "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"),
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request,"
            "SignedHeaders=host;x-amz-date;x-amz-security-token,"
            "Signature=85d96828115b5dc0cfc3bd16ad9e210dd772bbebba041836c64533a82be05ead");
}

// get-vanilla of the same suite: the service name is part of the scope and the key.
TEST(SigV4, ServiceMatchesAwsTestSuite) {
  SigV4Request req;
  req.service = "service";
  req.method = "GET";
  req.canonical_uri = "/";
  req.amz_date = "20150830T123600Z";
  req.payload_sha256_hex = Sha256Hex("", 0);
  req.headers = {{"host", "example.amazonaws.com"}, {"x-amz-date", req.amz_date}};
  EXPECT_EQ(SigV4Authorization(req, "us-east-1", "AKIDEXAMPLE",
                               "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"),
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request,"
            "SignedHeaders=host;x-amz-date,"
            "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
}

TEST(SigV4, S3RequestSignsTheSessionTokenOnlyWhenSet) {
  S3Config c;
  c.endpoint = "http://127.0.0.1:9000";
  c.bucket = "b";
  const SigV4Request plain = S3SigV4Request(c, "GET", "k", "", "e3", "", "20260101T000000Z");
  EXPECT_EQ(plain.headers.count("x-amz-security-token"), 0u);
  c.session_token = "TOKEN";
  const SigV4Request sts = S3SigV4Request(c, "GET", "k", "", "e3", "bytes=0-1", "20260101T000000Z");
  EXPECT_EQ(sts.canonical_uri, "/b/k");
  EXPECT_EQ(sts.headers, (std::map<std::string, std::string>{{"host", "127.0.0.1:9000"},
                                                             {"range", "bytes=0-1"},
                                                             {"x-amz-content-sha256", "e3"},
                                                             {"x-amz-date", "20260101T000000Z"},
                                                             {"x-amz-security-token", "TOKEN"}}));
  EXPECT_NE(
      SigV4Authorization(sts, "us-east-1", "a", "s")
          .find("SignedHeaders=host;range;x-amz-content-sha256;x-amz-date;x-amz-security-token,"),
      std::string::npos);
}

TEST(SharedCredentials, ReadsTheProfileAndNamesBadLines) {
  const std::string text =
      "# comment\n[default]\naws_access_key_id = AKID1\naws_secret_access_key=SECRET1\n"
      "region = eu-west-1\n\n; other\n[ci]\n  aws_access_key_id=AKID2 \n"
      "aws_secret_access_key = SECRET2\naws_session_token = TOK2\n";
  auto d = ParseSharedCredentials(text, "creds", "default");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->access_key, "AKID1");
  EXPECT_EQ(d->secret_key, "SECRET1");
  EXPECT_EQ(d->session_token, "");
  EXPECT_EQ(d->source, "creds [default]");
  auto ci = ParseSharedCredentials(text, "creds", "ci");
  ASSERT_TRUE(ci.ok()) << ci.status().ToString();
  EXPECT_EQ(ci->access_key, "AKID2");
  EXPECT_EQ(ci->secret_key, "SECRET2");
  EXPECT_EQ(ci->session_token, "TOK2");
  const std::pair<const char*, const char*> bad[] = {
      {"[default]\naws_access_key_id = A\n", "creds [default]: aws_secret_access_key is missing"},
      {"[default\n", "creds:1: section without ']'"},
      {"[default]\nnot a pair\n", "creds:2: expected key = value"},
      {"aws_access_key_id = A\n", "creds:1: key before any [profile]"},
      {"[default]\n[default]\n", "creds:2: profile [default] twice"},
      {"[other]\naws_access_key_id = A\n", "creds: no profile [default]"},
  };
  for (const auto& [ini, want] : bad) {
    auto r = ParseSharedCredentials(ini, "creds", "default");
    ASSERT_FALSE(r.ok()) << ini;
    EXPECT_EQ(r.status().message().rfind(want, 0), 0u) << r.status().message();
  }
}

// Sets the chain's variables for one test and restores them after.
class CredentialChain : public ::testing::Test {
 protected:
  static constexpr const char* kVars[] = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                                          "AWS_SESSION_TOKEN", "AWS_SHARED_CREDENTIALS_FILE",
                                          "AWS_PROFILE"};
  void SetUp() override {
    for (const char* v : kVars) {
      const char* old = std::getenv(v);
      if (old) saved_[v] = old;
      ::unsetenv(v);
    }
    dir_ = test::ScratchDir();
    file_ = dir_ + "/credentials";
    ASSERT_TRUE(WriteFileAtomic(file_, std::string("[default]\naws_access_key_id = FILEKEY\n"
                                                   "aws_secret_access_key = FILESECRET\n"
                                                   "[sts]\naws_access_key_id = S3RVER\n"
                                                   "aws_secret_access_key = S3RVER\n"
                                                   "aws_session_token = FQoGZXIvYXdzEXAMPLE\n"))
                    .ok());
    ::setenv("AWS_SHARED_CREDENTIALS_FILE", file_.c_str(), 1);
  }
  void TearDown() override {
    for (const char* v : kVars) ::unsetenv(v);
    for (const auto& [k, v] : saved_) ::setenv(k.c_str(), v.c_str(), 1);
  }
  std::string dir_, file_;
  std::map<std::string, std::string> saved_;
};

TEST_F(CredentialChain, EnvironmentFirstThenTheFileProfile) {
  ::setenv("AWS_ACCESS_KEY_ID", "ENVKEY", 1);
  ::setenv("AWS_SECRET_ACCESS_KEY", "ENVSECRET", 1);
  ::setenv("AWS_SESSION_TOKEN", "ENVTOKEN", 1);
  auto env = ResolveAwsCredentials();
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  EXPECT_EQ(env->access_key, "ENVKEY");
  EXPECT_EQ(env->secret_key, "ENVSECRET");
  EXPECT_EQ(env->session_token, "ENVTOKEN");
  EXPECT_EQ(env->source, "environment");

  ::unsetenv("AWS_ACCESS_KEY_ID");
  ::unsetenv("AWS_SECRET_ACCESS_KEY");
  ::unsetenv("AWS_SESSION_TOKEN");
  auto file = ResolveAwsCredentials();
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(file->access_key, "FILEKEY");
  EXPECT_EQ(file->secret_key, "FILESECRET");
  EXPECT_EQ(file->session_token, "");
  EXPECT_EQ(file->source, file_ + " [default]");

  ::setenv("AWS_PROFILE", "sts", 1);
  auto sts = ResolveAwsCredentials();
  ASSERT_TRUE(sts.ok()) << sts.status().ToString();
  EXPECT_EQ(sts->access_key, "S3RVER");
  EXPECT_EQ(sts->session_token, "FQoGZXIvYXdzEXAMPLE");
}

TEST_F(CredentialChain, HalfSetOrAbsentSourcesAreErrors) {
  ::setenv("AWS_ACCESS_KEY_ID", "ENVKEY", 1);
  auto half = ResolveAwsCredentials();
  EXPECT_EQ(half.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(half.status().message(),
            "environment: AWS_SECRET_ACCESS_KEY is missing (the other key is set)");
  ::unsetenv("AWS_ACCESS_KEY_ID");
  ::setenv("AWS_PROFILE", "typo", 1);
  auto no_profile = ResolveAwsCredentials();
  EXPECT_EQ(no_profile.status().code(), Status::Code::kNotFound);
  EXPECT_EQ(no_profile.status().message(),
            "no AWS credentials: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY are not set in the "
            "environment, and " +
                file_ + ": no profile [typo]");
  const std::string missing = dir_ + "/none";
  ::setenv("AWS_SHARED_CREDENTIALS_FILE", missing.c_str(), 1);
  EXPECT_EQ(ResolveAwsCredentials().status().message(),
            "no AWS credentials: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY are not set in the "
            "environment and " +
                missing + " does not exist");
}

// Temporary credentials from the file's profile, through the store config, on a real server:
// the request carries the signed token and s3rver serves it.
TEST_F(CredentialChain, SessionCredentialsFromTheFileWorkAgainstS3rver) {
  auto s3 = S3rverProcess::Start(dir_ + "/s3", "dv-sts");
  ASSERT_TRUE(s3.ok()) << s3.status().ToString();
  ::unsetenv("AWS_ACCESS_KEY_ID");  // S3rverProcess::Start sets the environment; the file serves
  ::unsetenv("AWS_SECRET_ACCESS_KEY");
  ::setenv("AWS_PROFILE", "sts", 1);
  S3Config c = (*s3)->config();
  auto creds = ResolveAwsCredentials();
  ASSERT_TRUE(creds.ok()) << creds.status().ToString();
  c.access_key = creds->access_key;
  c.secret_key = creds->secret_key;
  c.session_token = creds->session_token;
  S3Client client(c);
  const std::vector<uint8_t> body = {1, 2, 3, 4, 5};
  ASSERT_TRUE(client.PutObject("sts/object", body.data(), body.size()).ok());
  auto got = client.GetObject("sts/object", 100);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, body);
}

}  // namespace
}  // namespace dv::store
