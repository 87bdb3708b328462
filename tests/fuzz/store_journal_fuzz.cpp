// The copy journal is replayed after crashes, torn tails included.
#include <cstddef>
#include <cstdint>

#include "dejaview/store/copy_journal.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const dv::store::JournalState state = dv::store::ReplayJournal(data, size);
  if (state.dropped_tail_bytes > size) __builtin_trap();
  return 0;
}
