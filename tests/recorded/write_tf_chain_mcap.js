// Writes a ROS 2 style MCAP whose sensor pose is a chain of tf transforms, with the reference
// implementations (@mcap/core's McapWriter, @foxglove/cdr's CdrWriter; npm, in .deps), as a
// robot's tf tree is recorded:
//   /tf_static  tf2_msgs/msg/TFMessage, once, stamped 1 s before the first frame:
//               base_link -> lidar (t 1.5 0 2, yaw 0.25) and base_link -> imu
//   /tf         tf2_msgs/msg/TFMessage: map -> odom at each frame's stamp (t 10i 1 0, yaw 0.2i);
//               odom -> base_link 50 ms before each frame and after the last (sample j:
//               t j -j 0, yaw 0.3), so each frame falls halfway between two of its samples;
//               odom -> wheel beside it
//   /lidar/points  sensor_msgs/msg/PointCloud2, frame "lidar": 3 frames 100 ms apart, one point
//
//   usage: node write_tf_chain_mcap.js OUT.mcap [NODE_MODULES]
"use strict";
const fs = require("fs");
const path = require("path");

const [out, modules = path.join(__dirname, "../../.deps/node_modules")] = process.argv.slice(2);
const { McapWriter } = require(path.join(modules, "@mcap/core"));
const { CdrWriter } = require(path.join(modules, "@foxglove/cdr"));
const { startMcap, cdrHeader } = require("./mcap_test_writer.js");

const T0_NS = 1700000000n * 1000000000n;
const PERIOD_NS = 100000000n;

function yawPose(t, yaw) {
  return { t, q: [0, 0, Math.sin(yaw / 2), Math.cos(yaw / 2)] };
}

// transforms: [parent, child, pose] all stamped stampNs.
function tf(stampNs, transforms) {
  const w = new CdrWriter();
  w.sequenceLength(transforms.length);
  for (const [parent, child, p] of transforms) {
    cdrHeader(w, stampNs, parent);
    w.string(child);
    for (const v of [...p.t, ...p.q]) w.float64(v);
  }
  return w.data;
}

function pointCloud2(stampNs, i) {
  const data = new Uint8Array(16);
  const view = new DataView(data.buffer);
  [1, 2, 3, i].forEach((v, k) => view.setFloat32(4 * k, v, true));
  const w = new CdrWriter();
  cdrHeader(w, stampNs, "lidar");
  w.uint32(1); // height
  w.uint32(1); // width
  w.sequenceLength(4);
  ["x", "y", "z", "intensity"].forEach((name, k) => {
    w.string(name);
    w.uint32(4 * k);
    w.uint8(7); // FLOAT32
    w.uint32(1);
  });
  w.uint8(0); // is_bigendian
  w.uint32(16); // point_step
  w.uint32(16); // row_step
  w.uint8Array(data, true);
  w.uint8(1); // is_dense
  return w.data;
}

async function main() {
  const mcap = await startMcap(McapWriter, { profile: "ros2", library: "write_tf_chain_mcap.js" });
  const { add, cdrChannel: channel } = mcap;
  const statics = await channel("/tf_static", "tf2_msgs/msg/TFMessage");
  const tfc = await channel("/tf", "tf2_msgs/msg/TFMessage");
  const points = await channel("/lidar/points", "sensor_msgs/msg/PointCloud2");
  const staticStamp = T0_NS - 1000000000n;
  await add(
    statics,
    staticStamp,
    tf(staticStamp, [
      ["base_link", "lidar", yawPose([1.5, 0, 2], 0.25)],
      ["base_link", "imu", yawPose([0, 0, 1], 0)],
    ]),
  );
  const odomBase = async (j) => {
    const stamp = T0_NS - PERIOD_NS / 2n + BigInt(j) * PERIOD_NS;
    await add(
      tfc,
      stamp,
      tf(stamp, [
        ["odom", "base_link", yawPose([j, -j, 0], 0.3)],
        ["odom", "wheel", yawPose([0, 0, 0], j)],
      ]),
    );
  };
  for (let i = 0; i < 3; ++i) {
    const stamp = T0_NS + BigInt(i) * PERIOD_NS;
    await odomBase(i);
    await add(tfc, stamp, tf(stamp, [["map", "odom", yawPose([10 * i, 1, 0], 0.2 * i)]]));
    await add(points, stamp, pointCloud2(stamp, i));
  }
  await odomBase(3);
  await mcap.writer.end();
  fs.writeFileSync(out, mcap.bytes());
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
