#include "dejaview/transport/upload.h"

#include <zmq.h>

#include "dejaview/base/bytes.h"
#include "dejaview/base/file_util.h"

namespace dv::transport {
namespace {

Status Bad(const std::string& what) { return Status::Corruption("upload message: " + what); }

}  // namespace

const char* MessageTypeName(MessageType t) {
  switch (t) {
    case MessageType::kHello:
      return "HELLO";
    case MessageType::kData:
      return "DATA";
    case MessageType::kAck:
      return "ACK";
    case MessageType::kNack:
      return "NACK";
    case MessageType::kPing:
      return "PING";
    case MessageType::kPong:
      return "PONG";
  }
  return "?";
}

const char* NackReasonName(NackReason r) {
  switch (r) {
    case NackReason::kBadMessage:
      return "bad message";
    case NackReason::kVersion:
      return "version";
    case NackReason::kNoHello:
      return "no hello";
    case NackReason::kInvalidRecord:
      return "invalid record";
    case NackReason::kStorage:
      return "storage";
    case NackReason::kUnauthorized:
      return "unauthorized";
    case NackReason::kThrottled:
      return "throttled";
    case NackReason::kQuota:
      return "quota";
    case NackReason::kUnknownMap:
      return "unknown map";
  }
  return "?";
}

std::vector<uint8_t> EncodeMessage(const Message& m) {
  ByteWriter w;
  w.U8(m.version);
  w.U8(uint8_t(m.type));
  switch (m.type) {
    case MessageType::kHello:
      w.Str(m.vehicle);
      w.Varint(m.sensor_ids.size());
      for (uint32_t s : m.sensor_ids) w.Varint(s);
      break;
    case MessageType::kData:
      w.U64(m.batch_id);
      w.Varint(m.records.size());
      for (const SpoolRecord& r : m.records) {
        const std::vector<uint8_t> body = EncodeRecord(r);
        w.Varint(body.size());
        w.Bytes(body.data(), body.size());
      }
      break;
    case MessageType::kAck:
      w.U64(m.batch_id);
      w.Varint(m.stored);
      w.Varint(m.duplicates);
      w.Varint(m.rejected);
      w.Str(m.detail.substr(0, kMaxNackDetailBytes));
      break;
    case MessageType::kNack:
      w.U64(m.batch_id);
      w.U8(uint8_t(m.reason));
      w.Str(m.detail.substr(0, kMaxNackDetailBytes));
      break;
    case MessageType::kPing:
    case MessageType::kPong:
      w.U64(m.nonce);
      break;
  }
  return w.Take();
}

StatusOr<Message> DecodeMessage(const uint8_t* data, size_t size) {
  if (size > kMaxMessageBytes) return Bad("larger than 64 MiB");
  ByteReader r(data, size);
  Message m;
  uint8_t type = 0;
  if (!r.U8(&m.version) || !r.U8(&type)) return Bad("shorter than its 2-byte header");
  // The version is checked before the body: a newer agent gets a NACK it can act on.
  if (m.version != kUploadProtocolVersion) {
    return Status::InvalidArgument("upload message: protocol version " + std::to_string(m.version) +
                                   " (server speaks " + std::to_string(kUploadProtocolVersion) +
                                   ")");
  }
  if (type < uint8_t(MessageType::kHello) || type > uint8_t(MessageType::kPong)) {
    return Bad("unknown type " + std::to_string(type));
  }
  m.type = MessageType(type);
  uint64_t n = 0;
  switch (m.type) {
    case MessageType::kHello: {
      if (!r.Str(&m.vehicle, kMaxRecordNameBytes))
        return Bad("HELLO vehicle: truncated or too long");
      if (const Status named = ValidateName("HELLO vehicle", m.vehicle); !named.ok())
        return Bad(named.message());
      if (m.vehicle.empty()) return Bad("HELLO vehicle: empty");
      if (!r.Varint(&n) || n > kMaxHelloSensors)
        return Bad("HELLO sensor count: missing or above 64");
      for (uint64_t i = 0; i < n; ++i) {
        uint64_t s = 0;
        if (!r.Varint(&s) || s > UINT32_MAX) return Bad("HELLO sensor id " + std::to_string(i));
        m.sensor_ids.push_back(uint32_t(s));
      }
      break;
    }
    case MessageType::kData: {
      if (!r.U64(&m.batch_id)) return Bad("DATA batch id: truncated");
      if (m.batch_id == 0) return Bad("DATA batch id 0 is reserved for HELLO");
      if (!r.Varint(&n) || n > kMaxBatchRecords)
        return Bad("DATA record count: missing or above 256");
      m.records.reserve(size_t(n));
      for (uint64_t i = 0; i < n; ++i) {
        uint64_t len = 0;
        const uint8_t* body = nullptr;
        if (!r.Varint(&len) || len > r.remaining() || !r.View(&body, size_t(len))) {
          return Bad("DATA record " + std::to_string(i) + ": length past the end");
        }
        // Corruption, whatever DecodeRecord said: kInvalidArgument means "protocol version" to
        // the server, and a bad name is not that.
        auto rec = DecodeRecord(body, size_t(len));
        if (!rec.ok())
          return Bad("DATA record " + std::to_string(i) + ": " + rec.status().message());
        m.records.push_back(std::move(rec).value());
      }
      break;
    }
    case MessageType::kAck: {
      uint64_t stored = 0, dups = 0, rejected = 0;
      if (!r.U64(&m.batch_id) || !r.Varint(&stored) || !r.Varint(&dups) || !r.Varint(&rejected))
        return Bad("ACK: truncated");
      if (stored > kMaxBatchRecords || dups > kMaxBatchRecords || rejected > kMaxBatchRecords)
        return Bad("ACK counts above 256");
      if (!r.Str(&m.detail, kMaxNackDetailBytes)) return Bad("ACK detail: truncated or too long");
      m.stored = uint32_t(stored);
      m.duplicates = uint32_t(dups);
      m.rejected = uint32_t(rejected);
      break;
    }
    case MessageType::kNack: {
      uint8_t reason = 0;
      if (!r.U64(&m.batch_id) || !r.U8(&reason)) return Bad("NACK: truncated");
      if (reason < uint8_t(NackReason::kBadMessage) || reason > uint8_t(NackReason::kUnknownMap)) {
        return Bad("NACK reason " + std::to_string(reason));
      }
      m.reason = NackReason(reason);
      if (!r.Str(&m.detail, kMaxNackDetailBytes)) return Bad("NACK detail: truncated or too long");
      break;
    }
    case MessageType::kPing:
    case MessageType::kPong:
      if (!r.U64(&m.nonce)) return Bad(std::string(MessageTypeName(m.type)) + " nonce: truncated");
      break;
  }
  if (r.remaining() != 0) {
    return Bad(std::to_string(r.remaining()) + " trailing bytes after " + MessageTypeName(m.type));
  }
  return m;
}

namespace {

bool IsZ85Key(const std::string& k) {
  if (k.size() != 40) return false;
  uint8_t raw[32];
  return zmq_z85_decode(raw, k.c_str()) != nullptr;
}

std::string Trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\r\n");
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(" \t\r\n") - a + 1);
}

}  // namespace

StatusOr<CurveKeys> LoadCurveKeyFile(const std::string& path) {
  DV_ASSIGN_OR_RETURN(const std::string text, ReadFileText(path, 4096));
  CurveKeys k;
  k.secret_z85 = Trim(text);
  if (!IsZ85Key(k.secret_z85)) {
    return Status::InvalidArgument(path + ": not a 40-character Z85 CURVE secret key");
  }
  char pub[41];
  if (zmq_curve_public(pub, k.secret_z85.c_str()) != 0) {
    return Status::InvalidArgument(path + ": cannot derive the public key (libzmq without CURVE?)");
  }
  k.public_z85 = pub;
  return k;
}

StatusOr<std::string> LoadCurvePublicKeyFile(const std::string& path) {
  DV_ASSIGN_OR_RETURN(const std::string text, ReadFileText(path, 4096));
  const std::string key = Trim(text);
  if (!IsZ85Key(key)) return Status::InvalidArgument(path + ": not a 40-character Z85 public key");
  return key;
}

StatusOr<CurveKeys> GenerateCurveKeys() {
  char pub[41], sec[41];
  if (zmq_curve_keypair(pub, sec) != 0)
    return Status::Unavailable("libzmq was built without CURVE");
  return CurveKeys{pub, sec};
}

}  // namespace dv::transport
