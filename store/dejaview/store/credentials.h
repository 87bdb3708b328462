// AWS credentials from the standard chain's first two sources, in the order every AWS SDK and
// the CLI use them: the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, optional
// AWS_SESSION_TOKEN), then the shared credentials file (AWS_SHARED_CREDENTIALS_FILE, default
// ~/.aws/credentials) at the profile AWS_PROFILE (default "default"). Written by hand because
// Debian packages no AWS SDK for C++; instance-metadata and SSO sources are not read (a vehicle
// or a host with an instance role gets STS credentials into one of these two by its own agent).
//
// The shared file is the SDKs' INI dialect: "[profile]" sections, "key = value" lines, '#' or
// ';' comment lines, keys aws_access_key_id, aws_secret_access_key, aws_session_token (other
// keys, such as region, are ignored as the SDKs do). Bounded: a file over kMaxCredentialsBytes is
// an error, never an allocation.
#pragma once

#include <cstdint>
#include <string>

#include "dejaview/base/status.h"

namespace dv::store {

struct AwsCredentials {
  std::string access_key;
  std::string secret_key;
  std::string session_token;  // empty for long-term keys; STS credentials always have one
  std::string source;         // "environment" or "PATH [PROFILE]", for messages
};

constexpr uint64_t kMaxCredentialsBytes = 1 << 20;

// The profile's credentials in an INI text; what names the file in errors (what:line).
StatusOr<AwsCredentials> ParseSharedCredentials(const std::string& text, const std::string& what,
                                                const std::string& profile);

// The chain: environment, then the shared file. NotFound (naming both sources) when neither
// has credentials; InvalidArgument when a source is half set (an access key without its
// secret), since falling through to the next source would sign with someone else's keys.
StatusOr<AwsCredentials> ResolveAwsCredentials();

}  // namespace dv::store
