// Internal to base: small text helpers shared by the parsers of untrusted input.
#pragma once

#include <string>
#include <string_view>

namespace dv::internal {

// A token from untrusted input made safe to echo in a message: at most 32 characters, bytes
// outside printable ASCII shown as '?'.
std::string Printable(std::string_view token);

}  // namespace dv::internal
