"""The data loader (do not edit; protected).

The data are raw bytes (token = byte value, vocabulary 256) in
data/train.bin and data/val.bin next to this file. Training batches are
random windows of the training split drawn with a seeded generator;
evaluation uses fixed windows of the validation split.
"""

import os

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def load_split(name, data_dir=None):
    """The bytes of data/<name>.bin as a read-only numpy array (memory-mapped)."""
    path = os.path.join(data_dir or os.path.join(HERE, "data"), f"{name}.bin")
    return np.memmap(path, dtype=np.uint8, mode="r")


def windows(data, starts, block_size):
    """Inputs and next-byte targets for the windows starting at `starts`."""
    x = np.stack([data[s : s + block_size] for s in starts]).astype(np.int64)
    y = np.stack([data[s + 1 : s + 1 + block_size] for s in starts]).astype(np.int64)
    return torch.from_numpy(x), torch.from_numpy(y)


class TrainBatches:
    """Random training windows, reproducible from `seed`."""

    def __init__(self, data, block_size, batch_size, seed):
        self.data, self.block_size, self.batch_size = data, block_size, batch_size
        self.rng = np.random.default_rng(seed)

    def next(self):
        starts = self.rng.integers(0, len(self.data) - self.block_size - 1, self.batch_size)
        return windows(self.data, starts, self.block_size)


def eval_batches(data, block_size, batch_size, n_batches):
    """`n_batches` fixed batches spread evenly over `data` (same for every run)."""
    span = len(data) - block_size - 1
    count = n_batches * batch_size
    starts = (np.arange(count, dtype=np.int64) * span) // max(count, 1)
    return [
        windows(data, starts[i * batch_size : (i + 1) * batch_size], block_size)
        for i in range(n_batches)
    ]
