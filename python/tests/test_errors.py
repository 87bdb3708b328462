"""Bad input raises dejaview's typed exceptions with the C++ message, and never crashes the
interpreter: every truncation and many corruptions of a real delta file and a real batch."""
import os
import random

import pytest

import dejaview
from conftest import FIXTURES, run


def test_exceptions_form_one_hierarchy():
    for cls in (dejaview.FormatError, dejaview.StoreError, dejaview.NotFoundError,
                dejaview.ArgumentError):
        assert issubclass(cls, dejaview.Error) and issubclass(cls, Exception)
    assert issubclass(dejaview.NotFoundError, dejaview.StoreError)
    assert issubclass(dejaview.ArgumentError, ValueError)


def test_every_truncation_and_corruption_of_a_delta_is_a_format_error(tiny):
    payload = (tiny.deltas / f"{tiny.names[1]}.dvd").read_bytes()
    decoder = dejaview.Decoder(tiny.map)
    for n in range(len(payload)):
        with pytest.raises(dejaview.FormatError):
            decoder.decode(payload[:n])
    rng = random.Random(53)
    for _ in range(300):
        bad = bytearray(payload)
        bad[rng.randrange(len(bad))] ^= 1 << rng.randrange(8)
        try:
            decoder.decode(bytes(bad))  # a flip the CRC does not cover may still decode
        except dejaview.FormatError:
            pass
    assert len(decoder.decode(payload)) > 0  # the decoder still works after all that


def test_bad_files_name_themselves(tiny, tmp_path):
    garbage = tmp_path / "garbage.dvd"
    garbage.write_bytes(b"\x00" * 64)
    with pytest.raises(dejaview.FormatError, match="garbage.dvd"):
        dejaview.Decoder().decode_file(str(garbage))
    with pytest.raises(dejaview.NotFoundError, match="missing.dvd"):
        dejaview.Decoder().decode_file(str(tmp_path / "missing.dvd"))
    with pytest.raises(dejaview.NotFoundError):
        dejaview.Decoder(str(tmp_path / "no-map"))
    with pytest.raises(dejaview.NotFoundError):
        dejaview.DeltaFolder(str(tmp_path / "no-deltas"))
    delta = (tiny.deltas / f"{tiny.names[1]}.dvd").read_bytes()
    with pytest.raises(dejaview.Error, match="map"):
        dejaview.Decoder().decode(delta)  # a delta frame without its map
    with pytest.raises(dejaview.ArgumentError):
        dejaview.Decoder().decode(delta, threads=0)


def test_every_truncation_and_corruption_of_a_batch_is_a_format_error(tiny, tmp_path):
    run("export", "--store", tiny.store, "--maps", tiny.maps_root, "--out", tmp_path / "p",
        "--layout", "packed", "--batch", "2")
    good = (tmp_path / "p" / "batch-000000.dvxb").read_bytes()
    assert len(dejaview.read_batch(str(tmp_path / "p" / "batch-000000.dvxb"))) == 2
    bad = tmp_path / "bad.dvxb"
    for n in list(range(0, 200)) + list(range(len(good) - 64, len(good))):
        bad.write_bytes(good[:n])
        with pytest.raises(dejaview.FormatError, match="bad.dvxb"):
            dejaview.read_batch(str(bad))
    rng = random.Random(7)
    for _ in range(200):
        flipped = bytearray(good)
        flipped[rng.randrange(len(flipped))] ^= 1 << rng.randrange(8)
        bad.write_bytes(bytes(flipped))
        with pytest.raises(dejaview.FormatError):  # the CRCs cover every byte after the header
            dejaview.read_batch(str(bad))
    version_1 = os.path.join(FIXTURES, "..", "fuzz", "corpus", "fuzz_export_batch", "version_1")
    with pytest.raises(dejaview.FormatError, match="version 1, expected 2"):
        dejaview.read_batch(version_1)
