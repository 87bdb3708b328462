// Writes a ROS 2 style MCAP with the reference implementations (@mcap/core's McapWriter,
// @foxglove/cdr's CdrWriter; npm, installed into .deps by scripts/install-deps.sh), as a driver
// and a localiser would record it, and the frames it holds as JSON for the test to compare:
//   /lidar/points  sensor_msgs/msg/PointCloud2, frame "lidar": 3 organised frames (2 rows of 3
//                  points, rows padded), x y z float32, intensity float32 after 4 padding bytes,
//                  ring uint16, time float32; a 4th message on /lidar/points_raw
//   /odom          nav_msgs/msg/Odometry at each frame's stamp (map -> lidar)
//   /tf            tf2_msgs/msg/TFMessage at each frame's stamp: map -> base_link and map -> lidar
//   /pose          geometry_msgs/msg/PoseStamped before the first and after the last frame
//
// Chunks are uncompressed, or compressed by Debian's zstd or lz4 tool (a zstd frame, an LZ4
// frame: what MCAP's "zstd" and "lz4" name).
//
//   usage: node write_pointcloud2_mcap.js OUT.mcap EXPECTED.json [NODE_MODULES [zstd|lz4]]
"use strict";
const { execFileSync } = require("child_process");
const fs = require("fs");
const path = require("path");

const [
  out,
  expectedPath,
  modules = path.join(__dirname, "../../.deps/node_modules"),
  compression = "",
] = process.argv.slice(2);
const { McapWriter } = require(path.join(modules, "@mcap/core"));
const { CdrWriter } = require(path.join(modules, "@foxglove/cdr"));
const { startMcap, cdrHeader } = require("./mcap_test_writer.js");

const T0_NS = 1700000000n * 1000000000n;
const PERIOD_NS = 100000000n;
const f32 = Math.fround;

function pose(w, p) {
  for (const v of [...p.t, ...p.q]) w.float64(v);
}

// Frame i's pose: a drive along x turning about z (q = x y z w).
function framePose(i) {
  const yaw = 0.1 * i;
  return { t: [2 * i, 0.5 * i, 0.25], q: [0, 0, Math.sin(yaw / 2), Math.cos(yaw / 2)] };
}

const FIELDS = [
  ["x", 0, 7],
  ["y", 4, 7],
  ["z", 8, 7],
  ["intensity", 16, 7],
  ["ring", 20, 4],
  ["time", 24, 7],
];
const STEP = 32;
const WIDTH = 3;
const HEIGHT = 2;
const ROW_STEP = WIDTH * STEP + 8;

function pointCloud2(stampNs, i, expected) {
  const data = new Uint8Array(HEIGHT * ROW_STEP).fill(0xee);
  const view = new DataView(data.buffer);
  for (let row = 0; row < HEIGHT; ++row) {
    for (let col = 0; col < WIDTH; ++col) {
      const k = row * WIDTH + col;
      const p = {
        x: f32(i + 0.5 * k),
        y: f32(-0.25 * k - i),
        z: f32(0.125 * k + 0.1),
        intensity: f32(k / 8),
        ring: row,
        time: f32(k * 1e-5),
      };
      const at = row * ROW_STEP + col * STEP;
      view.setFloat32(at + 0, p.x, true);
      view.setFloat32(at + 4, p.y, true);
      view.setFloat32(at + 8, p.z, true);
      view.setFloat32(at + 16, p.intensity, true);
      view.setUint16(at + 20, p.ring, true);
      view.setFloat32(at + 24, p.time, true);
      expected.push(p);
    }
  }
  const w = new CdrWriter();
  cdrHeader(w, stampNs, "lidar");
  w.uint32(HEIGHT);
  w.uint32(WIDTH);
  w.sequenceLength(FIELDS.length);
  for (const [name, offset, datatype] of FIELDS) {
    w.string(name);
    w.uint32(offset);
    w.uint8(datatype);
    w.uint32(1);
  }
  w.uint8(0); // is_bigendian
  w.uint32(STEP);
  w.uint32(ROW_STEP);
  w.uint8Array(data, true);
  w.uint8(1); // is_dense
  return w.data;
}

function odometry(stampNs, p) {
  const w = new CdrWriter();
  cdrHeader(w, stampNs, "map");
  w.string("lidar");
  pose(w, p);
  for (let k = 0; k < 36; ++k) w.float64(0);
  for (let k = 0; k < 6; ++k) w.float64(0); // twist
  for (let k = 0; k < 36; ++k) w.float64(0);
  return w.data;
}

function tf(stampNs, p) {
  const w = new CdrWriter();
  w.sequenceLength(2);
  cdrHeader(w, stampNs, "map");
  w.string("base_link");
  pose(w, { t: [100, 100, 100], q: [0, 0, 0, 1] });
  cdrHeader(w, stampNs, "map");
  w.string("lidar");
  pose(w, p);
  return w.data;
}

function poseStamped(stampNs, p) {
  const w = new CdrWriter();
  cdrHeader(w, stampNs, "map");
  pose(w, p);
  return w.data;
}

async function main() {
  const mcap = await startMcap(
    McapWriter,
    { profile: "ros2", library: "write_pointcloud2_mcap.js" },
    {
      chunkSize: 512,
      compressChunk: compression
        ? (chunkData) => ({
            compression,
            compressedData: execFileSync(compression, ["-c", "-q"], { input: chunkData }),
          })
        : undefined,
    },
  );
  const { add, cdrChannel: channel } = mcap;
  const points = await channel("/lidar/points", "sensor_msgs/msg/PointCloud2");
  const raw = await channel("/lidar/points_raw", "sensor_msgs/msg/PointCloud2");
  const odom = await channel("/odom", "nav_msgs/msg/Odometry");
  const tfc = await channel("/tf", "tf2_msgs/msg/TFMessage");
  const poses = await channel("/pose", "geometry_msgs/msg/PoseStamped");
  const t0 = T0_NS;
  const expected = { frames: [], stamps: [], poses: [] };
  // PoseStamped before the first frame and after the last, the same rotation: each frame's
  // interpolated pose is exactly known.
  const first = { t: [-1, 0, 0], q: [0, 0, Math.sin(0.15), Math.cos(0.15)] };
  const last = { t: [3, 0, 0], q: first.q };
  await add(poses, t0 - 50000000n, poseStamped(t0 - 50000000n, first));
  for (let i = 0; i < 3; ++i) {
    const stamp = t0 + BigInt(i) * PERIOD_NS;
    const p = framePose(i);
    await add(odom, stamp, odometry(stamp, p));
    await add(tfc, stamp, tf(stamp, p));
    const frame = [];
    await add(points, stamp, pointCloud2(stamp, i, frame));
    expected.frames.push(frame);
    expected.stamps.push(stamp.toString());
    expected.poses.push(p);
  }
  await add(raw, t0, pointCloud2(t0, 9, []));
  await add(poses, t0 + 250000000n, poseStamped(t0 + 250000000n, last));
  await mcap.writer.end();
  fs.writeFileSync(out, mcap.bytes());
  fs.writeFileSync(expectedPath, JSON.stringify(expected));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
