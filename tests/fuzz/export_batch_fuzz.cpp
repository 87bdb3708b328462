// Training jobs read packed export batches (docs/export-format.md) from shared storage.
#include <cstddef>
#include <cstdint>

#include "dejaview/server/batch_format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto frames = dv::server::DecodeBatch(data, size);
  if (!frames.ok()) return 0;
  // Whatever decodes must survive its own re-encoding (varints may be overlong in the input,
  // so the bytes need not match; the frames must).
  const std::vector<uint8_t> again = dv::server::EncodeBatch(*frames);
  auto back = dv::server::DecodeBatch(again.data(), again.size());
  if (!back.ok() || back->size() != frames->size()) __builtin_trap();
  for (size_t i = 0; i < frames->size(); ++i) {
    if ((*back)[i].cloud.size() != (*frames)[i].cloud.size() ||
        (*back)[i].sequence != (*frames)[i].sequence || (*back)[i].drive != (*frames)[i].drive) {
      __builtin_trap();
    }
  }
  return 0;
}
