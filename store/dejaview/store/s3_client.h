// A minimal S3 client (path-style PUT, ranged GET, HEAD, DELETE, ListObjectsV2) on libcurl.
// The AWS Signature Version 4 signing is written here by hand on OpenSSL's SHA-256 and
// HMAC-SHA256, because Debian packages no AWS SDK for C++; it is the documented algorithm
// (canonical request -> string to sign -> derived key) and is pinned by AWS's own published
// example in tests/store/s3_test.cpp (s3rver, the test server, checks the access key but not
// V4 signatures, so that example is what holds the signing to the standard). Thread-safe: each
// request takes a curl handle from a pool, so concurrent requests reuse kept-alive connections.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "dejaview/base/status.h"

namespace dv::store {

struct S3Config {
  std::string endpoint;  // "http://127.0.0.1:4568" (no trailing slash)
  std::string bucket;
  std::string region = "us-east-1";
  // From the credential chain (credentials.h). A non-empty session token (STS, instance roles)
  // is sent as X-Amz-Security-Token and signed with the other headers.
  std::string access_key;
  std::string secret_key;
  std::string session_token;
  long timeout_ms = 30000;
};

// What SigV4 signs. headers: lower-case names; must include host and x-amz-date (and
// x-amz-security-token with temporary credentials).
struct SigV4Request {
  std::string service = "s3";
  std::string method;
  std::string canonical_uri;    // URI-encoded path, "/bucket/key"
  std::string canonical_query;  // sorted, URI-encoded "a=1&b=2"
  std::map<std::string, std::string> headers;
  std::string payload_sha256_hex;
  std::string amz_date;  // "20130524T000000Z"
};
// The Authorization header value for req.
std::string SigV4Authorization(const SigV4Request& req, const std::string& region,
                               const std::string& access_key, const std::string& secret_key);
// The request S3Client sends: path-style URI, the payload hash, host, x-amz-date, range when
// non-empty and the session token when the config has one.
SigV4Request S3SigV4Request(const S3Config& config, const std::string& method,
                            const std::string& key, const std::string& query,
                            const std::string& payload_sha256_hex, const std::string& range,
                            const std::string& amz_date);
std::string Sha256Hex(const void* data, size_t size);
// RFC 3986 encoding as SigV4 requires; keep_slash for paths.
std::string UriEncode(const std::string& s, bool keep_slash);

class S3Client {
 public:
  explicit S3Client(S3Config config);
  ~S3Client();
  S3Client(const S3Client&) = delete;
  S3Client& operator=(const S3Client&) = delete;

  const S3Config& config() const { return config_; }
  Status PutObject(const std::string& key, const uint8_t* data, size_t size);
  // Reads exactly length bytes at offset; a shorter object is kOutOfRange.
  Status GetRange(const std::string& key, uint64_t offset, uint64_t length, uint8_t* out);
  // The whole object, refused (kOutOfRange) when larger than max_bytes.
  StatusOr<std::vector<uint8_t>> GetObject(const std::string& key, uint64_t max_bytes);
  Status DeleteObject(const std::string& key);
  StatusOr<std::vector<std::string>> ListKeys(const std::string& prefix);

 private:
  struct Response {
    long http_status = 0;
    std::string body;  // error bodies and listings (bounded)
  };
  struct Sink;
  Status Perform(const std::string& method, const std::string& key, const std::string& query,
                 const uint8_t* body, size_t body_size, const std::string& range, Sink* sink,
                 Response* response);
  void* AcquireHandle();
  void ReleaseHandle(void* handle);

  const S3Config config_;
  std::mutex mu_;
  std::vector<void*> handles_;  // idle CURL* handles, kept for connection reuse
};

}  // namespace dv::store
