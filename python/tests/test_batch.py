"""Packed export batches read as numpy views on their 16-byte aligned point arrays: the same
frames as the KITTI-layout export, and the same bytes from any number of export threads."""
import os

import numpy as np

import dejaview
from conftest import kitti_bin, run


def export(coded, out, *args):
    run("export", "--store", coded.store, "--maps", coded.maps_root, "--out", out, *args)
    return out


def test_batches_hold_the_kitti_exports_frames_as_aligned_views(tiny, tmp_path):
    packed = export(tiny, tmp_path / "packed", "--layout", "packed", "--batch", "4", "--seed", "5")
    flat = export(tiny, tmp_path / "kitti", "--layout", "kitti", "--seed", "5")
    frames = [f for name in ("batch-000000.dvxb", "batch-000001.dvxb")
              for f in dejaview.read_batch(str(packed / name))]
    assert len(frames) == 6
    assert sorted(f.sequence for f in frames) == list(range(6))
    for i, f in enumerate(frames):
        want = kitti_bin(flat / "velodyne" / f"{i:06d}.bin")
        assert np.array_equal(f.xyzi, want)
        assert np.array_equal(f.points, want[:, :3]) and np.array_equal(f.intensity, want[:, 3])
        assert f.xyzi.ctypes.data % 16 == 0  # in place, 16-byte aligned
        assert np.shares_memory(f.points, f.xyzi) and np.shares_memory(f.intensity, f.xyzi)
        assert f.vehicle == "veh-tiny" and f.drive == "tiny-0"


def test_export_threads_write_the_same_bytes(tiny, tmp_path):
    outs = [export(tiny, tmp_path / f"t{n}", "--layout", "packed", "--batch", "2", "--seed", "9",
                   "--threads", n) for n in (1, 3)]
    names = sorted(os.listdir(outs[0]))
    assert names == sorted(os.listdir(outs[1])) and len(names) == 4  # 3 batches, frames.txt
    for name in names:
        assert (outs[0] / name).read_bytes() == (outs[1] / name).read_bytes(), name
