// Rebuilds the MCAP conformance suite's .mcap files with the reference writer (@mcap/core's
// record and chunk builders, installed into .deps by scripts/install-deps.sh) and proves each
// one byte-identical to the MCAP project's file before a reader test uses it.
//
// Why: ../shared/data/mcap-conformance holds the suite's .mcap files as Git LFS pointers (their
// sha256 and size, not their bytes), next to the full .json of every record each file holds.
// Every byte of a file follows from its records, its variant's features and the writer; the
// only records the .json leaves out (Chunk, MessageIndex) are derived from the others. A file
// rebuilt here is used only when its sha256 and size equal the pointer's (or, where the suite
// holds real bytes, when the bytes are equal), so the reader is tested on the project's files.
//
//   usage: node mcap_conformance_inputs.js SUITE_DIR OUT_DIR [NODE_MODULES]
// Writes OUT_DIR/<case>/<variant>.mcap; exits 1 naming every file that does not match.
"use strict";
const crypto = require("crypto");
const fs = require("fs");
const path = require("path");

const [suite, out, modules = path.join(__dirname, "../../.deps/node_modules")] =
  process.argv.slice(2);
const mcap = require(path.join(modules, "@mcap/core"));
const { crc32 } = require(path.join(modules, "@foxglove/crc")); // MCAP's CRC-32, @mcap/core's own

const big = (s) => BigInt(s);
const num = (s) => Number(s);
const bytes = (list) => Uint8Array.from(list.map(num));
const stringMap = (o) => new Map(Object.entries(o));
const u16u64Map = (o) => new Map(Object.entries(o).map(([k, v]) => [num(k), big(v)]));

// The .json's snake_case fields as the builder's record objects.
function toRecord(type, f) {
  switch (type) {
    case "Schema":
      return { id: num(f.id), name: f.name, encoding: f.encoding, data: bytes(f.data) };
    case "Channel":
      return {
        id: num(f.id),
        schemaId: num(f.schema_id),
        topic: f.topic,
        messageEncoding: f.message_encoding,
        metadata: stringMap(f.metadata),
      };
    case "Message":
      return {
        channelId: num(f.channel_id),
        sequence: num(f.sequence),
        logTime: big(f.log_time),
        publishTime: big(f.publish_time),
        data: bytes(f.data),
      };
    case "Attachment":
      return {
        logTime: big(f.log_time),
        createTime: big(f.create_time),
        name: f.name,
        mediaType: f.media_type,
        data: bytes(f.data),
      };
    case "AttachmentIndex":
      return {
        offset: big(f.offset),
        length: big(f.length),
        logTime: big(f.log_time),
        createTime: big(f.create_time),
        dataSize: big(f.data_size),
        name: f.name,
        mediaType: f.media_type,
      };
    case "Metadata":
      return { name: f.name, metadata: stringMap(f.metadata) };
    case "MetadataIndex":
      return { offset: big(f.offset), length: big(f.length), name: f.name };
    case "Statistics":
      return {
        messageCount: big(f.message_count),
        schemaCount: num(f.schema_count),
        channelCount: num(f.channel_count),
        attachmentCount: num(f.attachment_count),
        metadataCount: num(f.metadata_count),
        chunkCount: num(f.chunk_count),
        messageStartTime: big(f.message_start_time),
        messageEndTime: big(f.message_end_time),
        channelMessageCounts: u16u64Map(f.channel_message_counts),
      };
    case "ChunkIndex":
      return {
        messageStartTime: big(f.message_start_time),
        messageEndTime: big(f.message_end_time),
        chunkStartOffset: big(f.chunk_start_offset),
        chunkLength: big(f.chunk_length),
        messageIndexOffsets: u16u64Map(f.message_index_offsets),
        messageIndexLength: big(f.message_index_length),
        compression: f.compression,
        compressedSize: big(f.compressed_size),
        uncompressedSize: big(f.uncompressed_size),
      };
    case "SummaryOffset":
      return {
        groupOpcode: num(f.group_opcode),
        groupStart: big(f.group_start),
        groupLength: big(f.group_length),
      };
    case "DataEnd":
      return { dataSectionCrc: num(f.data_section_crc) };
    case "Footer":
      return {
        summaryStart: big(f.summary_start),
        summaryOffsetStart: big(f.summary_offset_start),
        summaryCrc: num(f.summary_crc),
      };
    case "Header":
      return { profile: f.profile, library: f.library };
  }
  throw new Error(`unknown record type ${type}`);
}

const writers = {
  Header: "writeHeader",
  Schema: "writeSchema",
  Channel: "writeChannel",
  Message: "writeMessage",
  Attachment: "writeAttachment",
  AttachmentIndex: "writeAttachmentIndex",
  Metadata: "writeMetadata",
  MetadataIndex: "writeMetadataIndex",
  Statistics: "writeStatistics",
  ChunkIndex: "writeChunkIndex",
  SummaryOffset: "writeSummaryOffset",
  DataEnd: "writeDataEnd",
  Footer: "writeFooter",
};

// A chunked variant's data section holds one uncompressed chunk with the Schemas, Channels and
// Messages in record order (with its CRC), then the chunk's MessageIndex records ("mx").
function build(expected) {
  const features = new Set(expected.meta.variant.features);
  const builder = new mcap.McapRecordBuilder({ padRecords: features.has("pad") });
  const chunk = features.has("ch")
    ? new mcap.McapChunkBuilder({ useMessageIndex: features.has("mx") })
    : undefined;
  const chunked = { Schema: "addSchema", Channel: "addChannel", Message: "addMessage" };
  builder.writeMagic();
  let inData = true;
  for (const { type, fields } of expected.records) {
    const f = Object.fromEntries(fields);
    if (type === "DataEnd" && chunk) {
      const records = chunk.buffer;
      builder.writeChunk({
        messageStartTime: chunk.messageStartTime,
        messageEndTime: chunk.messageEndTime,
        uncompressedSize: BigInt(records.byteLength),
        uncompressedCrc: crc32(records),
        compression: "",
        records,
      });
      for (const index of chunk.indices) builder.writeMessageIndex(index);
    }
    if (inData && chunk && chunked[type]) {
      chunk[chunked[type]](toRecord(type, f));
    } else {
      builder[writers[type]](toRecord(type, f));
    }
    if (type === "DataEnd") inData = false;
  }
  builder.writeMagic();
  return Buffer.from(builder.buffer);
}

// True when the rebuilt bytes are the suite's file: equal bytes, or an LFS pointer's oid/size.
function matches(original, rebuilt) {
  const text = original.toString("latin1");
  if (!text.startsWith("version https://git-lfs.github.com/spec/v1")) return original.equals(rebuilt);
  const oid = /oid sha256:([0-9a-f]{64})/.exec(text);
  const size = /size (\d+)/.exec(text);
  const sha = crypto.createHash("sha256").update(rebuilt).digest("hex");
  return oid !== null && size !== null && oid[1] === sha && num(size[1]) === rebuilt.length;
}

let ok = 0;
const bad = [];
for (const name of fs.readdirSync(suite).sort()) {
  const dir = path.join(suite, name);
  if (!fs.statSync(dir).isDirectory()) continue;
  for (const file of fs.readdirSync(dir).filter((f) => f.endsWith(".mcap")).sort()) {
    const json = path.join(dir, file.replace(/\.mcap$/, ".json"));
    const rebuilt = build(JSON.parse(fs.readFileSync(json, "utf8")));
    if (!matches(fs.readFileSync(path.join(dir, file)), rebuilt)) {
      bad.push(path.join(name, file));
      continue;
    }
    fs.mkdirSync(path.join(out, name), { recursive: true });
    fs.writeFileSync(path.join(out, name, file), rebuilt);
    ++ok;
  }
}
console.log(`mcap conformance inputs: ${ok} files identical to the suite's, ${bad.length} not`);
for (const f of bad) console.log(`  does not match: ${f}`);
process.exit(bad.length === 0 && ok > 0 ? 0 : 1);
