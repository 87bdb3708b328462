// Lower-case hexadecimal: the text form of object ids, request signatures and the map manifest's
// codec priors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace dv {

std::string HexEncode(const void* data, size_t size);

// hex.size() / 2 bytes into out; false when hex has odd length or a character other than 0-9,
// a-f (out is then unspecified).
bool HexDecode(std::string_view hex, uint8_t* out);

}  // namespace dv
