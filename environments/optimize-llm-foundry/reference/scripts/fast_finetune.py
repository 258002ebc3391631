"""The reference solution's smoke pipeline: what finetune.sh's three scripts
compute, in one process.

    python scripts/fast_finetune.py finetune.yaml DATA_FILE MAX_SEQ_LEN OUT key=value ...

Differences from the starting pipeline, none of which changes the result
beyond float rounding:
  - one Python process (one `import torch`) instead of four;
  - the tokenizer caches words it has merged; no DataLoader workers;
    samples stay in memory (no token shards written and re-read);
  - no evaluation passes (their losses were only printed) and no
    checkpoints (only the final weights are used);
  - no activation checkpointing (it recomputes the forward pass);
  - each batch in one pass (not microbatches) padded to its longest
    example, not to max_seq_len: the loss is the same sum over the same
    tokens divided by the same count.
"""

import json
import math
import os
import sys
import time

import torch

from foundry_lite import config as cfglib
from foundry_lite import data, model as modellib
from foundry_lite.tokenizer import Tokenizer


def lr_multiplier(step, total, scheduler):
    name = scheduler.get("name", "cosine_with_warmup")
    if name == "constant":
        return 1.0
    if name != "cosine_with_warmup":
        raise cfglib.ConfigError(f"unsupported scheduler {name!r}")
    warmup, _ = cfglib.parse_duration(scheduler.get("t_warmup", "0ba"), "ba")
    alpha_f = float(scheduler.get("alpha_f", 0.0))
    if step < warmup:
        return step / warmup
    frac = (step - warmup) / max(1, total - warmup)
    return alpha_f + (1 - alpha_f) * 0.5 * (1 + math.cos(math.pi * min(frac, 1.0)))


def main():
    yaml_path, data_file, prep_max_len, out = sys.argv[1:5]
    cfg = cfglib.load(yaml_path, sys.argv[5:])
    started = time.time()
    seed = int(cfg.get("seed", cfg.get("global_seed", 17)))
    torch.manual_seed(seed)
    base = cfg["model"]["pretrained_model_name_or_path"]
    model = modellib.from_pretrained(base)
    if not cfg["model"].get("pretrained", True):
        model.init_weights(torch.Generator().manual_seed(seed))
    model.train()
    tokenizer = Tokenizer.from_pretrained(cfg["tokenizer"]["name"])

    cache, samples = {}, []
    with open(data_file) as f:
        for line in f:
            if not line.strip():
                continue
            row = json.loads(line)
            sample = {"input_ids": tokenizer.encode(row["prompt"], cache), "labels": tokenizer.encode(row["response"], cache)}
            if sample["labels"] and len(sample["input_ids"]) + len(sample["labels"]) <= int(prep_max_len):
                samples.append(sample)

    precision = cfg.get("precision", "fp32")
    if precision not in ("fp32", "amp_bf16"):
        raise cfglib.ConfigError(f"precision must be fp32 or amp_bf16, got {precision!r}")
    train_cfg = cfg["train_loader"]
    collate = data.Collator(int(cfg["max_seq_len"]), tokenizer.pad_id, "longest")
    global_bs = int(cfg["global_train_batch_size"])
    drop_last = bool(train_cfg.get("drop_last", False))
    per_epoch = len(samples) // global_bs if drop_last else math.ceil(len(samples) / global_bs)
    n, unit = cfglib.parse_duration(cfg["max_duration"], "ep")
    total = n * per_epoch if unit == "ep" else n

    opt_cfg = cfg["optimizer"]
    if opt_cfg.get("name") != "decoupled_adamw":
        raise cfglib.ConfigError(f"optimizer.name must be decoupled_adamw, got {opt_cfg.get('name')!r}")
    lr = float(opt_cfg["lr"])
    optimizer = torch.optim.AdamW(
        model.parameters(),
        lr=lr,
        betas=tuple(float(b) for b in opt_cfg.get("betas", (0.9, 0.999))),
        eps=float(opt_cfg.get("eps", 1e-8)),
        weight_decay=float(opt_cfg.get("weight_decay", 0.0)) / lr,
    )
    clipping = (cfg.get("algorithms") or {}).get("gradient_clipping") or {}
    clip = float(clipping["clipping_threshold"]) if clipping else None
    shuffle = bool(train_cfg["dataset"].get("shuffle", True))
    shuffle_seed = int(train_cfg["dataset"].get("shuffle_seed", seed))

    step, epoch = 0, 0
    while step < total:
        order = data.epoch_order(len(samples), shuffle, shuffle_seed, epoch)
        for start in range(0, len(order), global_bs):
            rows = order[start : start + global_bs]
            if drop_last and len(rows) < global_bs:
                break
            batch = collate([samples[i] for i in rows])
            for group in optimizer.param_groups:
                group["lr"] = lr * lr_multiplier(step, total, cfg.get("scheduler") or {})
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "amp_bf16"):
                loss_sum, n_tokens = data.token_loss_sum(model(batch["input_ids"]), batch["labels"])
            (loss_sum / n_tokens).backward()
            if clip is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            if step >= total:
                break
        epoch += 1

    modellib.save_pretrained(model, out, torch.bfloat16)
    tokenizer.save_pretrained(out)
    print(f"trained {step} batches in {time.time() - started:.1f} s; wrote {out}")


if __name__ == "__main__":
    main()
