"""Converts a finetuning dataset to token shards (smoke stand-in for
llm-foundry's scripts/data_prep/convert_finetuning_dataset.py; same options).

    python scripts/data_prep/convert_finetuning_dataset.py --dataset json \
        --splits train --data_files train_data.jsonl --out_root finetuning_tokens \
        --skip-preprocessing --max_seq_len 256 --tokenizer base_model

Each JSON line holds {"prompt": ..., "response": ...}. Examples whose prompt
plus response exceed --max_seq_len tokens, or with an empty response, are
dropped, as llm-foundry does.
"""

import argparse
import json
import os
import time

import torch
from torch.utils.data import DataLoader, Dataset

from foundry_lite import shards
from foundry_lite.tokenizer import Tokenizer


class JsonLines(Dataset):
    def __init__(self, path, tokenizer):
        with open(path) as f:
            self.rows = [json.loads(line) for line in f if line.strip()]
        self.tokenizer = tokenizer

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        row = self.rows[i]
        return {
            "input_ids": self.tokenizer.encode(row["prompt"]),
            "labels": self.tokenizer.encode(row["response"]),
        }


def keep_as_list(batch):
    return batch


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--splits", nargs="+", default=["train"])
    parser.add_argument("--data_files", nargs="+", required=True)
    parser.add_argument("--out_root", required=True)
    parser.add_argument("--skip-preprocessing", action="store_true")
    parser.add_argument("--max_seq_len", type=int, default=2048)
    parser.add_argument("--tokenizer", required=True)
    parser.add_argument("--num_workers", type=int, default=4)
    parser.add_argument("--samples_per_shard", type=int, default=64)
    args = parser.parse_args()
    if args.dataset != "json":
        raise SystemExit(f"only --dataset json is supported at smoke scale, got {args.dataset!r}")
    tokenizer = Tokenizer.from_pretrained(args.tokenizer)
    started = time.time()
    for split in args.splits:
        dataset = JsonLines(args.data_files[0], tokenizer)
        loader = DataLoader(dataset, batch_size=16, num_workers=args.num_workers, collate_fn=keep_as_list)
        kept, dropped = [], 0
        for batch in loader:
            for sample in batch:
                if not sample["labels"] or len(sample["input_ids"]) + len(sample["labels"]) > args.max_seq_len:
                    dropped += 1
                else:
                    kept.append(sample)
        shards.write_split(
            os.path.join(args.out_root, split),
            kept,
            args.samples_per_shard,
            {"max_seq_len": args.max_seq_len, "tokenizer": os.path.basename(os.path.abspath(args.tokenizer))},
        )
        print(f"{split}: {len(kept)} samples written, {dropped} dropped (over {args.max_seq_len} tokens or empty)")
    print(f"converted in {time.time() - started:.1f} s (torch {torch.__version__})")


if __name__ == "__main__":
    main()
