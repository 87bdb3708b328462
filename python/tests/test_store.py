"""A store filled by the server's ingest: queries by vehicle, time and place return exactly the
CLI's rows (dejaview query --json), and frames read through the multi-path reader decode to
exactly what the C++ decoder made of their delta files."""
import json
import os
import pickle

import numpy as np
import pytest
import torch.utils.data

import dejaview
from dejaview.torch import FrameDataset
from conftest import kitti_bin, make_store, run, xyzi

T0 = 1_700_000_000_000_000_000  # make_store: frame i at T0 + i * 100 ms


def cli_rows(store, *args):
    return json.loads(run("query", "--store", store, "--json", *args))["frames"]


def assert_same_rows(records, rows):
    assert len(records) == len(rows)
    for r, j in zip(records, rows):
        assert (r.vehicle, r.sensor_id, r.source_epoch, r.sequence, r.drive, r.timestamp_ns,
                r.map_version, r.bytes, r.object) == (
                    j["vehicle"], j["sensor_id"], j["source_epoch"], j["sequence"], j["drive"],
                    j["timestamp_ns"], j["map_version"], j["bytes"], j["object"])
        assert r.T_map_sensor[:3].ravel().tolist() == j["T_map_sensor"]


def test_queries_by_vehicle_time_and_place_match_the_cli(tiny):
    store = dejaview.Store(str(tiny.store), maps=str(tiny.maps_root))
    everything = store.query()
    assert [r.sequence for r in everything] == list(range(6))
    assert_same_rows(everything, cli_rows(tiny.store))
    assert store.query(vehicle="nobody") == []
    window = store.query(vehicle="veh-tiny", start_ns=T0 + 100_000_000, end_ns=T0 + 400_000_000)
    assert [r.sequence for r in window] == [1, 2, 3]  # start <= t < end
    assert_same_rows(window, cli_rows(tiny.store, "--from", "1700000000.1", "--to",
                                      "1700000000.4"))
    # The frames' poses are 0.3 m apart along x (the refined pose is within centimetres).
    near = store.query(near=(0.9, 0, 0), radius_m=0.4)
    assert [r.sequence for r in near] == [2, 3, 4]
    assert_same_rows(near, cli_rows(tiny.store, "--near", "0.9,0,0", "--radius", "0.4"))
    assert [r.sequence for r in store.query(limit=2)] == [0, 1]


def test_read_decodes_every_record_like_the_cli(tiny):
    store = dejaview.Store(str(tiny.store), maps=str(tiny.maps_root))
    records = store.query()[::-1]  # any order: the reader returns the order asked
    frames = list(store.read(records, tiers=["disk"]))
    assert [f.record.sequence for f in frames] == [r.sequence for r in records]
    for f in frames:
        want = kitti_bin(tiny.decoded / "velodyne" / f"{tiny.names[f.record.sequence]}.bin")
        assert np.array_equal(xyzi(f).view(np.uint32), want.view(np.uint32))
    single = store.decode(records[0])
    assert np.array_equal(single.points, frames[0].points)


def test_kitti_frames_from_the_store_are_bit_exact(kitti):
    store = dejaview.Store(str(kitti.store), maps=str(kitti.maps_root))
    records = store.query(vehicle="veh-kitti")
    assert len(records) == len(kitti.names) == 10
    for f in store.read(records):
        want = kitti_bin(kitti.decoded / "velodyne" / f"{kitti.names[f.record.sequence]}.bin")
        assert np.array_equal(xyzi(f).view(np.uint32), want.view(np.uint32))


def test_cold_remote_tier_reads_the_same_frames(tiny, s3, tmp_path):
    """The S3 tier through the tiers' YAML: a store whose objects were copied to the bucket,
    read by a reader whose disk tier is empty (a training node), remote tier only."""
    tiers = s3("tiny")
    (tmp_path / "node").mkdir()
    make_store(tmp_path / "server", "veh-tiny", "tiny-0", tiny.deltas, tiers)
    cold = dejaview.Store(str(tmp_path / "node"), config=str(tiers),
                          index=str(tmp_path / "server" / "index.sqlite"),
                          maps=str(tiny.maps_root))
    records = cold.query()
    assert len(records) == 6
    for f in cold.read(records, tiers=["remote"]):
        want = kitti_bin(tiny.decoded / "velodyne" / f"{tiny.names[f.record.sequence]}.bin")
        assert np.array_equal(xyzi(f).view(np.uint32), want.view(np.uint32))
    with pytest.raises(dejaview.NotFoundError):  # nothing on the node's disk
        next(iter(cold.read(records[:1], tiers=["disk"])))
    # Two DataLoader workers of a training node, each opening the store on the bucket in a
    # folder of its own under the node's (one folder shared by both raced on the copy journal).
    ds = FrameDataset(str(tmp_path / "node"), config=str(tiers),
                      index=str(tmp_path / "server" / "index.sqlite"), maps=str(tiny.maps_root),
                      tiers=["remote"], transform=lambda f: f.record.sequence)
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2)
    assert sorted(loader) == list(range(6))
    assert sorted(os.listdir(tmp_path / "node")) == ["copy.journal", "objects", "rank0-query",
                                                     "rank0-worker0", "rank0-worker1"]


def test_records_pickle_to_the_same_record(tiny):
    store = dejaview.Store(str(tiny.store), maps=str(tiny.maps_root))
    record = store.query()[4]
    back = pickle.loads(pickle.dumps(record))
    assert (back.vehicle, back.sequence, back.object, back.timestamp_ns) == (
        record.vehicle, record.sequence, record.object, record.timestamp_ns)
    assert np.array_equal(back.T_map_sensor, record.T_map_sensor)
    assert np.array_equal(store.decode(back).points, store.decode(record).points)


def test_store_errors_are_typed(tiny, tmp_path):
    with pytest.raises(dejaview.NotFoundError, match="no such store folder"):
        dejaview.Store(str(tmp_path / "nowhere"))
    store = dejaview.Store(str(tiny.store), maps=str(tmp_path / "no-maps"))
    record = store.query()[1]
    with pytest.raises(dejaview.NotFoundError, match=record.map_version):
        store.decode(record)  # its map version is not under the maps root
    with pytest.raises(dejaview.ArgumentError, match="not memory, disk or remote"):
        store.read([record], tiers=["tape"])
    with pytest.raises(dejaview.ArgumentError, match="go together"):
        store.query(near=(0, 0, 0))
    with pytest.raises(dejaview.ArgumentError, match="radius_m < 0"):
        store.query(near=(0, 0, 0), radius_m=-1)
    with pytest.raises(dejaview.StoreError):  # NotFoundError is a StoreError, a dejaview.Error
        store.decode(record)
