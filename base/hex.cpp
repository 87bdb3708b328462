#include "dejaview/base/hex.h"

namespace dv {
namespace {

int Digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

std::string HexEncode(const void* data, size_t size) {
  static const char kDigits[] = "0123456789abcdef";
  const auto* p = static_cast<const uint8_t*>(data);
  std::string s(2 * size, '0');
  for (size_t i = 0; i < size; ++i) {
    s[2 * i] = kDigits[p[i] >> 4];
    s[2 * i + 1] = kDigits[p[i] & 15];
  }
  return s;
}

bool HexDecode(std::string_view hex, uint8_t* out) {
  if (hex.size() % 2 != 0) return false;
  for (size_t i = 0; i < hex.size() / 2; ++i) {
    const int hi = Digit(hex[2 * i]), lo = Digit(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = uint8_t(hi << 4 | lo);
  }
  return true;
}

}  // namespace dv
