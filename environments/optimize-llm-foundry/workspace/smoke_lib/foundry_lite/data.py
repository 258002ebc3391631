"""Finetuning data for the smoke trainer: samples from the token shards,
shuffled per epoch by a seeded permutation of their own (so the order does
not depend on the number of loader workers), and a collator that builds
decoder-only examples: prompt + response, truncated to max_seq_len, loss
on the response tokens only, padded at the end."""

import torch

IGNORE = -100


def epoch_order(n, shuffle, seed, epoch):
    """The sample order of one epoch."""
    if not shuffle:
        return list(range(n))
    generator = torch.Generator().manual_seed(seed * 1000003 + epoch)
    return torch.randperm(n, generator=generator).tolist()


class Collator:
    def __init__(self, max_seq_len, pad_id, pad_to):
        self.max_seq_len = max_seq_len
        self.pad_id = pad_id
        self.pad_to = pad_to  # "max_seq_len" or "longest"

    def example(self, sample):
        ids = (sample["input_ids"] + sample["labels"])[: self.max_seq_len]
        labels = ([IGNORE] * len(sample["input_ids"]) + sample["labels"])[: self.max_seq_len]
        return ids, labels

    def __call__(self, samples):
        pairs = [self.example(s) for s in samples]
        width = self.max_seq_len if self.pad_to == "max_seq_len" else max(len(ids) for ids, _ in pairs)
        input_ids = torch.full((len(pairs), width), self.pad_id, dtype=torch.long)
        labels = torch.full((len(pairs), width), IGNORE, dtype=torch.long)
        for row, (ids, lab) in enumerate(pairs):
            input_ids[row, : len(ids)] = torch.tensor(ids)
            labels[row, : len(lab)] = torch.tensor(lab)
        return {"input_ids": input_ids, "labels": labels}


def token_loss_sum(logits, labels):
    """Summed next-token cross-entropy over the labelled positions and the
    number of those positions."""
    shift_logits = logits[:, :-1, :].reshape(-1, logits.shape[-1])
    shift_labels = labels[:, 1:].reshape(-1)
    loss = torch.nn.functional.cross_entropy(shift_logits.float(), shift_labels, ignore_index=IGNORE, reduction="sum")
    return loss, int((shift_labels != IGNORE).sum())
