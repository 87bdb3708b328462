// Store configuration files are written by operators: any text must give a value or an error.
#include <cstddef>
#include <cstdint>
#include <string>

#include "dejaview/store/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto config = dv::store::ParseStoreConfig(std::string(reinterpret_cast<const char*>(data), size),
                                            "fuzz.yaml");
  if (config.ok() && config->disk.dir.empty()) __builtin_trap();
  return 0;
}
