"""dejaview for the data and ML side: query a fleet's stored frames, decode them to numpy, read
export batches, and stream frames into PyTorch (dejaview.torch). Guide: docs/python.md.

Every error is a dejaview.Error carrying the C++ library's message: FormatError for malformed
input (naming the file and field), StoreError for a store or file that cannot be read
(NotFoundError when it does not exist), ArgumentError for an argument out of range.
"""
import os

from ._dejaview import (ArgumentError, BatchFrame, Decoder, Error, FormatError, Frame,
                        FrameReader, FrameRecord, NotFoundError, Store, StoreError, read_batch)

__all__ = [
    "ArgumentError", "BatchFrame", "Decoder", "DeltaFolder", "Error", "FormatError", "Frame",
    "FrameReader", "FrameRecord", "NotFoundError", "Store", "StoreError", "read_batch",
]


class DeltaFolder:
    """A folder of delta files (*.dvd, as `dejaview encode` writes them, or DIR/deltas of
    `dejaview query --export DIR`) with the map they were coded against (None: intra only).
    Frames are decoded in name order, one at a time, as they are asked for."""

    def __init__(self, folder, map=None, map_budget_mb=0):
        deltas = os.path.join(folder, "deltas")
        if os.path.isdir(deltas):
            folder = deltas
        if not os.path.isdir(folder):
            raise NotFoundError(f"{folder}: no such folder of deltas")
        self.paths = sorted(os.path.join(folder, n) for n in os.listdir(folder)
                            if n.endswith(".dvd"))
        self.decoder = Decoder(map, map_budget_mb)

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        return self.decoder.decode_file(self.paths[i])

    def __iter__(self):
        return (self[i] for i in range(len(self)))
