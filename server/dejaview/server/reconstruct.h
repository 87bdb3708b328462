// Reconstruction: a stored frame's object (one upload record, docs/spool-format.md) decoded with
// the exact map version it was encoded against (MAPS/<version>/; every version still referenced
// is kept).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dejaview/codec/codec.h"
#include "dejaview/maps/route_map.h"
#include "dejaview/store/frame_index.h"

namespace dv::server {

// Opens each map version once, on first use, with a decoder for it; a missing version is an
// error naming it. The empty version is intra frames'.
class MapVersions {
 public:
  explicit MapVersions(std::string root, size_t memory_budget_bytes = 0)
      : root_(std::move(root)), budget_(memory_budget_bytes) {}
  StatusOr<codec::Decoder*> DecoderFor(const std::string& version);
  // A set of its own on the same root, for another thread: a MapVersions and its decoders serve
  // one thread at a time.
  std::unique_ptr<MapVersions> Another() const {
    return std::make_unique<MapVersions>(root_, budget_);
  }

 private:
  struct Open {
    explicit Open(std::unique_ptr<maps::RouteMap> m) : map(std::move(m)), decoder(map.get()) {}
    std::unique_ptr<maps::RouteMap> map;
    codec::Decoder decoder;
  };
  std::string root_;
  size_t budget_;
  std::map<std::string, std::unique_ptr<Open>> open_;
  codec::Decoder intra_{nullptr};
};

// Decodes the object the index row points at; the record inside must be the row's frame.
StatusOr<codec::DecodedFrame> DecodeStoredFrame(const store::FrameRecord& row,
                                                const std::vector<uint8_t>& object,
                                                MapVersions* maps);

}  // namespace dv::server
