#!/usr/bin/python3
"""Writes tests/data/pcd/open3d_*.pcd with Open3D's own PCD writer (issue 54: PCDs written by
Open3D read like PCL's). Run with Debian's python3-open3d (0.16): `/usr/bin/python3
tests/data/pcd/write_open3d_fixtures.py`. Open3D is needed only to regenerate the committed
files, never by the build or CI.

The cloud is 40 points whose float32 bits tests/base/open3d_pcd_test.cpp recomputes on its own:
32 from single-precision arithmetic that C++ float does identically (IEEE division and
multiplication, correctly rounded, no multiply-add to fuse), and 8 made of bit patterns that
stress a text round trip (denormals, -0, the largest float, 2^24 + 2, 1 + 1 ulp).

Two writers, each in DATA ascii, binary and binary_compressed:
- open3d_*.pcd: the tensor API (o3d.t), the only one that carries an intensity field
  (x y z intensity, all F 4; the ASCII lines end in a space);
- open3d_legacy_*.pcd: the legacy o3d.geometry API most scripts use, which keeps float64 points
  and writes them as F 4, with normals and a packed rgb that a reader must skip.
"""
import os

import numpy as np
import open3d as o3d

# Keep in step with kSpecialBits in tests/base/open3d_pcd_test.cpp.
SPECIAL_BITS = [
    0x00000001,  # smallest denormal: %.10g prints 1.401298464e-45, strtof underflows
    0x007FFFFF,  # largest denormal
    0x00800000,  # smallest normal
    0x80000000,  # -0
    0x7F7FFFFF,  # largest float: 3.402823466e+38
    0xFF7FFFFF,  # its negative
    0x4B800001,  # 2^24 + 2, where float32 steps by 2
    0x3F800001,  # 1 + 1 ulp: 1.00000012
]


def cloud():
    i = np.arange(32, dtype=np.float32)
    regular = np.stack(
        [i / np.float32(7), i * np.float32(-0.1), np.float32(1000) + i / np.float32(3),
         i / np.float32(9)], axis=1)
    n = len(SPECIAL_BITS)
    special = np.array(
        [[SPECIAL_BITS[(k + c) % n] for c in range(4)] for k in range(n)],
        dtype=np.uint32).view(np.float32)
    table = np.concatenate([regular, special]).astype(np.float32)
    return table[:, :3].copy(), table[:, 3:].copy()


def main():
    out = os.path.dirname(os.path.abspath(__file__))
    xyz, intensity = cloud()
    kinds = [("ascii", dict(write_ascii=True)),
             ("binary", dict(write_ascii=False, compressed=False)),
             ("binary_compressed", dict(write_ascii=False, compressed=True))]

    tensor = o3d.t.geometry.PointCloud()
    tensor.point.positions = o3d.core.Tensor(xyz)
    tensor.point.intensity = o3d.core.Tensor(intensity)
    for kind, options in kinds:
        path = os.path.join(out, "open3d_" + kind + ".pcd")
        assert o3d.t.io.write_point_cloud(path, tensor, **options), path

    legacy = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(xyz.astype(np.float64)))
    k = np.arange(len(xyz), dtype=np.float64)
    legacy.normals = o3d.utility.Vector3dVector(
        np.stack([np.cos(k), np.sin(k), np.zeros_like(k)], axis=1))
    legacy.colors = o3d.utility.Vector3dVector(
        np.stack([k / 40, 1 - k / 40, np.full_like(k, 0.5)], axis=1))
    for kind, options in kinds:
        path = os.path.join(out, "open3d_legacy_" + kind + ".pcd")
        assert o3d.io.write_point_cloud(path, legacy, **options), path


if __name__ == "__main__":
    main()
