// Enrolled vehicles: the server's keys directory holds one file VEHICLE.public per vehicle, the
// Z85 CURVE public key `dejaview keygen` wrote for it (docs/security.md). The file name is the
// identity the server binds every message of that key's connection to; a message never chooses
// its own vehicle id. Loading is all or nothing per file: a file that is not a valid key under a
// valid name is skipped and reported, and never takes the other vehicles down with it.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "dejaview/base/status.h"

namespace dv::server {

class KeyRing {
 public:
  // problems: one line per skipped file (name and reason), for the log and the reload counter.
  // One key identifies one vehicle. When several files hold the same key, the vehicle it was
  // enrolled as in previous (the ring in force, on a reload) keeps it; failing that, the file
  // modified first, then the smaller vehicle name: a copy of a key made later never takes the
  // vehicle's identity, whatever its name sorts as. The others are refused, each a problem.
  static StatusOr<KeyRing> Load(const std::string& dir, std::vector<std::string>* problems,
                                const KeyRing* previous = nullptr);

  // The vehicle enrolled with this Z85 public key, or null.
  const std::string* VehicleOf(const std::string& public_z85) const;
  // True while public_z85 is this vehicle's enrolled key (false once revoked or rotated).
  bool Enrolled(const std::string& vehicle, const std::string& public_z85) const;
  size_t size() const { return by_key_.size(); }

 private:
  std::map<std::string, std::string> by_key_;  // Z85 public key -> vehicle
};

}  // namespace dv::server
