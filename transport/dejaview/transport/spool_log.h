// Record framing for append-only files (the agent's spool segments and the server's delta
// store), the format of LevelDB's db/log_format.h, written here because Debian's libleveldb-dev
// does not install the log writer/reader headers. Spec: docs/spool-format.md.
//
// A file is a sequence of 32 KiB blocks. A logical record is split into fragments so that no
// fragment crosses a block boundary; each fragment is
//   masked CRC32C (4, of type byte + data) | length (2, little-endian) | type (1) | data
// with type FULL (whole record), or FIRST, MIDDLE..., LAST. A block tail shorter than a
// header (< 7 bytes) is zero-filled. A reader therefore resynchronises at the next block
// after any damage, and a torn write at the end of the file loses only the record being written.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dejaview/base/status.h"

namespace dv::transport {

constexpr size_t kLogBlockSize = 32768;
constexpr size_t kLogHeaderSize = 4 + 2 + 1;
// A logical record larger than this is treated as corruption by the reader: a bound on what
// damaged lengths can make it allocate.
constexpr size_t kLogMaxRecordBytes = size_t(64) << 20;

enum LogRecordType : uint8_t {
  kLogZero = 0,
  kLogFull = 1,
  kLogFirst = 2,
  kLogMiddle = 3,
  kLogLast = 4
};

// Appends records to a file opened at its end. Not thread-safe; the owner serialises.
class LogWriter {
 public:
  // Opens (creating if needed) path for appending; continues the block layout from the file's
  // current length, which must end on a record boundary (recovery guarantees it).
  static StatusOr<LogWriter> Open(const std::string& path);
  LogWriter(LogWriter&& other) noexcept;
  LogWriter& operator=(LogWriter&& other) noexcept;
  LogWriter(const LogWriter&) = delete;
  LogWriter& operator=(const LogWriter&) = delete;
  ~LogWriter();

  // Writes one logical record (to the page cache; Sync makes it durable). Returns the file
  // offset of the record's first fragment.
  StatusOr<uint64_t> Append(const uint8_t* data, size_t size);
  Status Sync();
  uint64_t file_size() const { return offset_; }
  const std::string& path() const { return path_; }

 private:
  LogWriter(std::string path, int fd, uint64_t offset)
      : path_(std::move(path)), fd_(fd), offset_(offset) {}
  Status WriteAll(const uint8_t* p, size_t n);
  std::string path_;
  int fd_ = -1;
  uint64_t offset_ = 0;
};

// Reads the logical records of a file in order, block by block (bounded memory: one block plus
// the record being assembled, and the offsets of damaged blocks). Damage is skipped and noted,
// never fatal: a fragment with a bad CRC or an impossible length drops the rest of its block; a
// record whose fragments do not chain (FIRST without LAST) is dropped. The reader cannot tell a
// torn write from damage at the end of the input; the caller knows whether the file was still
// being appended to.
class LogReader {
 public:
  // Reads an in-memory image (used by the fuzz target and tests) or a file from start_offset.
  static LogReader FromBytes(std::vector<uint8_t> bytes);
  static StatusOr<LogReader> Open(const std::string& path, uint64_t start_offset = 0);
  LogReader(LogReader&& other) noexcept;
  LogReader& operator=(LogReader&& other) noexcept;
  LogReader(const LogReader&) = delete;
  LogReader& operator=(const LogReader&) = delete;
  ~LogReader();

  // Sets *record to the next complete record and *offset to its first fragment's offset.
  // Returns false at the end of the input (a truncated last record is the end, not an error);
  // an I/O error is a Status.
  StatusOr<bool> Next(std::vector<uint8_t>* record, uint64_t* offset);

  // Blocks in which a fragment failed its CRC or length check, followed by a good record
  // (damage after the last good record may be a torn tail, not counted here).
  uint64_t corrupt_blocks() const { return corrupt_blocks_; }
  // File offsets of every block found damaged so far, in file order, each once: the first
  // corrupt_blocks() are followed by a good record. Once Next has returned false the rest are
  // the damage after the last good record, the end of the input inside a fragment or a record
  // included.
  const std::vector<uint64_t>& damaged_blocks() const { return damaged_blocks_; }
  // Bytes of fragments dropped because their record was incomplete or damaged.
  uint64_t dropped_bytes() const { return dropped_bytes_; }
  // The offset just past the last complete record returned: everything after it is a torn
  // tail when this is the file being appended to.
  uint64_t end_of_last_record() const { return end_of_last_record_; }

 private:
  LogReader() = default;
  // Loads the block containing offset_ into block_; false at end of input.
  StatusOr<bool> LoadBlock();
  void NoteDamagedBlock(uint64_t block_start);
  std::string path_;
  int fd_ = -1;
  std::vector<uint8_t> image_;  // FromBytes input
  bool from_image_ = false;
  uint64_t offset_ = 0;       // next byte to parse
  uint64_t block_start_ = 0;  // file offset of block_[0]
  std::vector<uint8_t> block_;
  bool block_loaded_ = false;
  uint64_t corrupt_blocks_ = 0;
  std::vector<uint64_t> damaged_blocks_;
  uint64_t dropped_bytes_ = 0;
  uint64_t end_of_last_record_ = 0;
};

}  // namespace dv::transport
