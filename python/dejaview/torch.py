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
"""
import os

import torch
import torch.distributed
import torch.utils.data

from . import Store


def shard_positions(count, seed, epoch, rank, world_size, worker_id, num_workers):
    """Indices into a query's frames that one worker of one rank takes in an epoch, in order."""
    if not (0 <= rank < world_size and 0 <= worker_id < num_workers):
        raise ValueError(f"rank {rank} of {world_size}, worker {worker_id} of {num_workers}")
    generator = torch.Generator()
    generator.manual_seed(seed * 1_000_003 + epoch)
    order = torch.randperm(count, generator=generator)
    return order[rank::world_size][worker_id::num_workers].tolist()


def frame_tensors(frame):
    """The default sample: points (N x 3) and intensity (N) as tensors sharing the decoded
    buffers (no copy), with the pose and the frame's identity."""
    record = frame.record
    return {
        "points": torch.from_numpy(frame.points),
        "intensity": torch.from_numpy(frame.intensity),
        "T_map_sensor": torch.from_numpy(frame.T_map_sensor),
        "vehicle": record.vehicle if record else "",
        "sequence": frame.sequence,
        "timestamp_ns": frame.timestamp_ns,
    }


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
    transform: frame -> sample (default frame_tensors). Call set_epoch(e) before each epoch
    (workers are created per epoch unless persistent_workers, which would keep the old epoch).
    """

    def __init__(self, store, query=None, *, config=None, index=None, maps=None, seed=0,
                 rank=None, world_size=None, transform=frame_tensors, tiers=(), prefetch=8):
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
        self.rank, self.world_size = rank, world_size
        self.seed, self.epoch = seed, 0
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

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __len__(self):
        """Frames this rank yields in an epoch (over all its workers)."""
        return len(range(self.rank, len(self.records), self.world_size))

    def shard(self, worker_id=0, num_workers=1):
        """The records one worker of this rank reads this epoch, in order."""
        positions = shard_positions(len(self.records), self.seed, self.epoch, self.rank,
                                    self.world_size, worker_id, num_workers)
        return [self.records[i] for i in positions]

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        worker_id, num_workers = (info.id, info.num_workers) if info else (0, 1)
        records = self.shard(worker_id, num_workers)
        store = self._open(f"worker{worker_id}")
        for frame in store.read(records, tiers=self.tiers, prefetch=self.prefetch):
            yield self.transform(frame)
