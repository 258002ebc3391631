"""The starting solution: a small ReLU MLP over a window of neighbouring tokens.

The scorer imports this file and calls get_trained_model(), which must return
a torch.nn.Module (or a callable) mapping token ids [batch, seq_len] (int64,
masked positions hold the mask id) to logits [batch, seq_len, vocab_size].
Only model.forward is restricted (see instructions.md and rules.py); training
may use anything.

get_trained_model() loads model.pt when `python3 train.py` has saved one for
the corpus in data/, else it trains from scratch right there (the smoke
profile's starting solution does the latter: under ten seconds on one CPU
thread). Either way it must finish within the scorer's time limit.
"""

import os

import torch
import torch.nn as nn
import torch.nn.functional as F

import get_data
import train

# Training schedule per corpus: the smoke corpus on one CPU thread; OpenWebText on a GPU.
SCHEDULES = {
    "stdlib": {"steps": 200, "batch_size": 32, "lr": 3e-3},
    "openwebtext": {"steps": 3000, "batch_size": 64, "lr": 1e-3},
}


class WindowMLP(nn.Module):
    """Each position's logits from the embeddings of itself and its `window`
    neighbours on either side, through one hidden ReLU layer."""

    def __init__(self, vocab_size, width=64, window=2, hidden=256):
        super().__init__()
        self.window = window
        self.embed = nn.Embedding(vocab_size, width)
        self.hidden = nn.Linear((2 * window + 1) * width, hidden)
        self.out = nn.Linear(hidden, vocab_size)

    def forward(self, tokens):
        length = tokens.shape[1]
        h = self.embed(tokens)  # [batch, seq, width]
        padded = F.pad(h, (0, 0, self.window, self.window))  # zeros beyond both ends
        context = torch.cat([padded[:, i : i + length] for i in range(2 * self.window + 1)], dim=-1)
        return self.out(F.relu(self.hidden(context)))


def build_model(meta):
    return WindowMLP(meta["vocab_size"])


def device():
    return "cuda" if torch.cuda.is_available() else "cpu"


def train_model(meta, tokens, steps=None):
    schedule = dict(SCHEDULES[meta["corpus"]])
    if steps is not None:
        schedule["steps"] = steps
    torch.manual_seed(0)  # the initial weights, too, are the same every run
    return train.train(build_model(meta), meta, tokens, device=device(), **schedule)


def get_trained_model():
    meta, tokens = get_data.ensure()
    if os.path.exists(train.WEIGHTS):
        saved = torch.load(train.WEIGHTS, map_location="cpu")
        if saved["corpus"] == meta["corpus"]:
            model = build_model(meta)
            model.load_state_dict(saved["state_dict"])
            return model.to(device()).eval()
    return train_model(meta, tokens)
