// What the test MCAP writers (write_*_mcap.js) share: an @mcap/core McapWriter that collects the
// file in memory, ROS 2 channels (CDR messages, ros2msg schemas named after their types), messages
// numbered in the order they are added, and the CDR std_msgs/Header.
"use strict";

// options: McapWriter's own (chunkSize, compressChunk) besides the writable. Returns the started
// writer's helpers; bytes() is the whole file once writer.end() has run.
async function startMcap(McapWriter, start, options = {}) {
  const chunks = [];
  let size = 0n;
  const writer = new McapWriter({
    ...options,
    writable: {
      write: async (buffer) => {
        chunks.push(Buffer.from(buffer));
        size += BigInt(buffer.byteLength);
      },
      position: () => size,
    },
  });
  await writer.start(start);
  let sequence = 0;
  return {
    writer,
    bytes: () => Buffer.concat(chunks),
    // A CDR channel of a ROS 2 message type.
    cdrChannel: async (topic, type) =>
      writer.registerChannel({
        topic,
        messageEncoding: "cdr",
        schemaId: await writer.registerSchema({
          name: type,
          encoding: "ros2msg",
          data: new TextEncoder().encode(`# ${type}`),
        }),
        metadata: new Map(),
      }),
    // A message logged and published at stampNs.
    add: async (channelId, stampNs, data) =>
      writer.addMessage({
        channelId,
        sequence: sequence++,
        logTime: stampNs,
        publishTime: stampNs,
        data,
      }),
  };
}

// stampNs: a BigInt (epoch nanoseconds exceed a double's integers).
function cdrHeader(w, stampNs, frameId) {
  w.int32(Number(stampNs / 1000000000n));
  w.uint32(Number(stampNs % 1000000000n));
  w.string(frameId);
}

module.exports = { startMcap, cdrHeader };
