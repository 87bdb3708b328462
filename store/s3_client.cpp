#include "dejaview/store/s3_client.h"

#include <curl/curl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cctype>
#include <cstring>
#include <ctime>

#include "dejaview/base/hex.h"

namespace dv::store {
namespace {

std::string Hmac(const std::string& key, const std::string& data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), int(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &len);
  return std::string(reinterpret_cast<char*>(out), len);
}

std::string AmzDateNow() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

// Pulls the text of the first <tag>...</tag> after from; npos when absent.
std::string XmlText(const std::string& xml, const std::string& tag, size_t* from) {
  const std::string open = "<" + tag + ">", close = "</" + tag + ">";
  const size_t a = xml.find(open, *from);
  if (a == std::string::npos) {
    *from = std::string::npos;
    return "";
  }
  const size_t b = xml.find(close, a);
  if (b == std::string::npos) {
    *from = std::string::npos;
    return "";
  }
  *from = b + close.size();
  return xml.substr(a + open.size(), b - a - open.size());
}

std::string XmlUnescape(std::string s) {
  static const std::pair<const char*, const char*> kEntities[] = {
      {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&apos;", "'"}, {"&amp;", "&"}};
  for (const auto& [from, to] : kEntities) {
    for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + 1)) {
      s.replace(p, std::strlen(from), to);
    }
  }
  return s;
}

constexpr size_t kMaxTextBody = 16 << 20;  // listings and error documents

}  // namespace

std::string Sha256Hex(const void* data, size_t size) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data, size, out, &len, EVP_sha256(), nullptr);
  return HexEncode(out, len);
}

std::string UriEncode(const std::string& s, bool keep_slash) {
  std::string out;
  for (const unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' ||
        (keep_slash && c == '/')) {
      out += char(c);
    } else {
      static const char kDigits[] = "0123456789ABCDEF";
      out += '%';
      out += kDigits[c >> 4];
      out += kDigits[c & 15];
    }
  }
  return out;
}

std::string SigV4Authorization(const SigV4Request& req, const std::string& region,
                               const std::string& access_key, const std::string& secret_key) {
  std::string canonical_headers, signed_headers;
  for (const auto& [name, value] : req.headers) {  // std::map: sorted by name, as SigV4 wants
    canonical_headers += name + ":" + value + "\n";
    signed_headers += (signed_headers.empty() ? "" : ";") + name;
  }
  const std::string canonical_request = req.method + "\n" + req.canonical_uri + "\n" +
                                        req.canonical_query + "\n" + canonical_headers + "\n" +
                                        signed_headers + "\n" + req.payload_sha256_hex;
  const std::string date = req.amz_date.substr(0, 8);
  const std::string scope = date + "/" + region + "/" + req.service + "/aws4_request";
  const std::string string_to_sign = "AWS4-HMAC-SHA256\n" + req.amz_date + "\n" + scope + "\n" +
                                     Sha256Hex(canonical_request.data(), canonical_request.size());
  const std::string key =
      Hmac(Hmac(Hmac(Hmac("AWS4" + secret_key, date), region), req.service), "aws4_request");
  const std::string sig = Hmac(key, string_to_sign);
  return "AWS4-HMAC-SHA256 Credential=" + access_key + "/" + scope +
         ",SignedHeaders=" + signed_headers + ",Signature=" + HexEncode(sig.data(), sig.size());
}

SigV4Request S3SigV4Request(const S3Config& config, const std::string& method,
                            const std::string& key, const std::string& query,
                            const std::string& payload_sha256_hex, const std::string& range,
                            const std::string& amz_date) {
  SigV4Request req;
  req.method = method;
  req.canonical_uri = "/" + config.bucket + (key.empty() ? "/" : "/" + UriEncode(key, true));
  req.canonical_query = query;
  req.amz_date = amz_date;
  req.payload_sha256_hex = payload_sha256_hex;
  req.headers = {{"host", config.endpoint.substr(config.endpoint.find("://") + 3)},
                 {"x-amz-content-sha256", payload_sha256_hex},
                 {"x-amz-date", amz_date}};
  if (!range.empty()) req.headers["range"] = range;
  if (!config.session_token.empty()) req.headers["x-amz-security-token"] = config.session_token;
  return req;
}

// Where a response body goes: into a caller's fixed buffer (object reads) or a bounded string.
// An error document (a 4xx/5xx body) always goes to the text, never into the caller's buffer.
struct S3Client::Sink {
  uint8_t* out = nullptr;
  uint64_t capacity = 0;
  uint64_t got = 0;
  bool overflow = false;
  std::string* text = nullptr;
  void* curl = nullptr;

  static size_t Write(char* p, size_t size, size_t n, void* self) {
    auto* s = static_cast<Sink*>(self);
    const size_t len = size * n;
    long http_status = 0;
    curl_easy_getinfo(static_cast<CURL*>(s->curl), CURLINFO_RESPONSE_CODE, &http_status);
    if (s->out && http_status / 100 == 2) {
      if (len > s->capacity - s->got) {
        s->overflow = true;
        return 0;  // aborts the transfer: the server sent more than asked for
      }
      std::memcpy(s->out + s->got, p, len);
    } else {
      if (s->text->size() + len > kMaxTextBody) {
        s->overflow = true;
        return 0;
      }
      s->text->append(p, len);
    }
    s->got += len;
    return len;
  }
};

namespace {

struct Source {
  const uint8_t* data;
  size_t size;
  size_t pos = 0;
  static size_t Read(char* p, size_t size, size_t n, void* self) {
    auto* s = static_cast<Source*>(self);
    const size_t len = std::min(size * n, s->size - s->pos);
    std::memcpy(p, s->data + s->pos, len);
    s->pos += len;
    return len;
  }
};

}  // namespace

S3Client::S3Client(S3Config config) : config_(std::move(config)) {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

S3Client::~S3Client() {
  for (void* h : handles_) curl_easy_cleanup(static_cast<CURL*>(h));
}

void* S3Client::AcquireHandle() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!handles_.empty()) {
      void* h = handles_.back();
      handles_.pop_back();
      return h;
    }
  }
  return curl_easy_init();
}

void S3Client::ReleaseHandle(void* handle) {
  std::lock_guard<std::mutex> lock(mu_);
  handles_.push_back(handle);
}

Status S3Client::Perform(const std::string& method, const std::string& key,
                         const std::string& query, const uint8_t* body, size_t body_size,
                         const std::string& range, Sink* sink, Response* response) {
  const SigV4Request req =
      S3SigV4Request(config_, method, key, query, Sha256Hex(body, body_size), range, AmzDateNow());
  const std::string& path = req.canonical_uri;
  const std::string auth =
      SigV4Authorization(req, config_.region, config_.access_key, config_.secret_key);

  curl_slist* headers = nullptr;
  for (const auto& [name, value] : req.headers) {
    if (name != "host") headers = curl_slist_append(headers, (name + ": " + value).c_str());
  }
  headers = curl_slist_append(headers, ("Authorization: " + auth).c_str());
  headers = curl_slist_append(headers, "Expect:");  // no 100-continue round trip per PUT

  CURL* h = static_cast<CURL*>(AcquireHandle());
  curl_easy_reset(h);
  const std::string url = config_.endpoint + path + (query.empty() ? "" : "?" + query);
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, config_.timeout_ms);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
  Source source{body, body_size};
  if (method == "PUT") {
    curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(h, CURLOPT_READFUNCTION, &Source::Read);
    curl_easy_setopt(h, CURLOPT_READDATA, &source);
    curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, curl_off_t(body_size));
  } else if (method == "HEAD") {
    curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
  } else if (method != "GET") {
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method.c_str());
  }
  Sink text_sink;
  text_sink.text = &response->body;
  text_sink.curl = h;
  if (sink) {
    sink->curl = h;
    if (!sink->text) sink->text = &response->body;
  }
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &Sink::Write);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, sink ? sink : &text_sink);
  const CURLcode rc = curl_easy_perform(h);
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &response->http_status);
  curl_slist_free_all(headers);
  ReleaseHandle(h);

  const std::string what = "s3 " + method + " " + url;
  Sink* used = sink ? sink : &text_sink;
  if (used->overflow) return Status::OutOfRange(what + ": response larger than expected");
  if (rc != CURLE_OK) return Status::Unavailable(what + ": " + curl_easy_strerror(rc));
  if (response->http_status == 404) return Status::NotFound(what + ": no such key");
  if (response->http_status / 100 != 2) {
    size_t from = 0;
    const std::string code = XmlText(response->body, "Code", &from);
    return Status::IoError(what + ": HTTP " + std::to_string(response->http_status) +
                           (code.empty() ? "" : " " + code));
  }
  return Status::Ok();
}

Status S3Client::PutObject(const std::string& key, const uint8_t* data, size_t size) {
  Response r;
  return Perform("PUT", key, "", data, size, "", nullptr, &r);
}

Status S3Client::GetRange(const std::string& key, uint64_t offset, uint64_t length, uint8_t* out) {
  if (length == 0) return Status::Ok();
  Sink sink;
  sink.out = out;
  sink.capacity = length;
  Response r;
  const std::string range =
      "bytes=" + std::to_string(offset) + "-" + std::to_string(offset + length - 1);
  DV_RETURN_IF_ERROR(Perform("GET", key, "", nullptr, 0, range, &sink, &r));
  if (r.http_status != 206 && !(r.http_status == 200 && offset == 0)) {
    return Status::IoError("s3 GET " + key + ": range ignored (HTTP " +
                           std::to_string(r.http_status) + ")");
  }
  if (sink.got != length) {
    return Status::OutOfRange("s3 GET " + key + ": got " + std::to_string(sink.got) + " of " +
                              std::to_string(length) + " bytes at offset " +
                              std::to_string(offset));
  }
  return Status::Ok();
}

StatusOr<std::vector<uint8_t>> S3Client::GetObject(const std::string& key, uint64_t max_bytes) {
  Response r;
  std::string text;
  Sink sink;
  sink.text = &text;
  DV_RETURN_IF_ERROR(Perform("GET", key, "", nullptr, 0, "", &sink, &r));
  if (text.size() > max_bytes) {
    return Status::OutOfRange("s3 GET " + key + ": " + std::to_string(text.size()) +
                              " bytes, limit " + std::to_string(max_bytes));
  }
  return std::vector<uint8_t>(text.begin(), text.end());
}

Status S3Client::DeleteObject(const std::string& key) {
  Response r;
  return Perform("DELETE", key, "", nullptr, 0, "", nullptr, &r);
}

StatusOr<std::vector<std::string>> S3Client::ListKeys(const std::string& prefix) {
  std::vector<std::string> keys;
  std::string token;
  for (;;) {
    // Query parameters sorted by name, as the canonical request requires.
    std::string query = token.empty() ? "" : "continuation-token=" + UriEncode(token, false) + "&";
    query += "list-type=2&prefix=" + UriEncode(prefix, false);
    Response r;
    DV_RETURN_IF_ERROR(Perform("GET", "", query, nullptr, 0, "", nullptr, &r));
    size_t from = 0;
    for (;;) {
      std::string k = XmlText(r.body, "Key", &from);
      if (from == std::string::npos) break;
      keys.push_back(XmlUnescape(std::move(k)));
    }
    from = 0;
    if (XmlText(r.body, "IsTruncated", &from) != "true") break;
    from = 0;
    token = XmlUnescape(XmlText(r.body, "NextContinuationToken", &from));
    if (token.empty()) return Status::Corruption("s3 list " + prefix + ": truncated without token");
  }
  return keys;
}

}  // namespace dv::store
