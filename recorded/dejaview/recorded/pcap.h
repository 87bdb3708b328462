// UDP datagrams from a packet capture (pcap or pcapng, read by libpcap): link types Ethernet
// (with 802.1Q VLAN tags), Linux cooked (SLL) and raw IP; IPv4 (fragments reassembled) and IPv6.
// Other traffic (ARP, TCP, ...) is skipped. Spec: docs/recorded.md, "Ouster captures".
//
// A caller may rely on: every datagram handed over is whole (a record captured shorter than the
// packet, or a header that does not fit its record, is an error); errors name the file and the
// byte offset of the record; reassembly holds at most a bounded number of datagrams of at most
// 65535 bytes each.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "dejaview/base/status.h"
#include "dejaview/recorded/mcap.h"

namespace dv::recorded {

struct UdpDatagram {
  uint64_t record_offset = 0;  // byte offset in the file of the (last) record that carried it
  int64_t capture_time_ns = 0;
  uint16_t src_port = 0, dst_port = 0;
  ByteView payload;  // valid during the callback
};
using UdpVisitor = std::function<Status(const UdpDatagram&)>;

// Every UDP datagram in file order; the visitor's error stops the walk and is returned.
Status ReadPcapUdp(const std::string& path, const UdpVisitor& visit);
// The same from a capture in memory; name is for the messages.
Status ReadPcapUdp(const uint8_t* data, size_t size, const std::string& name,
                   const UdpVisitor& visit);

}  // namespace dv::recorded
