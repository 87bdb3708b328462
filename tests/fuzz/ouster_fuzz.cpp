#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "dejaview/recorded/ouster.h"
#include "dejaview/recorded/pcap.h"

namespace {

namespace rec = dv::recorded;

// Sensors of the three profiles with the layouts of the shared captures (OS-1-32 LEGACY,
// OS-2-128 RNG19_RFL8_SIG16_NIR16, OS-1-128 RNG15_RFL8_NIR8), so that their packets seed.
rec::OusterSensorInfo Sensor(rec::OusterProfile profile, int rows) {
  rec::OusterSensorInfo info;
  info.profile = profile;
  info.pixels_per_column = rows;
  info.columns_per_packet = 16;
  info.columns_per_frame = 1024;
  for (int r = 0; r < rows; ++r) {
    info.beam_altitude_deg.push_back(22.5 - 45.0 * r / rows);
    info.beam_azimuth_deg.push_back(r % 4 * 1.4 - 2.1);
  }
  info.lidar_origin_to_beam_origin_mm = 15.8;
  info.lidar_to_sensor_mm(2, 3) = 36.18;
  return info;
}

struct Decoder {
  explicit Decoder(rec::OusterSensorInfo i) : info(std::move(i)), xyz(info) {}
  rec::OusterSensorInfo info;
  rec::OusterXyz xyz;
};

void CheckScan(const Decoder& d, const rec::OusterScan& scan) {
  int64_t stamp_ns = 0;
  const dv::PointCloud cloud = d.xyz.Points(scan, &stamp_ns);
  if (!cloud.consistent() || cloud.size() > size_t(scan.width) * size_t(scan.height))
    __builtin_trap();
}

}  // namespace

// Any bytes, after a first byte that picks the sensor and the mode: a lidar packet, a capture
// whose datagrams on port 7502 are packets, or a metadata JSON. Each parses or fails with a
// Status; never a crash, a leak or an allocation the input or the metadata's bounds do not
// justify.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::array<Decoder, 3> decoders = {
      Decoder(Sensor(rec::OusterProfile::kLegacy, 32)),
      Decoder(Sensor(rec::OusterProfile::kRng19Rfl8Sig16Nir16, 128)),
      Decoder(Sensor(rec::OusterProfile::kRng15Rfl8Nir8, 128))};
  if (size < 1) return 0;
  const Decoder& d = decoders[data[0] % 3];
  const int mode = (data[0] >> 2) % 3;
  ++data;
  --size;
  if (mode == 2) {
    auto info =
        rec::ParseOusterMetadata(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
    if (info.ok() && info->packet_size() > 65507) __builtin_trap();
    return 0;
  }
  rec::OusterScanBatcher batcher(d.info);
  rec::OusterPacket packet;
  rec::OusterScan scan;
  const auto add = [&](const uint8_t* p, size_t n) {
    if (!rec::ParseOusterPacket(d.info, p, n, "fuzz", &packet).ok()) return;
    if (batcher.Add(packet, &scan)) CheckScan(d, scan);
  };
  if (mode == 0) {
    add(data, size);
  } else {
    (void)rec::ReadPcapUdp(data, size, "fuzz", [&](const rec::UdpDatagram& u) {
      if (u.dst_port == 7502) add(u.payload.data, u.payload.size);
      return dv::Status::Ok();
    });
  }
  if (batcher.Flush(&scan)) CheckScan(d, scan);
  return 0;
}
