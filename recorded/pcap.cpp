#include "dejaview/recorded/pcap.h"

#include <pcap/pcap.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

namespace dv::recorded {
namespace {

constexpr uint16_t kEtherIpv4 = 0x0800, kEtherIpv6 = 0x86dd;
constexpr uint16_t kEtherVlan = 0x8100, kEtherQinQ = 0x88a8;
constexpr uint8_t kProtoUdp = 17;
constexpr size_t kMaxIpDatagram = 65535;
// Datagrams waiting for fragments: a capture that lost fragments leaves some unfinished, and the
// oldest is dropped beyond this many, so reassembly holds at most 64 KiB times this.
constexpr size_t kMaxPendingDatagrams = 64;

uint16_t Be16(const uint8_t* p) { return uint16_t(p[0] << 8 | p[1]); }

// An IPv4 datagram being reassembled from its fragments (RFC 791): bytes by offset, and which
// 8-byte blocks have arrived.
struct Pending {
  uint64_t order = 0;
  std::vector<uint8_t> bytes;
  std::vector<bool> blocks;
  size_t total = 0;  // known once the last fragment arrived
  size_t received_blocks = 0;
};
using FragmentKey = std::tuple<uint32_t, uint32_t, uint16_t>;  // source, destination, id

class Walker {
 public:
  Walker(const std::string& path, const UdpVisitor& visit) : path_(path), visit_(visit) {}

  Status Error(const std::string& what) const {
    return Status::Corruption(path_ + ": record at byte offset " + std::to_string(offset_) + ": " +
                              what);
  }

  Status Record(uint64_t offset, const pcap_pkthdr& h, const uint8_t* data, int link) {
    offset_ = offset;
    time_ns_ = int64_t(h.ts.tv_sec) * 1000000000 + int64_t(h.ts.tv_usec) * 1000;
    truncated_ = h.caplen < h.len;
    size_t size = h.caplen;
    uint16_t ether = 0;
    switch (link) {
      case DLT_EN10MB:
        if (size < 14) return Status::Ok();  // a runt frame carries nothing
        ether = Be16(data + 12);
        data += 14;
        size -= 14;
        while ((ether == kEtherVlan || ether == kEtherQinQ) && size >= 4) {
          ether = Be16(data + 2);
          data += 4;
          size -= 4;
        }
        break;
      case DLT_LINUX_SLL:
        if (size < 16) return Status::Ok();
        ether = Be16(data + 14);
        data += 16;
        size -= 16;
        break;
      case DLT_RAW:
        if (size < 1) return Status::Ok();
        ether = (data[0] >> 4) == 6 ? kEtherIpv6 : kEtherIpv4;
        break;
      default:
        return Status::InvalidArgument(path_ + ": link type " + std::to_string(link) +
                                       " is not read (Ethernet, Linux SLL and raw IP are)");
    }
    if (ether == kEtherIpv4) return Ipv4(data, size);
    if (ether == kEtherIpv6) return Ipv6(data, size);
    return Status::Ok();
  }

 private:
  Status Ipv4(const uint8_t* ip, size_t size) {
    if (size < 20) return Error("IPv4 header cut short");
    const size_t header = size_t(ip[0] & 0x0f) * 4;
    const size_t total = Be16(ip + 2);
    if ((ip[0] >> 4) != 4 || header < 20 || total < header) return Error("not a valid IPv4 header");
    if (ip[9] != kProtoUdp) return Status::Ok();
    if (total > size) return Error(Cut(total, size));
    const uint16_t flags_offset = Be16(ip + 6);
    const bool more = (flags_offset & 0x2000) != 0;
    const size_t fragment_offset = size_t(flags_offset & 0x1fff) * 8;
    if (!more && fragment_offset == 0) return Udp(ip + header, total - header);
    uint32_t src, dst;
    std::memcpy(&src, ip + 12, 4);
    std::memcpy(&dst, ip + 16, 4);
    return Fragment({src, dst, Be16(ip + 4)}, fragment_offset, more, ip + header, total - header);
  }

  Status Ipv6(const uint8_t* ip, size_t size) {
    if (size < 40) return Error("IPv6 header cut short");
    const size_t payload = Be16(ip + 4);
    if (ip[6] != kProtoUdp) return Status::Ok();  // extension headers are not followed
    if (40 + payload > size) return Error(Cut(40 + payload, size));
    return Udp(ip + 40, payload);
  }

  Status Fragment(const FragmentKey& key, size_t offset, bool more, const uint8_t* data,
                  size_t size) {
    if (offset + size > kMaxIpDatagram || (more && size % 8 != 0))
      return Error("IPv4 fragment beyond 65535 bytes or not a multiple of 8");
    auto it = pending_.find(key);
    if (it == pending_.end()) {
      if (pending_.size() == kMaxPendingDatagrams) {
        auto oldest = pending_.begin();
        for (auto p = pending_.begin(); p != pending_.end(); ++p)
          if (p->second.order < oldest->second.order) oldest = p;
        pending_.erase(oldest);
      }
      it = pending_.emplace(key, Pending()).first;
      it->second.order = next_order_++;
      it->second.blocks.assign(kMaxIpDatagram / 8 + 1, false);
    }
    Pending& p = it->second;
    if (p.bytes.size() < offset + size) p.bytes.resize(offset + size);
    std::memcpy(p.bytes.data() + offset, data, size);
    for (size_t b = offset / 8; b < (offset + size + 7) / 8; ++b) {
      if (!p.blocks[b]) ++p.received_blocks;
      p.blocks[b] = true;
    }
    if (!more) p.total = offset + size;
    if (p.total == 0 || p.received_blocks != (p.total + 7) / 8) return Status::Ok();
    const std::vector<uint8_t> whole = std::move(p.bytes);
    const size_t total = p.total;
    pending_.erase(it);
    return Udp(whole.data(), total);
  }

  Status Udp(const uint8_t* udp, size_t size) {
    if (size < 8) return Error("UDP header cut short");
    const size_t length = Be16(udp + 4);
    if (length < 8 || length > size) return Error(Cut(length, size) + " (UDP length)");
    UdpDatagram d;
    d.record_offset = offset_;
    d.capture_time_ns = time_ns_;
    d.src_port = Be16(udp);
    d.dst_port = Be16(udp + 2);
    d.payload = {udp + 8, length - 8};
    return visit_(d);
  }

  std::string Cut(size_t wanted, size_t have) const {
    return "a datagram of " + std::to_string(wanted) + " bytes with " + std::to_string(have) +
           " captured" + (truncated_ ? " (the capture's snapshot length cut it)" : "");
  }

  const std::string& path_;
  const UdpVisitor& visit_;
  uint64_t offset_ = 0;
  int64_t time_ns_ = 0;
  bool truncated_ = false;
  std::map<FragmentKey, Pending> pending_;
  uint64_t next_order_ = 0;
};

// Walks an open capture; name is for the messages.
Status Walk(pcap_t* pcap, const std::string& name, const UdpVisitor& visit) {
  const int link = pcap_datalink(pcap);
  // libpcap reads a savefile's records with stdio, one record per call, so the stream's position
  // before a call is the offset of the record it reads.
  FILE* file = pcap_file(pcap);
  Walker walker(name, visit);
  for (;;) {
    const long offset = file != nullptr ? std::ftell(file) : -1;
    pcap_pkthdr* header = nullptr;
    const uint8_t* data = nullptr;
    const int rc = pcap_next_ex(pcap, &header, &data);
    if (rc == PCAP_ERROR_BREAK) return Status::Ok();  // end of file
    if (rc != 1)
      return Status::Corruption(name + ": record at byte offset " + std::to_string(offset) + ": " +
                                pcap_geterr(pcap));
    DV_RETURN_IF_ERROR(walker.Record(uint64_t(offset), *header, data, link));
  }
}

using PcapHandle = std::unique_ptr<pcap_t, void (*)(pcap_t*)>;

}  // namespace

Status ReadPcapUdp(const std::string& path, const UdpVisitor& visit) {
  char error[PCAP_ERRBUF_SIZE] = {};
  PcapHandle pcap(pcap_open_offline(path.c_str(), error), pcap_close);
  if (!pcap) return Status::Corruption(path + ": not a readable packet capture: " + error);
  return Walk(pcap.get(), path, visit);
}

Status ReadPcapUdp(const uint8_t* data, size_t size, const std::string& name,
                   const UdpVisitor& visit) {
  FILE* file = ::fmemopen(const_cast<uint8_t*>(data), size, "rb");
  if (file == nullptr) return Status::IoError(name + ": fmemopen failed");
  char error[PCAP_ERRBUF_SIZE] = {};
  // On success the capture owns the stream (pcap_close closes it); on failure it is ours.
  PcapHandle pcap(pcap_fopen_offline(file, error), pcap_close);
  if (!pcap) {
    std::fclose(file);
    return Status::Corruption(name + ": not a readable packet capture: " + error);
  }
  return Walk(pcap.get(), name, visit);
}

}  // namespace dv::recorded
