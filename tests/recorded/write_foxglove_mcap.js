// Writes an MCAP of foxglove.PointCloud messages as Foxglove's own tooling does, with the
// reference implementations: @mcap/core's McapWriter, the schemas of @foxglove/schemas and,
// for protobuf, protobufjs encoding against the .proto that @foxglove/schemas generates (the
// schema record holds its FileDescriptorSet); for JSON, the JSON Schema of @foxglove/schemas and
// bytes in base64. Also writes the frames it holds as JSON for the test to compare:
//   /points  foxglove.PointCloud, frame "lidar", 3 frames of 4 points: x y z float32,
//            intensity float32, ring uint16, a float64 "range" and 2 bytes of padding
//            (point_stride 28); frame 1 has a pose (the cloud's origin in "lidar": a
//            translation and a yaw), the others none (identity)
//
//   usage: node write_foxglove_mcap.js OUT.mcap EXPECTED.json NODE_MODULES protobuf|json
"use strict";
const fs = require("fs");
const path = require("path");

const [out, expectedPath, modules, encoding] = process.argv.slice(2);
const { McapWriter } = require(path.join(modules, "@mcap/core"));
const { startMcap } = require("./mcap_test_writer.js");
const protobuf = require(path.join(modules, "protobufjs"));
require(path.join(modules, "protobufjs/ext/descriptor"));
const {
  foxgloveMessageSchemas,
  generateProto,
} = require(path.join(modules, "@foxglove/schemas/internal"));
const jsonSchemas = require(path.join(modules, "@foxglove/schemas/jsonschema"));

const T0_S = 1700000000;
const STRIDE = 28;
// foxglove.NumericType: UINT16 = 3, FLOAT32 = 7, FLOAT64 = 8.
const FIELDS = [
  { name: "x", offset: 0, type: 7 },
  { name: "y", offset: 4, type: 7 },
  { name: "z", offset: 8, type: 7 },
  { name: "intensity", offset: 12, type: 7 },
  { name: "ring", offset: 16, type: 3 },
  { name: "range", offset: 20, type: 8 },
];
const f32 = Math.fround;

// The .proto files of PointCloud and what it uses, as @foxglove/schemas generates them, in one
// protobufjs root (google/protobuf/timestamp.proto is protobufjs' own).
function protobufRoot() {
  const root = new protobuf.Root();
  root.resolvePath = (origin, target) => target;
  const files = {};
  for (const name of ["PointCloud", "PackedElementField", "Pose", "Vector3", "Quaternion"]) {
    const schema = foxgloveMessageSchemas[name];
    const enums = schema.fields.filter((f) => f.type.type === "enum").map((f) => f.type.enum);
    files[`foxglove/${name}.proto`] = generateProto(schema, enums);
  }
  for (const [file, text] of Object.entries(files)) {
    protobuf.parse(text, root, { keepCase: true, alternateCommentMode: true });
    root.files.push(file);
  }
  root.loadSync("google/protobuf/timestamp.proto");
  return root.resolveAll();
}

function yawQuaternion(yaw) {
  return { x: 0, y: 0, z: Math.sin(yaw / 2), w: Math.cos(yaw / 2) };
}

function frame(i) {
  const data = Buffer.alloc(4 * STRIDE, 0xee);
  const points = [];
  for (let k = 0; k < 4; ++k) {
    const p = {
      x: f32(1 + i + 0.5 * k),
      y: f32(-0.25 * k - i),
      z: f32(0.125 * k + 0.1),
      intensity: f32(k / 4),
      ring: k,
      range: 10 + k + i / 3,
    };
    const at = k * STRIDE;
    data.writeFloatLE(p.x, at);
    data.writeFloatLE(p.y, at + 4);
    data.writeFloatLE(p.z, at + 8);
    data.writeFloatLE(p.intensity, at + 12);
    data.writeUInt16LE(p.ring, at + 16);
    data.writeDoubleLE(p.range, at + 20);
    points.push(p);
  }
  const pose =
    i === 1
      ? { position: { x: 2, y: -1, z: 0.5 }, orientation: yawQuaternion(0.5) }
      : undefined;
  return { sec: T0_S, nsec: i * 100000000, pose, data, points };
}

async function main() {
  const mcap = await startMcap(
    McapWriter,
    { profile: "", library: "write_foxglove_mcap.js" },
    { chunkSize: 256 },
  );
  const { writer } = mcap;
  let schema, encode;
  if (encoding === "protobuf") {
    const root = protobufRoot();
    const type = root.lookupType("foxglove.PointCloud");
    schema = {
      name: "foxglove.PointCloud",
      encoding: "protobuf",
      data: protobuf.descriptor.FileDescriptorSet.encode(root.toDescriptor("proto3")).finish(),
    };
    encode = (m) =>
      type
        .encode(
          type.fromObject({
            timestamp: { seconds: m.sec, nanos: m.nsec },
            frame_id: "lidar",
            pose: m.pose,
            point_stride: STRIDE,
            fields: FIELDS,
            data: m.data,
          }),
        )
        .finish();
  } else {
    schema = {
      name: "foxglove.PointCloud",
      encoding: "jsonschema",
      data: new TextEncoder().encode(JSON.stringify(jsonSchemas.PointCloud)),
    };
    encode = (m) =>
      new TextEncoder().encode(
        JSON.stringify({
          timestamp: { sec: m.sec, nsec: m.nsec },
          frame_id: "lidar",
          pose: m.pose ?? {
            position: { x: 0, y: 0, z: 0 },
            orientation: { x: 0, y: 0, z: 0, w: 1 },
          },
          point_stride: STRIDE,
          fields: FIELDS,
          data: m.data.toString("base64"),
        }),
      );
  }
  const channelId = await writer.registerChannel({
    topic: "/points",
    messageEncoding: encoding,
    schemaId: await writer.registerSchema(schema),
    metadata: new Map(),
  });
  const expected = { frames: [] };
  for (let i = 0; i < 3; ++i) {
    const m = frame(i);
    await mcap.add(channelId, BigInt(m.sec) * 1000000000n + BigInt(m.nsec), encode(m));
    expected.frames.push({ pose: m.pose ?? null, points: m.points });
  }
  await writer.end();
  fs.writeFileSync(out, mcap.bytes());
  fs.writeFileSync(expectedPath, JSON.stringify(expected));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
