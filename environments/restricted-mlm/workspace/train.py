"""Training for model.py (free to change, like everything but the protected files).

    python3 train.py            # train the model in model.py, save model.pt
    python3 train.py --steps 50 # a shorter run

Batches are random windows of the training split (data/, built by
get_data.py) with round(mask_fraction * seq_len) positions per sequence
replaced by the mask id, as the scorer masks its held-out sequences; the loss
is the cross-entropy at the masked positions. A model may define
masked_logits(inputs, masked) to compute only the logits training needs
(the scorer always calls forward). The loss, and anything else outside
model.forward, may use any operation.
"""

import argparse
import os
import time

import numpy as np
import torch
import torch.nn.functional as F

import get_data

HERE = os.path.dirname(os.path.abspath(__file__))
WEIGHTS = os.path.join(HERE, "model.pt")


def mask_batch(sequences, meta, generator):
    """(inputs, masked): `sequences` with round(mask_fraction * seq_len)
    random positions per row set to the mask id, and where they are (bool)."""
    batch, length = sequences.shape
    count = round(meta["mask_fraction"] * length)
    order = torch.rand(batch, length, generator=generator, device=sequences.device).argsort(dim=1)
    masked = torch.zeros(batch, length, dtype=torch.bool, device=sequences.device)
    masked.scatter_(1, order[:, :count], True)
    inputs = sequences.masked_fill(masked, meta["mask_id"])
    return inputs, masked


def random_batch(tokens, meta, batch_size, rng, device):
    """batch_size random windows of seq_len tokens (int64) from the training split."""
    length = meta["seq_len"]
    starts = rng.integers(0, len(tokens) - length, size=batch_size)
    rows = np.stack([np.asarray(tokens[s : s + length], dtype=np.int64) for s in starts])
    return torch.from_numpy(rows).to(device)


def masked_loss(logits, sequences, masked):
    """Mean cross-entropy over the masked positions (what the scorer reports)."""
    return F.cross_entropy(logits[masked].float(), sequences[masked])


def train(model, meta, tokens, steps, batch_size, lr, seed=0, device="cpu", log_every=50):
    """Trains `model` in place with AdamW and a linear warm-up/decay; returns it."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    generator = torch.Generator(device=device).manual_seed(seed)
    model.to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.98), weight_decay=0.01)
    warmup = max(1, steps // 20)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min((step + 1) / warmup, max(0.05, (steps - step) / max(1, steps - warmup)))
    )
    started = time.perf_counter()
    for step in range(steps):
        sequences = random_batch(tokens, meta, batch_size, rng, device)
        inputs, masked = mask_batch(sequences, meta, generator)
        if hasattr(model, "masked_logits"):  # optional: logits at the masked positions only
            loss = F.cross_entropy(model.masked_logits(inputs, masked).float(), sequences[masked])
        else:
            loss = masked_loss(model(inputs), sequences, masked)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        if log_every and (step % log_every == 0 or step == steps - 1):
            print(f"step {step:5d}  loss {loss.item():.4f}  {time.perf_counter() - started:6.1f} s", flush=True)
    return model.eval()


def main():
    import model as model_module  # the participant's model.py

    parser = argparse.ArgumentParser(description="train the model in model.py and save model.pt")
    parser.add_argument("--steps", type=int, help="override the schedule's number of steps")
    args = parser.parse_args()
    meta, tokens = get_data.ensure()
    model = model_module.train_model(meta, tokens, steps=args.steps)
    torch.save({"corpus": meta["corpus"], "state_dict": model.state_dict()}, WEIGHTS)
    print(f"saved {WEIGHTS}")


if __name__ == "__main__":
    main()
