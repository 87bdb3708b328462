"""dejaview.torch: every frame exactly once per epoch across 1-4 DataLoader workers x 1-3 ranks
(or every rank the same count, padded or dropped), the same order for the same (seed, epoch),
another order for another epoch, set_epoch reaching persistent workers; decoding in real worker
processes gives the frames the store decodes."""
import collections
import os

import numpy as np
import torch
import torch.utils.data

import pytest

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


def permutation(count, seed, epoch):
    generator = torch.Generator()
    generator.manual_seed(seed * 1_000_003 + epoch)
    return torch.randperm(count, generator=generator).tolist()


def test_even_ranks_pad_and_drop_give_every_rank_the_same_count():
    for count in (0, 1, 2, 7, 60, 61):
        order = permutation(count, 7, 2)
        for world_size in (1, 2, 3):
            for num_workers in (1, 2, 3, 4):
                for mode in ("pad", "drop"):
                    per_rank = [[p for w in range(num_workers)
                                 for p in shard_positions(count, 7, 2, rank, world_size, w,
                                                          num_workers, mode)]
                                for rank in range(world_size)]
                    taken = collections.Counter(p for mine in per_rank for p in mine)
                    where = (count, world_size, num_workers, mode)
                    if mode == "pad":
                        want = -(-count // world_size)
                        # Every frame, then the permutation's first ones again (all of it again,
                        # and again, when there are fewer frames than ranks).
                        extra = (order * world_size)[:want * world_size - count]
                        assert taken == collections.Counter(order + extra), where
                    else:
                        want = count // world_size
                        # Every frame but the permutation's last count mod world_size, once.
                        assert taken == collections.Counter(order[:want * world_size]), where
                    assert [len(mine) for mine in per_rank] == [want] * world_size, where


def test_even_ranks_refuses_an_unknown_mode():
    with pytest.raises(ValueError):
        shard_positions(6, 0, 0, 0, 1, 0, 1, "round")


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


def test_dataloader_ranks_padded_or_dropped_yield_equal_counts(tiny):
    # Five of the six frames: 2 and 3 ranks do not divide them.
    for world_size in (2, 3):
        for mode in ("pad", "drop"):
            seen = collections.Counter()
            counts = []
            for rank in range(world_size):
                ds = FrameDataset(str(tiny.store), {"limit": 5}, maps=str(tiny.maps_root), seed=3,
                                  rank=rank, world_size=world_size, even_ranks=mode)
                got = sequences(ds, 2)
                assert len(got) == len(ds)
                counts.append(len(got))
                seen.update(got)
            want = -(-5 // world_size) if mode == "pad" else 5 // world_size
            assert counts == [want] * world_size, (world_size, mode)
            if mode == "pad":
                assert set(seen) == set(range(5)) and sum(seen.values()) == want * world_size
            else:
                assert set(seen.values()) == {1} and len(seen) == want * world_size


def test_set_epoch_reaches_persistent_workers(tiny):
    ds = FrameDataset(str(tiny.store), maps=str(tiny.maps_root), seed=5,
                      transform=lambda frame: (frame.sequence, os.getpid()))
    records = dejaview.Store(str(tiny.store)).query()

    def expected(epoch):
        # Batches of one alternate between the two workers, each in its shard's order.
        shards = [[records[p].sequence for p in shard_positions(6, 5, epoch, 0, 1, w, 2)]
                  for w in (0, 1)]
        return [s for pair in zip(*shards) for s in pair]
    # What a worker left at an older epoch would yield differs from every epoch's order.
    assert len({tuple(expected(e)) for e in (0, 1, 2)}) == 3
    loader = torch.utils.data.DataLoader(ds, batch_size=1, num_workers=2,
                                         persistent_workers=True, collate_fn=collate_frames)
    workers = set()
    for epoch in (0, 1, 2, 1):
        ds.set_epoch(epoch)
        got = [s for batch in loader for s in batch]
        assert [sequence for sequence, _ in got] == expected(epoch), epoch
        workers |= {pid for _, pid in got}
    assert len(workers) == 2  # the same two processes served every epoch


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
            assert s["T_map_sensor"].dtype == torch.float64
            assert np.array_equal(s["T_map_sensor"].numpy(), want.T_map_sensor)
            # From a worker: the three tensors are views of one shared-memory segment.
            storage = s["points"].storage()
            assert storage.is_shared()
            assert {t.storage().data_ptr() for t in (s["points"], s["intensity"],
                                                     s["T_map_sensor"])} == {storage.data_ptr()}
            assert s["vehicle"] == "veh-tiny"
            count += 1
    assert count == 6
