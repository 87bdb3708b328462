#!/usr/bin/python3
"""Writes a ROS 1 bag with the reference writer (Debian's python3-rosbag), holding the scene
write_pointcloud2_mcap.js writes, as ROS 1 messages: the same 3 organised PointCloud2 frames on
/lidar/points (padded rows, x y z intensity ring time) and a 4th on /lidar/points_raw,
nav_msgs/Odometry on /odom, tf2_msgs/TFMessage on /tf (map -> base_link, map -> lidar) and
geometry_msgs/PoseStamped on /pose before the first and after the last frame. Small chunks, so
that the bag holds several, compressed as asked.

usage: /usr/bin/python3 write_ros1_bag.py OUT.bag none|bz2|lz4
"""
import math
import struct
import sys

import genpy
import rosbag
from geometry_msgs.msg import Pose, PoseStamped, TransformStamped
from nav_msgs.msg import Odometry
from sensor_msgs.msg import PointCloud2, PointField
from std_msgs.msg import Header
from tf2_msgs.msg import TFMessage

T0_NS = 1700000000 * 10**9
PERIOD_NS = 100000000
WIDTH, HEIGHT, STEP = 3, 2, 32
ROW_STEP = WIDTH * STEP + 8


def f32(v):
    return struct.unpack("<f", struct.pack("<f", v))[0]


def stamp(ns):
    return genpy.Time(ns // 10**9, ns % 10**9)


def header(ns, frame_id):
    return Header(stamp=stamp(ns), frame_id=frame_id)


def pose(t, q):
    p = Pose()
    p.position.x, p.position.y, p.position.z = t
    p.orientation.x, p.orientation.y, p.orientation.z, p.orientation.w = q
    return p


def frame_pose(i):
    yaw = 0.1 * i
    return (2 * i, 0.5 * i, 0.25), (0, 0, math.sin(yaw / 2), math.cos(yaw / 2))


def cloud(ns, i):
    data = bytearray(b"\xee" * (HEIGHT * ROW_STEP))
    for row in range(HEIGHT):
        for col in range(WIDTH):
            k = row * WIDTH + col
            at = row * ROW_STEP + col * STEP
            struct.pack_into("<fff", data, at, f32(i + 0.5 * k), f32(-0.25 * k - i),
                             f32(0.125 * k + 0.1))
            struct.pack_into("<fHxxf", data, at + 16, f32(k / 8), row, f32(k * 1e-5))
    fields = [PointField(name, offset, datatype, 1) for name, offset, datatype in
              [("x", 0, 7), ("y", 4, 7), ("z", 8, 7), ("intensity", 16, 7), ("ring", 20, 4),
               ("time", 24, 7)]]
    return PointCloud2(header=header(ns, "lidar"), height=HEIGHT, width=WIDTH, fields=fields,
                       is_bigendian=False, point_step=STEP, row_step=ROW_STEP, data=bytes(data),
                       is_dense=True)


def transform(ns, child, t, q):
    m = TransformStamped(header=header(ns, "map"), child_frame_id=child)
    m.transform.translation.x, m.transform.translation.y, m.transform.translation.z = t
    r = m.transform.rotation
    r.x, r.y, r.z, r.w = q
    return m


def main():
    out, compression = sys.argv[1], sys.argv[2]
    with rosbag.Bag(out, "w", compression=compression, chunk_threshold=512) as bag:
        first = ((-1, 0, 0), (0, 0, math.sin(0.15), math.cos(0.15)))
        last = ((3, 0, 0), first[1])
        ns = T0_NS - 50000000
        bag.write("/pose", PoseStamped(header=header(ns, "map"), pose=pose(*first)), stamp(ns))
        for i in range(3):
            ns = T0_NS + i * PERIOD_NS
            t, q = frame_pose(i)
            odom = Odometry(header=header(ns, "map"), child_frame_id="lidar")
            odom.pose.pose = pose(t, q)
            bag.write("/odom", odom, stamp(ns))
            tf = TFMessage(transforms=[transform(ns, "base_link", (100, 100, 100), (0, 0, 0, 1)),
                                       transform(ns, "lidar", t, q)])
            bag.write("/tf", tf, stamp(ns))
            bag.write("/lidar/points", cloud(ns, i), stamp(ns))
        bag.write("/lidar/points_raw", cloud(T0_NS, 9), stamp(T0_NS))
        ns = T0_NS + 250000000
        bag.write("/pose", PoseStamped(header=header(ns, "map"), pose=pose(*last)), stamp(ns))


if __name__ == "__main__":
    main()
