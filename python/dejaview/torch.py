"""PyTorch input pipeline: an IterableDataset over a frame query, sharded deterministically across
DataLoader workers and torch.distributed ranks.

For an epoch e and a seed s, the query's frames are permuted by torch.randperm with a generator
seeded s * 1_000_003 + e (the same on every rank and worker); rank r of R takes positions r,
r + R, r + 2R, ... of the permutation, and its worker w of W every W-th of those from the w-th:
every frame exactly once per epoch across all workers and ranks (a rank's share does not depend
on its number of workers, so len() is known before they start), a new order
each epoch (set_epoch), the same order for the same (seed, epoch) on any machine. Each worker
opens the store itself (after the fork) and decodes its frames there, reading them through the
store's multi-path reader.

Ranks then differ by at most one frame, and a distributed step whose ranks run different counts
of batches waits forever; even_ranks makes them equal as torch's DistributedSampler does: "pad"
(its drop_last=False) repeats the permutation's first frames after its end up to a multiple of R,
"drop" (drop_last=True) leaves out its last N mod R frames.
"""
import os

import torch
import torch.distributed
import torch.utils.data

from . import Store


EVEN_RANKS = (None, "pad", "drop")


def rank_count(count, world_size, even_ranks, rank=0):
    """Frames rank `rank` takes in an epoch out of `count`."""
    if even_ranks == "pad":
        return -(-count // world_size)
    if even_ranks == "drop":
        return count // world_size
    return len(range(rank, count, world_size))


def shard_positions(count, seed, epoch, rank, world_size, worker_id, num_workers,
                    even_ranks=None):
    """Indices into a query's frames that one worker of one rank takes in an epoch, in order."""
    if not (0 <= rank < world_size and 0 <= worker_id < num_workers):
        raise ValueError(f"rank {rank} of {world_size}, worker {worker_id} of {num_workers}")
    if even_ranks not in EVEN_RANKS:
        raise ValueError(f"even_ranks {even_ranks!r} is not None, 'pad' or 'drop'")
    generator = torch.Generator()
    generator.manual_seed(seed * 1_000_003 + epoch)
    order = torch.randperm(count, generator=generator).tolist()
    total = rank_count(count, world_size, even_ranks) * world_size
    if even_ranks == "pad" and count > 0:
        # As many whole repeats as a tiny query needs (fewer frames than ranks), then the rest.
        order = (order * -(-total // count))[:total]
    elif even_ranks == "drop":
        order = order[:total]
    return order[rank::world_size][worker_id::num_workers]


def frame_tensors(frame):
    """The default sample: points (N x 3 float32), intensity (N float32) and T_map_sensor (4 x 4
    float64) as tensors, with the frame's identity.

    In the caller's process the point tensors share the decoded buffers (no copy). In a
    DataLoader worker all three are views of one shared-memory storage, filled once: torch sends
    a worker's tensors to the main process through shared memory, one segment and one file
    descriptor per storage, and its own move would copy each of the three into a segment of its
    own (three segments, three descriptors handed over a socket, for every frame).
    """
    record = frame.record
    sample = {
        "vehicle": record.vehicle if record else "",
        "sequence": frame.sequence,
        "timestamp_ns": frame.timestamp_ns,
    }
    if torch.utils.data.get_worker_info() is None:
        sample["points"] = torch.from_numpy(frame.points)
        sample["intensity"] = torch.from_numpy(frame.intensity)
        sample["T_map_sensor"] = torch.from_numpy(frame.T_map_sensor)
        return sample
    n = len(frame)
    # [T_map_sensor: 16 float64 = 32 float32][points: 3n][intensity: n]; the pose first keeps its
    # float64 view 8-byte aligned.
    storage = torch.empty(32 + 4 * n, dtype=torch.float32).share_memory_()
    pose = storage[:32].view(torch.float64).view(4, 4)
    points = storage[32:32 + 3 * n].view(n, 3)
    intensity = storage[32 + 3 * n:]
    pose.copy_(torch.from_numpy(frame.T_map_sensor))
    points.copy_(torch.from_numpy(frame.points))
    intensity.copy_(torch.from_numpy(frame.intensity))
    sample.update(points=points, intensity=intensity, T_map_sensor=pose)
    return sample


def collate_frames(samples):
    """A batch as a list of samples: frames have different point counts, so they are not
    stacked (a model's voxeliser or padding step does that)."""
    return samples


class FrameDataset(torch.utils.data.IterableDataset):
    """The frames of a store query, decoded in the DataLoader's workers.

    store: the server's store folder; query: keyword arguments of Store.query (vehicle,
    start_ns, end_ns, near, radius_m, limit); config, index, maps: as Store's. With config (a
    remote tier), store is a folder of the reader's own and every process opens the store in a
    subfolder of it (rank<r>-query, rank<r>-worker<w>): a store with a remote tier keeps its copy
    journal in its folder, which two processes must not open at once. rank and
    world_size default to torch.distributed's when it is initialised, else 0 and 1.
    even_ranks: None (every frame once, ranks may differ by one frame), "pad" or "drop" (every
    rank the same count; the module's docstring). transform: frame -> sample (default
    frame_tensors). Call set_epoch(e) before each epoch; it reaches the workers, persistent ones
    included (persistent_workers=True), through a value in shared memory. A worker opens the store
    once and keeps it across epochs when persistent.
    """

    def __init__(self, store, query=None, *, config=None, index=None, maps=None, seed=0,
                 rank=None, world_size=None, even_ranks=None, transform=frame_tensors, tiers=(),
                 prefetch=8):
        super().__init__()
        self.open_args = dict(config=config, index=index, maps=maps)
        self.store_path = store
        distributed = torch.distributed.is_available() and torch.distributed.is_initialized()
        if world_size is None:
            world_size = torch.distributed.get_world_size() if distributed else 1
        if rank is None:
            rank = torch.distributed.get_rank() if distributed else 0
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is not in 0..{world_size - 1}")
        if even_ranks not in EVEN_RANKS:
            raise ValueError(f"even_ranks {even_ranks!r} is not None, 'pad' or 'drop'")
        self.rank, self.world_size, self.even_ranks = rank, world_size, even_ranks
        self.seed = seed
        # The epoch lives in shared memory: a worker that persists across epochs (forked, or
        # spawned: torch shares the storage when it pickles the dataset for the worker) reads the
        # value the main process set last, not the one it was created with.
        self._epoch = torch.zeros((), dtype=torch.int64).share_memory_()
        self._store = None  # a DataLoader worker's own, opened on its first epoch
        self.transform, self.tiers, self.prefetch = transform, list(tiers), prefetch
        # The query runs here, once; the store is closed again before any worker forks (a
        # worker opens its own).
        self.records = self._open("query").query(**(query or {}))

    def _open(self, who):
        path = self.store_path
        if self.open_args["config"] is not None:
            path = os.path.join(path, f"rank{self.rank}-{who}")
            os.makedirs(path, exist_ok=True)
        return Store(path, **self.open_args)

    @property
    def epoch(self):
        return int(self._epoch)

    @epoch.setter
    def epoch(self, epoch):
        self.set_epoch(epoch)

    def set_epoch(self, epoch):
        self._epoch.fill_(epoch)

    def __len__(self):
        """Frames this rank yields in an epoch (over all its workers)."""
        return rank_count(len(self.records), self.world_size, self.even_ranks, self.rank)

    def shard(self, worker_id=0, num_workers=1):
        """The records one worker of this rank reads this epoch, in order."""
        positions = shard_positions(len(self.records), self.seed, self.epoch, self.rank,
                                    self.world_size, worker_id, num_workers, self.even_ranks)
        return [self.records[i] for i in positions]

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        if info is None:
            # In the caller's process, open for this pass only: a DataLoader may fork workers from
            # it later, and a store's threads and index connection do not survive a fork.
            worker_id, num_workers = 0, 1
            store = self._open("worker0")
        else:
            # A worker's own (its copy of the dataset), kept for its next epochs when persistent.
            worker_id, num_workers = info.id, info.num_workers
            if self._store is None:
                self._store = self._open(f"worker{worker_id}")
            store = self._store
        records = self.shard(worker_id, num_workers)
        for frame in store.read(records, tiers=self.tiers, prefetch=self.prefetch):
            yield self.transform(frame)
