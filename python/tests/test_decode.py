"""Python decoding equals the C++ decoder (the CLI) bit for bit, and hands numpy the decoded
buffers without a copy."""
import gc
import os

import numpy as np

import dejaview
from conftest import FIXTURES, kitti_bin, run, xyzi


def assert_decodes_like_the_cli(coded):
    frames = dejaview.DeltaFolder(coded.deltas, map=coded.map)
    assert len(frames) == len(coded.names) > 0
    for name, frame in zip(coded.names, frames):
        want = kitti_bin(coded.decoded / "velodyne" / f"{name}.bin")
        got = xyzi(frame)
        assert got.shape == want.shape, name
        # Bit for bit: compare the float32 bit patterns (NaN-safe, -0.0 distinct).
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), name
    return frames


def test_tiny_drive_decodes_like_the_cli(tiny):
    frames = assert_decodes_like_the_cli(tiny)
    assert not frames[1].intra  # coded against the map
    assert frames[1].map_version == frames.decoder.map_version


def test_kitti_decodes_like_the_cli(kitti):
    frames = assert_decodes_like_the_cli(kitti)
    assert sum(not f.intra for f in frames) > 0


def test_intra_frame_decodes_like_the_cli(tmp_path):
    source = os.path.join(FIXTURES, "kitti_tiny.bin")
    run("encode", source, "--out", tmp_path / "f.dvd")
    run("decode", tmp_path / "f.dvd", "--out", tmp_path / "f.bin")
    frame = dejaview.Decoder().decode((tmp_path / "f.dvd").read_bytes())
    assert frame.intra and frame.map_version == ""
    want = kitti_bin(tmp_path / "f.bin")
    assert np.array_equal(xyzi(frame).view(np.uint32), want.view(np.uint32))
    assert len(frame) == len(want) > 1000  # within the tolerance, some of the 2000 merge


def test_arrays_view_the_decoded_frame_and_keep_it_alive(tiny):
    decoder = dejaview.Decoder(tiny.map)
    frame = decoder.decode_file(str(tiny.deltas / f"{tiny.names[3]}.dvd"))
    points, intensity = frame.points, frame.intensity
    assert points.dtype == np.float32 and points.shape == (len(frame), 3)
    assert intensity.dtype == np.float32 and intensity.shape == (len(frame),)
    assert not points.flags.owndata and not intensity.flags.owndata
    assert np.shares_memory(points, frame.points)  # every access is a view of the same buffer
    expected = points.copy()
    del frame, decoder
    gc.collect()
    assert np.array_equal(points, expected)  # the views keep the frame alive


def test_threads_decode_the_same_frame(kitti):
    decoder = dejaview.Decoder(kitti.map)
    payload = (kitti.deltas / f"{kitti.names[5]}.dvd").read_bytes()
    one, four = decoder.decode(payload), decoder.decode(payload, threads=4)
    assert np.array_equal(xyzi(one).view(np.uint32), xyzi(four).view(np.uint32))
    assert np.array_equal(one.T_map_sensor, four.T_map_sensor)
