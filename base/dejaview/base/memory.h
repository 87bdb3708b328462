// Process-wide allocator setting for the programs that code frames in a loop.
#pragma once

namespace dv {

// Keeps freed memory in the process for reuse instead of handing it back to the kernel (glibc:
// no mmap'd chunks, no heap trimming). Each frame's codec allocates and frees several megabytes of
// candidate arrays and hash tables; returned to the kernel, they come back as fresh zeroed pages,
// and their page faults would be a large share of the encode and decode time.
// The price is that the process keeps its high-water mark of heap. Call once, first thing in main.
void RetainFreedMemory();

}  // namespace dv
