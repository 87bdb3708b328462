#include "dejaview/server/reconstruct.h"

#include "dejaview/transport/spool.h"

namespace dv::server {

StatusOr<codec::Decoder*> MapVersions::DecoderFor(const std::string& version) {
  if (version.empty()) return &intra_;
  auto it = open_.find(version);
  if (it == open_.end()) {
    auto map = maps::OpenMap(root_ + "/" + version, budget_);
    if (!map.ok()) {
      return map.status().WithContext("map version " + version + " (needed to decode)");
    }
    if ((*map)->version() != version) {
      return Status::Corruption(root_ + "/" + version + ": holds map version " + (*map)->version());
    }
    it = open_.emplace(version, std::make_unique<Open>(std::move(map).value())).first;
  }
  return &it->second->decoder;
}

StatusOr<codec::DecodedFrame> DecodeStoredFrame(const store::FrameRecord& row,
                                                const std::vector<uint8_t>& object,
                                                MapVersions* maps) {
  const std::string name = row.vehicle + "/" + std::to_string(row.sensor_id) + "/" +
                           std::to_string(row.sequence) + " (epoch " +
                           std::to_string(row.source_epoch) + ")";
  auto rec = transport::DecodeRecord(object.data(), object.size());
  if (!rec.ok()) return rec.status().WithContext(name + ": object " + row.object.Hex());
  if (rec->meta.vehicle != row.vehicle || rec->meta.sensor_id != row.sensor_id ||
      rec->meta.source_epoch != row.source_epoch || rec->meta.sequence != row.sequence) {
    return Status::Corruption(name + ": object " + row.object.Hex() + " holds another frame");
  }
  DV_ASSIGN_OR_RETURN(codec::Decoder * decoder, maps->DecoderFor(rec->meta.map_version));
  auto frame = decoder->Decode(rec->payload.data(), rec->payload.size());
  if (!frame.ok()) return frame.status().WithContext(name);
  return std::move(frame).value();
}

}  // namespace dv::server
