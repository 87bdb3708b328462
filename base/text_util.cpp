#include "text_util.h"

namespace dv::internal {

std::string Printable(std::string_view token) {
  std::string out(token.substr(0, 32));
  for (char& c : out) {
    if (c < 0x20 || c > 0x7e) c = '?';
  }
  return token.size() > 32 ? out + "..." : out;
}

}  // namespace dv::internal
