#include "dejaview/store/credentials.h"

#include <cstdlib>
#include <map>

#include "dejaview/base/file_util.h"

namespace dv::store {
namespace {

std::string Trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\r");
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(" \t\r") - a + 1);
}

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// Both keys or neither: a half-set source is refused rather than skipped.
Status CheckComplete(const AwsCredentials& c, const std::string& id_name,
                     const std::string& secret_name) {
  if (c.access_key.empty() != c.secret_key.empty()) {
    return Status::InvalidArgument(c.source + ": " +
                                   (c.access_key.empty() ? id_name : secret_name) +
                                   " is missing (the other key is set)");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<AwsCredentials> ParseSharedCredentials(const std::string& text, const std::string& what,
                                                const std::string& profile) {
  std::map<std::string, std::string> keys;  // of the wanted profile
  std::string section;
  bool found = false;
  size_t line_no = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string line = Trim(text.substr(pos, end - pos));
    pos = end + 1;
    ++line_no;
    const std::string at = what + ":" + std::to_string(line_no);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line[0] == '[') {
      if (line.back() != ']') return Status::InvalidArgument(at + ": section without ']'");
      section = Trim(line.substr(1, line.size() - 2));
      if (section == profile) {
        if (found) return Status::InvalidArgument(at + ": profile [" + profile + "] twice");
        found = true;
      }
      continue;
    }
    const size_t eq = line.find('=');
    if (eq == std::string::npos) return Status::InvalidArgument(at + ": expected key = value");
    if (section.empty()) return Status::InvalidArgument(at + ": key before any [profile]");
    if (section == profile) keys[Trim(line.substr(0, eq))] = Trim(line.substr(eq + 1));
  }
  if (!found) return Status::NotFound(what + ": no profile [" + profile + "]");
  AwsCredentials c;
  c.access_key = keys["aws_access_key_id"];
  c.secret_key = keys["aws_secret_access_key"];
  c.session_token = keys["aws_session_token"];
  c.source = what + " [" + profile + "]";
  DV_RETURN_IF_ERROR(CheckComplete(c, "aws_access_key_id", "aws_secret_access_key"));
  if (c.access_key.empty()) {
    return Status::NotFound(c.source + ": no aws_access_key_id / aws_secret_access_key");
  }
  return c;
}

StatusOr<AwsCredentials> ResolveAwsCredentials() {
  AwsCredentials env;
  env.access_key = Env("AWS_ACCESS_KEY_ID");
  env.secret_key = Env("AWS_SECRET_ACCESS_KEY");
  env.session_token = Env("AWS_SESSION_TOKEN");
  env.source = "environment";
  DV_RETURN_IF_ERROR(CheckComplete(env, "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"));
  if (!env.access_key.empty()) return env;

  std::string path = Env("AWS_SHARED_CREDENTIALS_FILE");
  if (path.empty() && !Env("HOME").empty()) path = Env("HOME") + "/.aws/credentials";
  const std::string profile = Env("AWS_PROFILE").empty() ? "default" : Env("AWS_PROFILE");
  const std::string none =
      "no AWS credentials: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY are not set in the "
      "environment";
  if (path.empty()) return Status::NotFound(none + " and HOME is not set");
  auto text = ReadFileText(path, kMaxCredentialsBytes);
  if (!text.ok()) {
    if (text.status().code() == Status::Code::kNotFound) {
      return Status::NotFound(none + " and " + path + " does not exist");
    }
    return text.status();
  }
  auto c = ParseSharedCredentials(*text, path, profile);
  if (!c.ok() && c.status().code() == Status::Code::kNotFound) {
    return Status::NotFound(none + ", and " + c.status().message());
  }
  return c;
}

}  // namespace dv::store
