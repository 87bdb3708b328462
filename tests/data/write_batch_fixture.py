#!/usr/bin/python3
"""Writes tests/fuzz/corpus/fuzz_export_batch/two_frames from docs/export-format.md alone.

An independent writer (no dejaview code): BatchFormat.DecodesAFileWrittenFromTheSpec decodes
its output with the C++ reader, which pins the spec to the code. Run from the repository root.
"""
import struct


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(crc):
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def text(s):
    b = s.encode()
    assert len(b) < 128  # a one-byte LEB128 length
    return bytes([len(b)]) + b


def frame(body_offset, sequence, points):
    head = text("veh-1") + text("drive-0") + struct.pack("<IQq", 3, sequence,
                                                         1700000000000000000 + sequence)
    head += text("00ff00ff00ff00ff")
    head += struct.pack("<12d", 1, 0, 0, 10.5, 0, 1, 0, -2, 0, 0, 1, 1.7)
    head += struct.pack("<I", len(points))
    head += bytes((16 - (body_offset + len(head)) % 16) % 16)  # points 16-byte aligned in the file
    return head + b"".join(struct.pack("<4f", *p) for p in points)


def batch(frames):
    out = struct.pack("<III", 0x42585644, 2, len(frames))
    for sequence, points in frames:
        body = frame(len(out) + 8, sequence, points)
        out += struct.pack("<II", len(body), masked(crc32c(body))) + body
    return out


if __name__ == "__main__":
    data = batch([(7, [(1, 2, 3, 0.5), (4, 5, 6, 0.25)]), (8, [(-1, 0, 0.5, 1)])])
    with open("tests/fuzz/corpus/fuzz_export_batch/two_frames", "wb") as f:
        f.write(data)
