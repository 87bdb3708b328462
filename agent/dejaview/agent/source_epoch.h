// Source epochs (docs/spool-format.md): with the sequence number, the epoch names a frame for the
// server's deduplication. A live source's epoch is new at each subscription and whenever a
// driver's sequence numbers start again, so that a restarted driver's frame 0 is never taken for
// a resend of the previous one. Epochs only grow, also across agent restarts and a wall clock
// set back: the last one is kept, fsync'd, in the spool directory.
#pragma once

#include <cstdint>
#include <string>

#include "dejaview/base/status.h"

namespace dv::agent {

class EpochSource {
 public:
  // Reads DIR/EPOCH. A missing file starts from the wall clock; a damaged one too, counted in
  // damaged() (the clock and the next epoch's own file then take over), never an error.
  static EpochSource Open(const std::string& dir);
  // A new epoch, max(wall clock in ns, last + 1). It is persisted before it is returned; when
  // that fails (*persisted says why) it is still new to this process and is used.
  uint64_t Next(Status* persisted);
  bool damaged() const { return damaged_; }

 private:
  std::string path_;
  uint64_t last_ = 0;
  bool damaged_ = false;
};

// The epoch of a recorded drive read offline: a function of the folder's absolute path alone
// (FNV-1a 64, top bit set so that no live epoch has it), so that a drive read twice is stored
// once and two drives never share an epoch.
uint64_t DriveEpoch(const std::string& drive_dir);

}  // namespace dv::agent
