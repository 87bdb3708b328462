// The MCAP project's conformance suite (../shared/data/mcap-conformance): for every .mcap file,
// ReadMcap must yield exactly the records of its .json (the suite's streamed-reader output:
// fields sorted by name, integers as decimal strings, bytes as lists of decimal strings).
// The suite's .mcap files are Git LFS pointers there; mcap_conformance_inputs.js rebuilds them
// with the reference writer (@mcap/core) and proves each identical to the pointer's sha256
// and size before this test reads it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "dejaview/recorded/mcap.h"
#include "testutil.h"

namespace dv::recorded {
namespace {

using nlohmann::json;

std::string Dec(uint64_t v) { return std::to_string(v); }

json Bytes(ByteView v) {
  json out = json::array();
  for (size_t i = 0; i < v.size; ++i) out.push_back(Dec(v.data[i]));
  return out;
}

json Map(const McapStringMap& m) {
  json out = json::object();
  for (const auto& [k, v] : m) out[k] = v;
  return out;
}

json Map(const std::map<uint16_t, uint64_t>& m) {
  json out = json::object();
  for (const auto& [k, v] : m) out[Dec(k)] = Dec(v);
  return out;
}

// {"type": T, "fields": [[name, value], ...]} with the fields sorted by name.
json Record(const char* type, std::map<std::string, json> fields) {
  json list = json::array();
  for (auto& [k, v] : fields) list.push_back(json::array({k, std::move(v)}));
  return {{"type", type}, {"fields", std::move(list)}};
}

json ToJson(const McapRecord& record) {
  struct {
    json operator()(const McapHeader& r) {
      return Record("Header", {{"library", r.library}, {"profile", r.profile}});
    }
    json operator()(const McapFooter& r) {
      return Record("Footer", {{"summary_crc", Dec(r.summary_crc)},
                               {"summary_offset_start", Dec(r.summary_offset_start)},
                               {"summary_start", Dec(r.summary_start)}});
    }
    json operator()(const McapSchema& r) {
      return Record(
          "Schema",
          {{"data", Bytes(r.data)}, {"encoding", r.encoding}, {"id", Dec(r.id)}, {"name", r.name}});
    }
    json operator()(const McapChannel& r) {
      return Record("Channel", {{"id", Dec(r.id)},
                                {"message_encoding", r.message_encoding},
                                {"metadata", Map(r.metadata)},
                                {"schema_id", Dec(r.schema_id)},
                                {"topic", r.topic}});
    }
    json operator()(const McapMessage& r) {
      return Record("Message", {{"channel_id", Dec(r.channel_id)},
                                {"data", Bytes(r.data)},
                                {"log_time", Dec(r.log_time)},
                                {"publish_time", Dec(r.publish_time)},
                                {"sequence", Dec(r.sequence)}});
    }
    json operator()(const McapChunkIndex& r) {
      return Record("ChunkIndex", {{"chunk_length", Dec(r.chunk_length)},
                                   {"chunk_start_offset", Dec(r.chunk_start_offset)},
                                   {"compressed_size", Dec(r.compressed_size)},
                                   {"compression", r.compression},
                                   {"message_end_time", Dec(r.message_end_time)},
                                   {"message_index_length", Dec(r.message_index_length)},
                                   {"message_index_offsets", Map(r.message_index_offsets)},
                                   {"message_start_time", Dec(r.message_start_time)},
                                   {"uncompressed_size", Dec(r.uncompressed_size)}});
    }
    // The suite's runners leave the attachment's crc out of its fields.
    json operator()(const McapAttachment& r) {
      return Record("Attachment", {{"create_time", Dec(r.create_time)},
                                   {"data", Bytes(r.data)},
                                   {"log_time", Dec(r.log_time)},
                                   {"media_type", r.media_type},
                                   {"name", r.name}});
    }
    json operator()(const McapAttachmentIndex& r) {
      return Record("AttachmentIndex", {{"create_time", Dec(r.create_time)},
                                        {"data_size", Dec(r.data_size)},
                                        {"length", Dec(r.length)},
                                        {"log_time", Dec(r.log_time)},
                                        {"media_type", r.media_type},
                                        {"name", r.name},
                                        {"offset", Dec(r.offset)}});
    }
    json operator()(const McapStatistics& r) {
      return Record("Statistics", {{"attachment_count", Dec(r.attachment_count)},
                                   {"channel_count", Dec(r.channel_count)},
                                   {"channel_message_counts", Map(r.channel_message_counts)},
                                   {"chunk_count", Dec(r.chunk_count)},
                                   {"message_count", Dec(r.message_count)},
                                   {"message_end_time", Dec(r.message_end_time)},
                                   {"message_start_time", Dec(r.message_start_time)},
                                   {"metadata_count", Dec(r.metadata_count)},
                                   {"schema_count", Dec(r.schema_count)}});
    }
    json operator()(const McapMetadata& r) {
      return Record("Metadata", {{"metadata", Map(r.metadata)}, {"name", r.name}});
    }
    json operator()(const McapMetadataIndex& r) {
      return Record("MetadataIndex",
                    {{"length", Dec(r.length)}, {"name", r.name}, {"offset", Dec(r.offset)}});
    }
    json operator()(const McapSummaryOffset& r) {
      return Record("SummaryOffset", {{"group_length", Dec(r.group_length)},
                                      {"group_opcode", Dec(r.group_opcode)},
                                      {"group_start", Dec(r.group_start)}});
    }
    json operator()(const McapDataEnd& r) {
      return Record("DataEnd", {{"data_section_crc", Dec(r.data_section_crc)}});
    }
  } to_json;
  return std::visit(to_json, record);
}

TEST(McapConformance, EveryFileYieldsExactlyItsRecords) {
  const std::filesystem::path shared = DEJAVIEW_DATA_DIR;
  if (!std::filesystem::is_directory(shared))
    GTEST_SKIP() << "shared data folder absent: " << shared;
  const auto suite = shared / "mcap-conformance";
  ASSERT_TRUE(std::filesystem::is_directory(suite)) << "conformance suite missing: " << suite;
  const std::string inputs = test::ScratchDir();
  std::string output;
  const std::string cmd = "node " DEJAVIEW_SOURCE_DIR
                          "/tests/recorded/mcap_conformance_inputs.js " +
                          suite.string() + " " + inputs + " " DEJAVIEW_NODE_MODULES;
  ASSERT_EQ(test::RunCommand(cmd, &output), 0)
      << output << "(is @mcap/core installed? bash scripts/install-deps.sh)";
  size_t files = 0, records = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(inputs)) {
    if (entry.path().extension() != ".mcap") continue;
    const auto expected_path = suite / entry.path().parent_path().filename() /
                               entry.path().filename().replace_extension(".json");
    std::ifstream in(expected_path);
    ASSERT_TRUE(in) << expected_path;
    const json expected = json::parse(in)["records"];
    json got = json::array();
    const Status s = ReadMcapFile(entry.path().string(), [&](const McapRecord& r) {
      got.push_back(ToJson(r));
      return Status::Ok();
    });
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(got, expected) << entry.path();
    ++files;
    records += got.size();
  }
  // The suite as shipped: 6 cases in their variants, 4868 records in all.
  EXPECT_EQ(files, 416u);
  EXPECT_EQ(records, 4868u);
}

}  // namespace
}  // namespace dv::recorded
