// Ouster captures (pcap + metadata JSON) against the oracles shipped with them: the OS-1-128
// capture imports as the frames the SDK decoded into ../shared/data/ouster/os1-128-3frames, and
// the packets and scans of the OS-2-128 (RNG19_RFL8_SIG16_NIR16) and OS-1-32 (LEGACY) captures
// hash as the SDK's field digests say. Corrupt and truncated captures are clear errors.
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "dejaview/base/drive.h"
#include "dejaview/base/file_util.h"
#include "dejaview/recorded/ouster.h"
#include "dejaview/recorded/pcap.h"
#include "testutil.h"

namespace dv::recorded {
namespace {

using nlohmann::json;

const std::string kOuster = std::string(DEJAVIEW_DATA_DIR) + "/ouster";
const std::string kPcapDir = kOuster + "/pcap";
const std::string kOs1Pcap = kPcapDir + "/OS-1-128_v2.3.0_1024x10_lb_n3.pcap";
const std::string kOs1Json = kPcapDir + "/OS-1-128_v2.3.0_1024x10.json";

template <typename T>
std::string Md5(const std::vector<T>& values) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned size = 0;
  EVP_Digest(values.data(), values.size() * sizeof(T), digest, &size, EVP_md5(), nullptr);
  std::string hex;
  char byte[3];
  for (unsigned i = 0; i < size; ++i) {
    std::snprintf(byte, sizeof(byte), "%02x", digest[i]);
    hex += byte;
  }
  return hex;
}

template <typename To, typename From>
std::vector<To> As(const std::vector<From>& v) {
  return std::vector<To>(v.begin(), v.end());
}

// The SDK's digest (its client/_digest.py): packet_hash is one md5 per column-header field and
// per channel, updated packet by packet with the packet's array (channels rows x columns, row
// major); scans holds, per LidarScan, the md5 of each per-column array and of each staggered
// channel image. The element types are the SDK's: packet headers TIMESTAMP u64, MEASUREMENT_ID
// u16, STATUS u32, ENCODER_COUNT u32, FRAME_ID u16 (a per-column field: 0 in the eUDP profiles,
// whose frame id is in the packet header); scan headers u64 but MEASUREMENT_ID u16; channels
// RANGE u32, SIGNAL u16, NEAR_IR u16, REFLECTIVITY and FLAGS u8. The RAW32_WORD* hashes of raw
// pixel words are not checked: they describe bytes, not the decoded fields.
struct Digests {
  std::map<std::string, std::string> packet;
  std::vector<std::map<std::string, std::string>> scans;
};

class PacketHashes {
 public:
  void Add(const OusterPacket& p) {
    for (const OusterColumnHeader& c : p.columns) {
      timestamp_.push_back(c.timestamp_ns);
      measurement_id_.push_back(c.measurement_id);
      status_.push_back(c.status);
      encoder_.push_back(c.encoder_count);
      frame_id_.push_back(c.frame_id);
    }
    range_.insert(range_.end(), p.range_mm.begin(), p.range_mm.end());
    signal_.insert(signal_.end(), p.signal.begin(), p.signal.end());
    reflectivity_.insert(reflectivity_.end(), p.reflectivity.begin(), p.reflectivity.end());
    near_ir_.insert(near_ir_.end(), p.near_ir.begin(), p.near_ir.end());
    flags_.insert(flags_.end(), p.flags.begin(), p.flags.end());
  }
  std::map<std::string, std::string> Hashes() const {
    return {{"TIMESTAMP", Md5(timestamp_)},
            {"MEASUREMENT_ID", Md5(measurement_id_)},
            {"STATUS", Md5(status_)},
            {"ENCODER_COUNT", Md5(encoder_)},
            {"FRAME_ID", Md5(frame_id_)},
            {"RANGE", Md5(range_)},
            {"SIGNAL", Md5(As<uint16_t>(signal_))},
            {"REFLECTIVITY", Md5(As<uint8_t>(reflectivity_))},
            {"NEAR_IR", Md5(As<uint16_t>(near_ir_))},
            {"FLAGS", Md5(As<uint8_t>(flags_))}};
  }

 private:
  std::vector<uint64_t> timestamp_;
  std::vector<uint16_t> measurement_id_, frame_id_;
  std::vector<uint32_t> status_, encoder_, range_, signal_, reflectivity_, near_ir_, flags_;
};

std::map<std::string, std::string> ScanHashes(const OusterScan& s) {
  return {{"FRAME_ID", std::to_string(s.frame_id)},
          {"TIMESTAMP", Md5(s.timestamp_ns)},
          {"STATUS", Md5(As<uint64_t>(s.status))},
          {"MEASUREMENT_ID", Md5(s.measurement_id)},
          {"ENCODER_COUNT", Md5(As<uint64_t>(s.encoder_count))},
          {"RANGE", Md5(s.range_mm)},
          {"SIGNAL", Md5(As<uint16_t>(s.signal))},
          {"REFLECTIVITY", Md5(As<uint8_t>(s.reflectivity))},
          {"NEAR_IR", Md5(As<uint16_t>(s.near_ir))}};
}

Digests Decode(const std::string& pcap, const OusterSensorInfo& info) {
  Digests d;
  PacketHashes packets;
  OusterScanBatcher batcher(info);
  OusterPacket packet;
  OusterScan scan;
  const Status read = ReadPcapUdp(pcap, [&](const UdpDatagram& u) -> Status {
    if (u.dst_port != info.udp_port_lidar) return Status::Ok();
    DV_RETURN_IF_ERROR(ParseOusterPacket(info, u.payload.data, u.payload.size, pcap, &packet));
    packets.Add(packet);
    if (batcher.Add(packet, &scan)) d.scans.push_back(ScanHashes(scan));
    return Status::Ok();
  });
  EXPECT_TRUE(read.ok()) << read.ToString();
  if (batcher.Flush(&scan)) d.scans.push_back(ScanHashes(scan));
  d.packet = packets.Hashes();
  return d;
}

void ExpectDigestsMatch(const std::string& name) {
  auto info = ReadOusterMetadata(kPcapDir + "/" + name + ".json");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  std::ifstream in(kPcapDir + "/" + name + "_digest.json");
  const json expected = json::parse(in);
  const Digests got = Decode(kPcapDir + "/" + name + ".pcap", *info);
  size_t checked = 0;
  for (const auto& [key, hash] : expected["packet_hash"].items()) {
    if (key.rfind("RAW32_WORD", 0) == 0) continue;
    ASSERT_EQ(got.packet.count(key), 1u) << key;
    EXPECT_EQ(got.packet.at(key), hash.get<std::string>()) << "packet_hash " << key;
    ++checked;
  }
  EXPECT_EQ(checked, 10u);
  ASSERT_EQ(got.scans.size(), expected["scans"].size());
  for (size_t i = 0; i < got.scans.size(); ++i) {
    for (const auto& [key, hash] : expected["scans"][i].items()) {
      ASSERT_EQ(got.scans[i].count(key), 1u) << key;
      EXPECT_EQ(got.scans[i].at(key), hash.get<std::string>()) << "scan " << i << " " << key;
    }
  }
}

TEST(Ouster, Os2With19BitRangeProfileMatchesTheSdkDigest) {
  ExpectDigestsMatch("OS-2-128-U1_v2.3.0_1024x10");
}

TEST(Ouster, Os1_32LegacyProfileMatchesTheSdkDigest) {
  ExpectDigestsMatch("OS-1-32-G_v2.1.1_1024x10");
}

// The reference frames hold the SDK's XYZ (computed in double) as float32; each of ours is the
// same double rounded once, so every coordinate is within one float32 step of it (on x86-64 with
// glibc they are bit-identical).
// exact_stamps: the stamps as import writes them (nine decimals); dejaview record writes ten
// significant digits (docs/formats.md), a tenth of a microsecond at these sensor-clock stamps.
void ExpectReferenceFrames(const std::string& drive_dir, bool exact_stamps) {
  auto drive = OpenDrive(drive_dir);
  ASSERT_TRUE(drive.ok()) << drive.status().ToString();
  auto reference = OpenDrive(kOuster + "/os1-128-3frames");
  ASSERT_TRUE(reference.ok()) << reference.status().ToString();
  ASSERT_EQ(drive->size(), 3u);
  ASSERT_EQ(drive->timestamps_s.size(), 3u);
  for (size_t f = 0; f < drive->size(); ++f) {
    if (exact_stamps) {
      EXPECT_EQ(drive->timestamps_s[f], reference->timestamps_s[f]);
    }
    EXPECT_NEAR(drive->timestamps_s[f], reference->timestamps_s[f], 1e-7) << "frame " << f;
  }
  for (size_t f = 0; f < drive->size(); ++f) {
    auto got = ReadPointCloudFile(drive->frame_paths[f]);
    auto want = ReadPointCloudFile(reference->frame_paths[f]);
    ASSERT_TRUE(got.ok() && want.ok());
    ASSERT_EQ(got->size(), want->size()) << "frame " << f;
    size_t off = 0;
    for (size_t i = 0; i < got->size(); ++i) {
      for (int k = 0; k < 3; ++k) {
        const float a = got->xyz[i][k], b = want->xyz[i][k];
        off += std::fabs(a - b) > std::fabs(std::nextafter(b, 2 * b + 1) - b);
      }
      off += got->intensity[i] != want->intensity[i];
    }
    EXPECT_EQ(off, 0u) << "frame " << f;
  }
}

TEST(Ouster, Os1_128CaptureImportsAsTheSdksFrames) {
  const std::string dir = test::ScratchDir();
  std::string out;
  ASSERT_EQ(test::RunCli("import " + kOs1Pcap + " --metadata " + kOs1Json + " --out " + dir, &out),
            0)
      << out;
  EXPECT_NE(out.find("imported 3 frames"), std::string::npos) << out;
  ExpectReferenceFrames(dir, true);
}

// Rows, times and the column order the reference's per-point extras describe: one point per
// pixel with range > 0, column by column.
TEST(Ouster, PointsCarryRingAndColumnTime) {
  auto info = ReadOusterMetadata(kOs1Json);
  ASSERT_TRUE(info.ok());
  const OusterXyz xyz(*info);
  OusterScanBatcher batcher(*info);
  OusterPacket packet;
  OusterScan scan;
  bool first = false;
  ASSERT_TRUE(ReadPcapUdp(kOs1Pcap, [&](const UdpDatagram& u) -> Status {
                if (u.dst_port != info->udp_port_lidar || first) return Status::Ok();
                DV_RETURN_IF_ERROR(
                    ParseOusterPacket(*info, u.payload.data, u.payload.size, "t", &packet));
                first = batcher.Add(packet, &scan);
                return Status::Ok();
              }).ok());
  ASSERT_TRUE(first);
  int64_t stamp_ns = 0;
  const PointCloud cloud = xyz.Points(scan, &stamp_ns);
  EXPECT_EQ(stamp_ns, int64_t(scan.timestamp_ns[0]));
  ASSERT_TRUE(cloud.consistent());
  ASSERT_EQ(cloud.ring.size(), cloud.size());
  size_t k = 0;
  for (int col = 0; col < scan.width; ++col) {
    for (int row = 0; row < scan.height; ++row) {
      const size_t i = size_t(row) * size_t(scan.width) + size_t(col);
      if (scan.range_mm[i] == 0) continue;
      ASSERT_LT(k, cloud.size());
      EXPECT_EQ(cloud.ring[k], row);
      EXPECT_EQ(cloud.time_offset_s[k],
                float(double(scan.timestamp_ns[size_t(col)] - scan.timestamp_ns[0]) * 1e-9));
      EXPECT_EQ(cloud.intensity[k], float(scan.reflectivity[i]));
      ++k;
    }
  }
  EXPECT_EQ(k, cloud.size());
}

TEST(Ouster, CaptureReplaysIntoARecorder) {
  const std::string dir = test::ScratchDir();
  const std::string endpoint =
      "tcp://127.0.0.1:" + std::to_string(40000 + (::getpid() + 7) % 20000);
  std::string rec_out, rep_out;
  int rec_rc = -1;
  std::thread recorder([&] {
    rec_rc = test::RunCli("record --quiet --endpoint " + endpoint + " --out " + dir +
                              "/rec --frames 3 --timeout-ms 20000",
                          &rec_out);
  });
  const int rep_rc = test::RunCli("replay " + kOs1Pcap + " --metadata " + kOs1Json +
                                      " --quiet --fast --wait-ms 20000 --endpoint " + endpoint,
                                  &rep_out);
  recorder.join();
  ASSERT_EQ(rep_rc, 0) << rep_out;
  ASSERT_EQ(rec_rc, 0) << rec_out;
  EXPECT_NE(rep_out.find("published 3 frames"), std::string::npos) << rep_out;
  ExpectReferenceFrames(dir + "/rec", false);
}

std::string Copy(const std::string& from, const std::string& to, size_t keep_bytes) {
  auto bytes = ReadFileBytes(from);
  EXPECT_TRUE(bytes.ok());
  bytes->resize(std::min(keep_bytes, bytes->size()));
  EXPECT_TRUE(WriteFileAtomic(to, *bytes).ok());
  return to;
}

// The byte offsets of the records of a pcap (24-byte file header, then 16-byte record headers
// each followed by its captured bytes).
std::vector<size_t> RecordOffsets(const std::vector<uint8_t>& pcap) {
  std::vector<size_t> offsets;
  for (size_t at = 24; at + 16 <= pcap.size();) {
    offsets.push_back(at);
    uint32_t caplen;
    std::memcpy(&caplen, pcap.data() + at + 8, 4);
    at += 16 + caplen;
  }
  return offsets;
}

TEST(Ouster, TruncatedCaptureNamesFileAndRecordOffset) {
  const std::string dir = test::ScratchDir();
  auto whole = ReadFileBytes(kOs1Pcap);
  ASSERT_TRUE(whole.ok());
  const auto offsets = RecordOffsets(*whole);
  ASSERT_EQ(offsets.size(), 222u);
  // A lidar packet's record (8490 bytes) after a few others: cut inside its header, then inside
  // its data.
  size_t at = 5;
  while (offsets[at + 1] - offsets[at] < 1000) ++at;
  for (const size_t cut : {offsets[at] + 7, offsets[at] + 16 + 100}) {
    const std::string path = Copy(kOs1Pcap, dir + "/cut.pcap", cut);
    std::string out;
    EXPECT_EQ(
        test::RunCli("import " + path + " --metadata " + kOs1Json + " --out " + dir + "/d", &out),
        3);
    EXPECT_NE(out.find(path + ": record at byte offset " + std::to_string(offsets[at])),
              std::string::npos)
        << out;
  }
  const std::string header_only = Copy(kOs1Pcap, dir + "/h.pcap", 10);
  std::string out;
  EXPECT_EQ(test::RunCli(
                "import " + header_only + " --metadata " + kOs1Json + " --out " + dir + "/d", &out),
            3);
  EXPECT_NE(out.find(header_only + ": not a readable packet capture"), std::string::npos) << out;
}

TEST(Ouster, CorruptPacketNamesRecordAndPacketOffset) {
  const std::string dir = test::ScratchDir();
  auto bytes = ReadFileBytes(kOs1Pcap);
  ASSERT_TRUE(bytes.ok());
  const auto offsets = RecordOffsets(*bytes);
  // The first lidar packet's first column measurement id (Ethernet 14 + IPv4 20 + UDP 8, then
  // the 32-byte packet header and the column's 8-byte timestamp) set beyond 1023.
  size_t record = 0;
  while ((*bytes)[offsets[record] + 16 + 36] != 0x1d || (*bytes)[offsets[record] + 16 + 37] != 0x4e)
    ++record;  // destination port 7502
  const size_t mid = offsets[record] + 16 + 42 + 32 + 8;
  (*bytes)[mid] = 0xff;
  (*bytes)[mid + 1] = 0x7f;
  const std::string path = dir + "/bad.pcap";
  ASSERT_TRUE(WriteFileAtomic(path, *bytes).ok());
  std::string out;
  EXPECT_EQ(
      test::RunCli("import " + path + " --metadata " + kOs1Json + " --out " + dir + "/d", &out), 3);
  EXPECT_NE(out.find(path + ": record at byte offset " + std::to_string(offsets[record]) +
                     ": lidar packet: packet byte offset 40: measurement id 32767"),
            std::string::npos)
      << out;

  // Metadata that does not describe this capture's packets: their size is the error.
  auto meta = json::parse(std::ifstream(kOs1Json));
  meta["data_format"]["columns_per_packet"] = 8;
  std::ofstream(dir + "/meta.json") << meta.dump();
  EXPECT_EQ(
      test::RunCli("import " + kOs1Pcap + " --metadata " + dir + "/meta.json --out " + dir + "/d",
                   &out),
      3);
  EXPECT_NE(out.find("8448 bytes, a RNG15_RFL8_NIR8 lidar packet of 128 x 8 pixels has 4256"),
            std::string::npos)
      << out;
}

// Every datagram of a capture, in order.
std::vector<std::vector<uint8_t>> Datagrams(const std::string& pcap) {
  std::vector<std::vector<uint8_t>> all;
  const Status s = ReadPcapUdp(pcap, [&](const UdpDatagram& d) {
    all.emplace_back(d.payload.data, d.payload.data + d.payload.size);
    return Status::Ok();
  });
  EXPECT_TRUE(s.ok()) << s.ToString();
  return all;
}

// The capture as a 1500-byte-MTU network delivers it: each IPv4 datagram split into fragments of
// at most 1480 bytes, every other datagram's fragments written last first, and each frame
// carrying an 802.1Q VLAN tag.
std::vector<uint8_t> Fragmented(const std::vector<uint8_t>& pcap) {
  std::vector<uint8_t> out(pcap.begin(), pcap.begin() + 24);
  const auto put = [&](const uint8_t* record_header, const std::vector<uint8_t>& frame) {
    uint8_t h[16];
    std::memcpy(h, record_header, 16);
    const auto n = uint32_t(frame.size());
    std::memcpy(h + 8, &n, 4);
    std::memcpy(h + 12, &n, 4);
    out.insert(out.end(), h, h + 16);
    out.insert(out.end(), frame.begin(), frame.end());
  };
  size_t index = 0;
  for (const size_t at : RecordOffsets(pcap)) {
    uint32_t caplen;
    std::memcpy(&caplen, pcap.data() + at + 8, 4);
    const uint8_t* frame = pcap.data() + at + 16;
    const std::vector<uint8_t> ip(frame + 14, frame + caplen);  // 20-byte IPv4 header
    const std::vector<uint8_t> payload(ip.begin() + 20, ip.end());
    std::vector<std::vector<uint8_t>> pieces;
    for (size_t off = 0; off < payload.size(); off += 1480) {
      const size_t n = std::min<size_t>(1480, payload.size() - off);
      std::vector<uint8_t> f(frame, frame + 12);
      f.insert(f.end(), {0x81, 0x00, 0x00, 0x07, 0x08, 0x00});  // VLAN 7, then IPv4
      f.insert(f.end(), ip.begin(), ip.begin() + 20);
      const size_t ip_at = 18;
      f[ip_at + 2] = uint8_t((20 + n) >> 8);
      f[ip_at + 3] = uint8_t(20 + n);
      const uint16_t flags = uint16_t((off + n < payload.size() ? 0x2000 : 0) | off / 8);
      f[ip_at + 6] = uint8_t(flags >> 8);
      f[ip_at + 7] = uint8_t(flags);
      f.insert(f.end(), payload.begin() + long(off), payload.begin() + long(off + n));
      pieces.push_back(std::move(f));
    }
    if (index++ % 2 == 1) std::reverse(pieces.begin(), pieces.end());
    for (const auto& f : pieces) put(pcap.data() + at, f);
  }
  return out;
}

TEST(Pcap, FragmentedVlanTaggedCaptureGivesTheSameDatagrams) {
  const std::string dir = test::ScratchDir();
  auto whole = ReadFileBytes(kOs1Pcap);
  ASSERT_TRUE(whole.ok());
  const std::vector<uint8_t> fragmented = Fragmented(*whole);
  ASSERT_GT(RecordOffsets(fragmented).size(), 1000u);
  ASSERT_TRUE(WriteFileAtomic(dir + "/f.pcap", fragmented).ok());
  const auto want = Datagrams(kOs1Pcap);
  ASSERT_EQ(want.size(), 222u);
  EXPECT_TRUE(Datagrams(dir + "/f.pcap") == want);
  std::string out;
  ASSERT_EQ(test::RunCli(
                "import " + dir + "/f.pcap --metadata " + kOs1Json + " --out " + dir + "/d", &out),
            0)
      << out;
  ExpectReferenceFrames(dir + "/d", true);
}

TEST(Ouster, MetadataErrorsNameTheKey) {
  const auto parse = [](const json& j) { return ParseOusterMetadata(j.dump(), "m.json"); };
  const json good = json::parse(std::ifstream(kOs1Json));
  ASSERT_TRUE(parse(good).ok());
  json j = good;
  j["beam_altitude_angles"].erase(0);
  EXPECT_NE(parse(j).status().ToString().find(
                "m.json: beam_altitude_angles: expected an array of 128 numbers"),
            std::string::npos);
  j = good;
  j["data_format"]["pixels_per_column"] = 100000;
  EXPECT_NE(parse(j).status().ToString().find("m.json: pixels_per_column: expected an integer"),
            std::string::npos);
  j = good;
  j["data_format"]["udp_profile_lidar"] = "RNG19_RFL8_SIG16_NIR16_DUAL";
  EXPECT_NE(parse(j).status().ToString().find("RNG19_RFL8_SIG16_NIR16_DUAL is not supported"),
            std::string::npos);
  j = good;
  j["lidar_to_sensor_transform"][0] = 2;
  EXPECT_NE(parse(j).status().ToString().find("lidar_to_sensor_transform"), std::string::npos);
  j = good;
  j.erase("lidar_origin_to_beam_origin_mm");
  EXPECT_NE(parse(j).status().ToString().find("lidar_origin_to_beam_origin_mm: missing"),
            std::string::npos);
  EXPECT_FALSE(ParseOusterMetadata("{", "m.json").ok());
}

// The SDK's later metadata layout (sections beam_intrinsics, lidar_intrinsics, lidar_data_format,
// config_params) reads as the same sensor.
TEST(Ouster, NestedMetadataLayoutReadsTheSame) {
  const json flat = json::parse(std::ifstream(kOs1Json));
  json nested;
  nested["beam_intrinsics"] = {
      {"beam_altitude_angles", flat["beam_altitude_angles"]},
      {"beam_azimuth_angles", flat["beam_azimuth_angles"]},
      {"lidar_origin_to_beam_origin_mm", flat["lidar_origin_to_beam_origin_mm"]}};
  nested["lidar_intrinsics"] = {{"lidar_to_sensor_transform", flat["lidar_to_sensor_transform"]}};
  nested["lidar_data_format"] = flat["data_format"];
  nested["lidar_data_format"].erase("udp_profile_lidar");
  nested["config_params"] = {{"udp_profile_lidar", "RNG15_RFL8_NIR8"}, {"udp_port_lidar", 7502}};
  nested["sensor_info"] = {{"prod_line", "OS-1-128"}};
  auto a = ParseOusterMetadata(flat.dump(), "flat");
  auto b = ParseOusterMetadata(nested.dump(), "nested");
  ASSERT_TRUE(a.ok() && b.ok()) << b.status().ToString();
  EXPECT_EQ(a->profile, b->profile);
  EXPECT_EQ(a->packet_size(), b->packet_size());
  EXPECT_EQ(a->beam_altitude_deg, b->beam_altitude_deg);
  EXPECT_EQ(a->beam_azimuth_deg, b->beam_azimuth_deg);
  EXPECT_EQ(a->lidar_to_sensor_mm, b->lidar_to_sensor_mm);
  EXPECT_EQ(a->product_line, b->product_line);
}

TEST(Ouster, ImportWithoutMetadataIsAClearError) {
  std::string out;
  EXPECT_EQ(test::RunCli("import " + kOs1Pcap + " --out " + test::ScratchDir(), &out), 2);
  EXPECT_NE(out.find("needs its sensor's metadata JSON (--metadata)"), std::string::npos) << out;
}

}  // namespace
}  // namespace dv::recorded
