// A read-only mapping of a whole file, unmapped on destruction: the MCAP and ROS 1 bag readers
// walk files larger than memory without reading them in.
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "dejaview/base/status.h"

namespace dv::recorded {

class MappedFile {
 public:
  MappedFile() = default;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile() {
    if (data_ != nullptr) munmap(data_, size_);
  }
  Status Open(const std::string& path) {
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Status::IoError(path + ": " + std::strerror(errno));
    struct stat st {};
    Status s;
    if (fstat(fd, &st) != 0) {
      s = Status::IoError(path + ": " + std::strerror(errno));
    } else if (!S_ISREG(st.st_mode)) {
      s = Status::InvalidArgument(path + ": not a regular file");
    } else if (st.st_size > 0) {
      void* p = mmap(nullptr, size_t(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) {
        s = Status::IoError(path + ": mmap: " + std::strerror(errno));
      } else {
        data_ = p;
        size_ = size_t(st.st_size);
      }
    }
    close(fd);
    return s;
  }
  const uint8_t* data() const { return static_cast<const uint8_t*>(data_); }
  size_t size() const { return size_; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace dv::recorded
