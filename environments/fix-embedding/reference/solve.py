"""Reference solution for fix-embedding: relearn the token embedding.

Everything except the token embedding is intact, so freeze the whole large
model and train only `transformer.wte.weight` (which is also the tied
unembedding), from a fresh random start, on the provided training tokens.
The frozen network tells the new embedding what each token must look like,
both as an input and as an output. A short run gets close to the original
loss; recovering the exact permutation would do better still.

    python3 solve.py     # writes fixed_model.pth

Settings (environment variables): FIX_STEPS (default: 250 on the CPU, 3000
on a GPU), FIX_BATCH, FIX_SEQ, FIX_LR, FIX_THREADS (CPU threads, default 1).
Deterministic on the CPU for given settings (fixed seeds, one thread).
"""

import os
import time

import numpy as np
import torch
import torch.nn.functional as F

from model import load_model, save_model

cuda = torch.cuda.is_available()
device = "cuda" if cuda else "cpu"
steps = int(os.environ.get("FIX_STEPS", 3000 if cuda else 250))
batch = int(os.environ.get("FIX_BATCH", 8 if cuda else 32))
lr = float(os.environ.get("FIX_LR", 1e-2))
if not cuda:
    torch.set_num_threads(int(os.environ.get("FIX_THREADS", 1)))
torch.manual_seed(0)
rng = np.random.default_rng(0)

model = load_model("large_model.pth").to(device)
seq = int(os.environ.get("FIX_SEQ", model.config.block_size))
for p in model.parameters():
    p.requires_grad_(False)
wte = model.transformer.wte.weight
# A fresh embedding with the same overall scale as the scrambled one.
embedding = (torch.randn(wte.shape, device=device) * wte.std()).requires_grad_(True)
opt = torch.optim.Adam([embedding], lr=lr)
data = torch.from_numpy(np.fromfile("train.bin", dtype=np.uint16).astype(np.int64))

blocks = model.transformer


def logits_with(emb, x):
    """The model's forward pass with `emb` as the (tied) token embedding."""
    h = emb[x] + blocks.wpe(torch.arange(x.shape[1], device=device))
    for block in blocks.h:
        h = block(h)
    return blocks.ln_f(h) @ emb.T


started = time.time()
for step in range(steps):
    starts = torch.from_numpy(rng.integers(0, len(data) - seq - 1, batch))
    x = torch.stack([data[s : s + seq] for s in starts]).to(device)
    y = torch.stack([data[s + 1 : s + seq + 1] for s in starts]).to(device)
    for group in opt.param_groups:  # linear decay to 10%
        group["lr"] = lr * (1 - 0.9 * step / steps)
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=cuda):
        loss = F.cross_entropy(logits_with(embedding, x).float().reshape(-1, wte.shape[0]), y.reshape(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    if step % 50 == 0 or step == steps - 1:
        print(f"step {step}: loss {loss.item():.3f} ({time.time() - started:.0f} s)", flush=True)

with torch.no_grad():
    wte.copy_(embedding)
save_model(model.cpu(), "fixed_model.pth")
print("wrote fixed_model.pth")
