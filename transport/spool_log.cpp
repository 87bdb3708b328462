#include "dejaview/transport/spool_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "dejaview/base/crc32c.h"

namespace dv::transport {
namespace {

Status Errno(const std::string& path, const char* what) {
  return Status::IoError(path + ": " + what + ": " + std::strerror(errno));
}

uint32_t FragmentCrc(uint8_t type, const uint8_t* data, size_t n) {
  return crc32c::Mask(crc32c::Extend(crc32c::Value(&type, 1), data, n));
}

}  // namespace

StatusOr<LogWriter> LogWriter::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return Errno(path, "open for append");
  const off_t end = ::lseek(fd, 0, SEEK_END);
  if (end < 0) {
    ::close(fd);
    return Errno(path, "seek");
  }
  return LogWriter(path, fd, uint64_t(end));
}

LogWriter::LogWriter(LogWriter&& other) noexcept
    : path_(std::move(other.path_)), fd_(other.fd_), offset_(other.offset_) {
  other.fd_ = -1;
}

LogWriter& LogWriter::operator=(LogWriter&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = other.fd_;
    offset_ = other.offset_;
    other.fd_ = -1;
  }
  return *this;
}

LogWriter::~LogWriter() {
  if (fd_ >= 0) ::close(fd_);
}

Status LogWriter::WriteAll(const uint8_t* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd_, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return Errno(path_, "write");
    p += w;
    n -= size_t(w);
  }
  return Status::Ok();
}

StatusOr<uint64_t> LogWriter::Append(const uint8_t* data, size_t size) {
  // The whole record, padding and all fragments, goes out in one write(): a crash tears at
  // most this record, which the reader then treats as the end of the file.
  std::vector<uint8_t> out;
  out.reserve(size + kLogHeaderSize * (size / kLogBlockSize + 2));
  uint64_t pos = offset_;
  uint64_t record_offset = 0;
  size_t left = size;
  bool first = true;
  do {
    const size_t leftover = kLogBlockSize - size_t(pos % kLogBlockSize);
    if (leftover < kLogHeaderSize) {
      out.insert(out.end(), leftover, 0);
      pos += leftover;
    }
    if (first) record_offset = pos;
    const size_t avail = kLogBlockSize - size_t(pos % kLogBlockSize) - kLogHeaderSize;
    const size_t frag = left < avail ? left : avail;
    const bool last = frag == left;
    const uint8_t type = first && last ? kLogFull
                         : first       ? kLogFirst
                         : last        ? kLogLast
                                       : kLogMiddle;
    const uint8_t* p = data + (size - left);
    const uint32_t crc = FragmentCrc(type, p, frag);
    uint8_t header[kLogHeaderSize];
    std::memcpy(header, &crc, 4);
    header[4] = uint8_t(frag & 0xff);
    header[5] = uint8_t(frag >> 8);
    header[6] = type;
    out.insert(out.end(), header, header + kLogHeaderSize);
    out.insert(out.end(), p, p + frag);
    pos += kLogHeaderSize + frag;
    left -= frag;
    first = false;
  } while (left > 0);
  DV_RETURN_IF_ERROR(WriteAll(out.data(), out.size()));
  offset_ = pos;
  return record_offset;
}

Status LogWriter::Sync() {
  if (::fdatasync(fd_) != 0) return Errno(path_, "fdatasync");
  return Status::Ok();
}

LogReader LogReader::FromBytes(std::vector<uint8_t> bytes) {
  LogReader r;
  r.image_ = std::move(bytes);
  r.from_image_ = true;
  return r;
}

StatusOr<LogReader> LogReader::Open(const std::string& path, uint64_t start_offset) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return Status::NotFound(path + ": no such file");
    return Errno(path, "open");
  }
  LogReader r;
  r.path_ = path;
  r.fd_ = fd;
  r.offset_ = start_offset;
  r.end_of_last_record_ = start_offset;
  return r;
}

LogReader::LogReader(LogReader&& other) noexcept { *this = std::move(other); }

LogReader& LogReader::operator=(LogReader&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = other.fd_;
    other.fd_ = -1;
    image_ = std::move(other.image_);
    from_image_ = other.from_image_;
    offset_ = other.offset_;
    block_start_ = other.block_start_;
    block_ = std::move(other.block_);
    block_loaded_ = other.block_loaded_;
    corrupt_blocks_ = other.corrupt_blocks_;
    damaged_blocks_ = std::move(other.damaged_blocks_);
    dropped_bytes_ = other.dropped_bytes_;
    end_of_last_record_ = other.end_of_last_record_;
  }
  return *this;
}

LogReader::~LogReader() {
  if (fd_ >= 0) ::close(fd_);
}

StatusOr<bool> LogReader::LoadBlock() {
  const uint64_t start = offset_ - offset_ % kLogBlockSize;
  if (block_loaded_ && block_start_ == start) return offset_ - start < block_.size();
  block_start_ = start;
  block_loaded_ = true;
  if (from_image_) {
    const size_t begin = start < image_.size() ? size_t(start) : image_.size();
    const size_t end =
        begin + kLogBlockSize < image_.size() ? begin + kLogBlockSize : image_.size();
    block_.assign(image_.begin() + long(begin), image_.begin() + long(end));
  } else {
    block_.resize(kLogBlockSize);
    size_t got = 0;
    while (got < kLogBlockSize) {
      const ssize_t r = ::pread(fd_, block_.data() + got, kLogBlockSize - got, off_t(start + got));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return Errno(path_, "read");
      if (r == 0) break;
      got += size_t(r);
    }
    block_.resize(got);
  }
  return offset_ - start < block_.size();
}

void LogReader::NoteDamagedBlock(uint64_t block_start) {
  if (damaged_blocks_.empty() || damaged_blocks_.back() != block_start)
    damaged_blocks_.push_back(block_start);
}

StatusOr<bool> LogReader::Next(std::vector<uint8_t>* record, uint64_t* offset) {
  record->clear();
  bool in_record = false;
  uint64_t record_offset = 0;
  auto drop_record = [&]() {
    if (in_record) dropped_bytes_ += record->size();
    record->clear();
    in_record = false;
  };
  // Damage drops the record being assembled and the rest of its block; it joins corrupt_blocks_
  // only once a later record shows that it was not simply the torn end of the file.
  auto skip_block = [&]() {
    NoteDamagedBlock(block_start_);
    drop_record();
    offset_ = block_start_ + kLogBlockSize;
  };
  // The input ends inside a fragment or a record: damage in the block where it ends. offset_
  // moves to the end so that a further Next notes nothing twice.
  auto end_inside = [&](uint64_t at) {
    NoteDamagedBlock(at - at % kLogBlockSize);
    drop_record();
    offset_ = block_start_ + block_.size();
    return false;
  };
  for (;;) {
    DV_ASSIGN_OR_RETURN(const bool have, LoadBlock());
    if (!have) return in_record ? end_inside(offset_ - 1) : false;
    const bool last_block = block_.size() < kLogBlockSize;
    const size_t pos = size_t(offset_ - block_start_);
    const size_t avail = block_.size() - pos;
    if (avail < kLogHeaderSize) {
      // The writer pads a block trailer only together with the record after it.
      if (last_block) return end_inside(offset_);
      offset_ = block_start_ + kLogBlockSize;  // zero-filled block trailer
      continue;
    }
    const uint8_t* h = block_.data() + pos;
    uint32_t crc;
    std::memcpy(&crc, h, 4);
    const size_t len = size_t(h[4]) | size_t(h[5]) << 8;
    const uint8_t type = h[6];
    if (kLogHeaderSize + len > avail) {
      if (last_block) return end_inside(offset_);
      skip_block();
      continue;
    }
    const uint8_t* data = h + kLogHeaderSize;
    if (type < kLogFull || type > kLogLast || FragmentCrc(type, data, len) != crc) {
      skip_block();
      continue;
    }
    const uint64_t fragment_offset = offset_;
    offset_ += kLogHeaderSize + len;
    const bool starts = type == kLogFull || type == kLogFirst;
    if (starts) drop_record();
    if (!starts && !in_record) {
      dropped_bytes_ += len;  // a continuation whose beginning was lost
      continue;
    }
    if (starts) record_offset = fragment_offset;
    if (record->size() + len > kLogMaxRecordBytes) {
      skip_block();
      continue;
    }
    record->insert(record->end(), data, data + len);
    in_record = true;
    if (type == kLogFull || type == kLogLast) {
      corrupt_blocks_ = damaged_blocks_.size();
      *offset = record_offset;
      end_of_last_record_ = offset_;
      return true;
    }
  }
}

}  // namespace dv::transport
