// Upload protocol messages between the agent's DEALER and the server's ROUTER; one ZeroMQ frame
// per message (the ROUTER adds the peer identity frame). Spec: docs/upload-protocol.md.
// DecodeMessage is strict and bounded: any length, count or byte it does not expect is a
// Corruption naming the field, and no allocation exceeds kMaxMessageBytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dejaview/base/status.h"
#include "dejaview/transport/spool.h"

namespace dv::transport {

constexpr uint8_t kUploadProtocolVersion = 1;
constexpr size_t kMaxBatchRecords = 256;
constexpr size_t kMaxMessageBytes = size_t(64) << 20;
constexpr size_t kMaxHelloSensors = 64;
constexpr size_t kMaxNackDetailBytes = 256;

enum class MessageType : uint8_t {
  kHello = 1,
  kData = 2,
  kAck = 3,
  kNack = 4,
  kPing = 5,
  kPong = 6
};

enum class NackReason : uint8_t {
  kBadMessage = 1,     // did not parse
  kVersion = 2,        // protocol version not spoken by the server
  kNoHello = 3,        // DATA before HELLO on this connection
  kInvalidRecord = 4,  // a record is not from the vehicle/sensors of the HELLO
  kStorage = 5,        // the server could not store durably; retry later
  // The three below keep the batch in the agent's spool for a later retry, too.
  kUnauthorized = 6,  // HELLO names another vehicle than the key's, or the key was revoked
  kThrottled = 7,     // above the vehicle's rate limit
  kQuota = 8,         // the vehicle's storage quota on the server is used up
  // Kept and retried too: a record names a map version the server does not have (yet).
  kUnknownMap = 9,
};

struct Message {
  MessageType type = MessageType::kPing;
  uint8_t version = kUploadProtocolVersion;
  // HELLO
  std::string vehicle;
  std::vector<uint32_t> sensor_ids;
  // DATA, ACK, NACK (batch 0 answers HELLO)
  uint64_t batch_id = 0;
  std::vector<SpoolRecord> records;
  // ACK
  uint32_t stored = 0;      // records newly made durable
  uint32_t duplicates = 0;  // records the server already had
  // Records the server will never store: their payload is not a delta frame it can read
  // (container or CRC). The reason of the first is in detail.
  uint32_t rejected = 0;
  // NACK
  NackReason reason = NackReason::kBadMessage;
  std::string detail;
  // PING, PONG
  uint64_t nonce = 0;
};

std::vector<uint8_t> EncodeMessage(const Message& m);
StatusOr<Message> DecodeMessage(const uint8_t* data, size_t size);
const char* MessageTypeName(MessageType t);
const char* NackReasonName(NackReason r);

// CURVE keys (ZeroMQ's CurveZMQ, RFC 26) in Z85 text, 40 characters each. A secret key file
// holds one secret key, the public key is derived from it; a public key file (NAME.public from
// `dejaview keygen`) holds one public key.
struct CurveKeys {
  std::string public_z85;
  std::string secret_z85;
};
StatusOr<CurveKeys> LoadCurveKeyFile(const std::string& path);
StatusOr<std::string> LoadCurvePublicKeyFile(const std::string& path);
StatusOr<CurveKeys> GenerateCurveKeys();

}  // namespace dv::transport
