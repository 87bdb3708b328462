"""dejaview.torch: every frame exactly once per epoch across 1-4 DataLoader workers x 1-3 ranks,
the same order for the same (seed, epoch), another order for another epoch; decoding in real
worker processes gives the frames the store decodes."""
import collections

import numpy as np
import torch
import torch.utils.data

import dejaview
from dejaview.torch import FrameDataset, collate_frames, shard_positions


def test_shards_cover_every_frame_exactly_once():
    for count in (0, 1, 7, 60, 61):
        for world_size in (1, 2, 3):
            for num_workers in (1, 2, 3, 4):
                taken = collections.Counter()
                per_rank = []
                for rank in range(world_size):
                    mine = [p for w in range(num_workers)
                            for p in shard_positions(count, 7, 2, rank, world_size, w, num_workers)]
                    per_rank.append(len(mine))
                    taken.update(mine)
                assert sorted(taken) == list(range(count))
                assert set(taken.values()) <= {1}, (count, world_size, num_workers)
                assert max(per_rank, default=0) - min(per_rank, default=0) <= 1


def test_order_depends_on_seed_and_epoch_only():
    a = shard_positions(60, 7, 0, 1, 3, 2, 4)
    assert a == shard_positions(60, 7, 0, 1, 3, 2, 4)
    assert a != shard_positions(60, 7, 1, 1, 3, 2, 4)  # reshuffled by the epoch
    assert a != shard_positions(60, 8, 0, 1, 3, 2, 4)


def sequences(dataset, num_workers):
    loader = torch.utils.data.DataLoader(dataset, batch_size=2, num_workers=num_workers,
                                         collate_fn=collate_frames)
    return [s["sequence"] for batch in loader for s in batch]


def test_dataloader_workers_and_ranks_read_every_frame_once_per_epoch(tiny):
    for world_size in (1, 2, 3):
        for num_workers in (0, 2):
            for epoch in (0, 1):
                seen = []
                for rank in range(world_size):
                    ds = FrameDataset(str(tiny.store), maps=str(tiny.maps_root), seed=3,
                                      rank=rank, world_size=world_size)
                    ds.set_epoch(epoch)
                    got = sequences(ds, num_workers)
                    assert len(got) == len(ds)
                    seen += got
                assert sorted(seen) == list(range(6)), (world_size, num_workers, epoch)


def test_samples_are_the_stores_frames_as_tensors(tiny):
    ds = FrameDataset(str(tiny.store), {"vehicle": "veh-tiny"}, maps=str(tiny.maps_root), seed=1)
    store = dejaview.Store(str(tiny.store), maps=str(tiny.maps_root))
    by_sequence = {r.sequence: r for r in store.query()}
    loader = torch.utils.data.DataLoader(ds, batch_size=3, num_workers=2,
                                         collate_fn=collate_frames)
    count = 0
    for batch in loader:
        for s in batch:
            want = store.decode(by_sequence[s["sequence"]])
            assert s["points"].dtype == torch.float32 and s["points"].shape == (len(want), 3)
            assert np.array_equal(s["points"].numpy(), want.points)
            assert np.array_equal(s["intensity"].numpy(), want.intensity)
            assert s["vehicle"] == "veh-tiny"
            count += 1
    assert count == 6
