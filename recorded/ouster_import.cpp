// dejaview import of an Ouster capture: pcap.h's datagrams, ouster.h's packets and scans.
#include <cstdio>

#include "dejaview/base/file_util.h"
#include "dejaview/base/kitti.h"
#include "dejaview/recorded/drive_mcap.h"
#include "dejaview/recorded/ouster.h"
#include "dejaview/recorded/pcap.h"

namespace dv::recorded {

StatusOr<ImportStats> ImportOusterCapture(const std::string& pcap_path,
                                          const std::string& metadata_path,
                                          const std::string& out_dir) {
  DV_ASSIGN_OR_RETURN(const OusterSensorInfo info, ReadOusterMetadata(metadata_path));
  DV_RETURN_IF_ERROR(MakeDirs(out_dir + "/velodyne"));
  const OusterXyz xyz(info);
  OusterScanBatcher batcher(info);
  OusterPacket packet;
  OusterScan scan;
  ImportStats stats;
  stats.cloud_topic = info.product_line + " " + OusterProfileName(info.profile) +
                      " lidar packets on UDP port " + std::to_string(info.udp_port_lidar);
  std::vector<int64_t> stamps_ns;
  const auto write_scan = [&]() -> Status {
    int64_t stamp_ns = 0;
    const PointCloud cloud = xyz.Points(scan, &stamp_ns);
    char name[32];
    std::snprintf(name, sizeof(name), "/velodyne/%06zu.bin", stats.frames);
    DV_RETURN_IF_ERROR(WriteKittiBin(out_dir + name, cloud));
    stamps_ns.push_back(stamp_ns);
    ++stats.frames;
    return Status::Ok();
  };
  const Status read = ReadPcapUdp(pcap_path, [&](const UdpDatagram& d) -> Status {
    if (d.dst_port != info.udp_port_lidar) return Status::Ok();
    const std::string what =
        pcap_path + ": record at byte offset " + std::to_string(d.record_offset) + ": lidar packet";
    DV_RETURN_IF_ERROR(ParseOusterPacket(info, d.payload.data, d.payload.size, what, &packet));
    if (batcher.Add(packet, &scan)) return write_scan();
    return Status::Ok();
  });
  if (!read.ok()) return read;
  if (batcher.Flush(&scan)) DV_RETURN_IF_ERROR(write_scan());
  if (stats.frames == 0)
    return Status::NotFound(pcap_path + ": no lidar packets on UDP port " +
                            std::to_string(info.udp_port_lidar));
  DV_RETURN_IF_ERROR(WriteTimestampsNs(out_dir + "/timestamps.txt", stamps_ns));
  return stats;
}

}  // namespace dv::recorded
