"""Finetunes the base model (smoke stand-in for llm-foundry's
scripts/train/train.py launched by composer; the same config keys).

    python scripts/train/train.py finetune.yaml key=value ...

Reads the YAML config, applies the key=value overrides, trains with
decoupled AdamW, cosine-with-warmup schedule, gradient clipping and
gradient accumulation over microbatches, evaluates every eval_interval and
saves composer-style checkpoints (model, optimizer, scheduler and
timestamp) to save_folder: ep{E}-ba{B}-rank0.pt plus latest-rank0.pt.
"""

import json
import math
import os
import random
import sys
import time

import torch
from torch.utils.data import DataLoader

from foundry_lite import config as cfglib
from foundry_lite import data, model as modellib, shards
from foundry_lite.tokenizer import Tokenizer


def log(message):
    print(f"[train {time.strftime('%H:%M:%S')}] {message}", flush=True)


class Split(torch.utils.data.Dataset):
    """The samples of one or more streams' splits, in order."""

    def __init__(self, loader_cfg):
        dataset = loader_cfg["dataset"]
        streams = dataset.get("streams") or {"default": {"local": dataset["local"], "split": dataset.get("split")}}
        self.readers = []
        for name, stream in streams.items():
            split = stream.get("split") or dataset.get("split")
            folder = os.path.join(stream["local"], split) if split else stream["local"]
            self.readers.append(shards.ShardReader(folder))
        self.offsets = []
        total = 0
        for reader in self.readers:
            self.offsets.append(total)
            total += len(reader)
        self.total = total

    def __len__(self):
        return self.total

    def __getitem__(self, i):
        for reader, offset in zip(reversed(self.readers), reversed(self.offsets)):
            if i >= offset:
                return reader[i - offset]
        raise IndexError(i)


def make_loader(split, loader_cfg, batch_size, order, collate):
    workers = int(loader_cfg.get("num_workers") or 0)
    return DataLoader(
        split,
        batch_size=batch_size,
        sampler=order,
        collate_fn=collate,
        num_workers=workers,
        drop_last=bool(loader_cfg.get("drop_last", False)),
        # spawned, not forked: safe with CUDA and with torch's thread pools
        multiprocessing_context="spawn" if workers > 0 else None,
        persistent_workers=False,
    )


def lr_multiplier(step, total, scheduler):
    """composer's cosine_with_warmup (t_warmup, alpha_f), in batches."""
    name = scheduler.get("name", "cosine_with_warmup")
    if name not in ("cosine_with_warmup", "constant"):
        raise cfglib.ConfigError(f"unsupported scheduler {name!r}")
    if name == "constant":
        return 1.0
    warmup, unit = cfglib.parse_duration(scheduler.get("t_warmup", "0ba"), "ba")
    if unit != "ba":
        raise cfglib.ConfigError("scheduler.t_warmup must be in batches (e.g. 20ba) at smoke scale")
    alpha_f = float(scheduler.get("alpha_f", 0.0))
    if step < warmup:
        return step / warmup
    frac = (step - warmup) / max(1, total - warmup)
    return alpha_f + (1 - alpha_f) * 0.5 * (1 + math.cos(math.pi * min(frac, 1.0)))


def interval_hit(interval, epoch_end, batch, epoch):
    """Whether a composer-style interval ("Nep", "Nba", int epochs; 0 = never)
    fires after `batch` batches (at an epoch's end when epoch_end)."""
    if interval in (None, 0, "0", "0ep", "0ba"):
        return False
    n, unit = cfglib.parse_duration(interval, "ep")
    if n == 0:
        return False
    if unit == "ba":
        return not epoch_end and batch % n == 0
    return epoch_end and epoch % n == 0


def evaluate(model, split, loader_cfg, batch_size, collate, autocast):
    model.eval()
    total, count = 0.0, 0
    loader = make_loader(split, loader_cfg, batch_size, list(range(len(split))), collate)
    with torch.no_grad(), autocast():
        for batch in loader:
            loss, n = data.token_loss_sum(model(batch["input_ids"]), batch["labels"])
            total += float(loss)
            count += n
    model.train()
    return total / max(1, count)


def save_checkpoint(folder, model, optimizer, state, hf_config, tokenizer_dir, keep):
    os.makedirs(folder, exist_ok=True)
    name = f"ep{state['epoch']}-ba{state['batch']}-rank0.pt"
    with open(os.path.join(tokenizer_dir, "tokenizer.json")) as f:
        tokenizer_blob = json.load(f)
    blob = {
        "state": {
            "model": {k: v.detach().clone() for k, v in model.state_dict().items()},
            "optimizers": {"DecoupledAdamW": optimizer.state_dict()},
            "timestamp": dict(state),
            "rng": {"torch": torch.get_rng_state(), "python": random.getstate()},
            "integrations": {"huggingface": {"model": {"config": hf_config}, "tokenizer": tokenizer_blob}},
        }
    }
    torch.save(blob, os.path.join(folder, name))
    latest = os.path.join(folder, "latest-rank0.pt")
    if os.path.lexists(latest):
        os.remove(latest)
    os.symlink(name, latest)
    if keep and keep > 0:
        saved = sorted(
            (f for f in os.listdir(folder) if f.startswith("ep") and f.endswith("-rank0.pt")),
            key=lambda f: os.path.getmtime(os.path.join(folder, f)),
        )
        for old in saved[:-keep]:
            os.remove(os.path.join(folder, old))
    log(f"saved checkpoint {name}")


def main():
    if len(sys.argv) < 2:
        raise SystemExit("usage: train.py CONFIG.yaml [key=value ...]")
    cfg = cfglib.load(sys.argv[1], sys.argv[2:])
    seed = int(cfg.get("seed", cfg.get("global_seed", 17)))
    random.seed(seed)
    torch.manual_seed(seed)
    log(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), seed {seed}")

    model_cfg = cfg["model"]
    if model_cfg.get("name") != "hf_causal_lm":
        raise cfglib.ConfigError(f"model.name must be hf_causal_lm, got {model_cfg.get('name')!r}")
    base = model_cfg["pretrained_model_name_or_path"]
    model = modellib.from_pretrained(base)
    if not model_cfg.get("pretrained", True):
        model.init_weights(torch.Generator().manual_seed(seed))
    fsdp = cfg.get("fsdp_config") or {}
    model.gradient_checkpointing = bool(fsdp.get("activation_checkpointing", False))
    model.train()
    tokenizer = Tokenizer.from_pretrained(cfg["tokenizer"]["name"])

    precision = cfg.get("precision", "fp32")
    if precision not in ("fp32", "amp_bf16"):
        raise cfglib.ConfigError(f"precision must be fp32 or amp_bf16, got {precision!r}")

    def autocast():
        return torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "amp_bf16")

    max_seq_len = int(cfg["max_seq_len"])
    train_cfg = cfg["train_loader"]
    train_split = Split(train_cfg)
    collate = data.Collator(max_seq_len, tokenizer.pad_id, "max_seq_len")
    global_bs = int(cfg["global_train_batch_size"])
    micro = cfg.get("device_train_microbatch_size", global_bs)
    micro = global_bs if micro in (None, "auto") else int(micro)
    drop_last = bool(train_cfg.get("drop_last", False))
    per_epoch = len(train_split) // global_bs if drop_last else math.ceil(len(train_split) / global_bs)
    if per_epoch == 0:
        raise SystemExit(f"{len(train_split)} training samples: not one batch of {global_bs}")
    n, unit = cfglib.parse_duration(cfg["max_duration"], "ep")
    total = n * per_epoch if unit == "ep" else n
    log(f"{len(train_split)} samples, {per_epoch} batches/epoch of {global_bs} (microbatch {micro}), {total} batches")

    opt_cfg = cfg["optimizer"]
    if opt_cfg.get("name") != "decoupled_adamw":
        raise cfglib.ConfigError(f"optimizer.name must be decoupled_adamw, got {opt_cfg.get('name')!r}")
    lr = float(opt_cfg["lr"])
    # composer's decoupled weight decay: p -= (lr / initial lr) * weight_decay * p
    optimizer = torch.optim.AdamW(
        model.parameters(),
        lr=lr,
        betas=tuple(float(b) for b in opt_cfg.get("betas", (0.9, 0.999))),
        eps=float(opt_cfg.get("eps", 1e-8)),
        weight_decay=float(opt_cfg.get("weight_decay", 0.0)) / lr,
    )
    clipping = ((cfg.get("algorithms") or {}).get("gradient_clipping") or {})
    if clipping and clipping.get("clipping_type", "norm") != "norm":
        raise cfglib.ConfigError("only norm gradient clipping is supported at smoke scale")
    clip = float(clipping["clipping_threshold"]) if clipping else None

    eval_cfg = cfg.get("eval_loader")
    eval_split = Split(eval_cfg) if eval_cfg and cfg.get("eval_interval", 1) not in (0, "0") else None
    shuffle = bool(train_cfg["dataset"].get("shuffle", True))
    shuffle_seed = int(train_cfg["dataset"].get("shuffle_seed", seed))
    save_folder = cfg.get("save_folder")
    hf_config = json.load(open(os.path.join(base, modellib.CONFIG)))

    started = time.time()
    step, epoch = 0, 0
    while step < total:
        order = data.epoch_order(len(train_split), shuffle, shuffle_seed, epoch)
        loader = make_loader(train_split, train_cfg, global_bs, order, collate)
        for batch in loader:
            for group in optimizer.param_groups:
                group["lr"] = lr * lr_multiplier(step, total, cfg.get("scheduler") or {})
            n_tokens = int((batch["labels"][:, 1:] != data.IGNORE).sum())
            loss_total = 0.0
            for start in range(0, batch["input_ids"].shape[0], micro):
                ids = batch["input_ids"][start : start + micro]
                labels = batch["labels"][start : start + micro]
                with autocast():
                    loss_sum, _ = data.token_loss_sum(model(ids), labels)
                loss = loss_sum / n_tokens
                loss.backward()
                loss_total += float(loss.detach())
            if clip is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            if step % 10 == 0 or step == total:
                log(f"epoch {epoch} batch {step}/{total}: loss {loss_total:.4f} lr {optimizer.param_groups[0]['lr']:.3g}")
            if save_folder and interval_hit(cfg.get("save_interval", "1ep"), False, step, epoch):
                save_checkpoint(save_folder, model, optimizer, {"epoch": epoch, "batch": step}, hf_config, base,
                                cfg.get("save_num_checkpoints_to_keep"))
            if step >= total:
                break
        epoch += 1
        epoch_end = step % per_epoch == 0
        if eval_split is not None and epoch_end and interval_hit(cfg.get("eval_interval", 1), True, step, epoch):
            loss = evaluate(model, eval_split, eval_cfg, int(cfg.get("device_eval_batch_size", 8)), collate, autocast)
            log(f"eval after epoch {epoch}: loss {loss:.4f}")
        if save_folder and epoch_end and interval_hit(cfg.get("save_interval", "1ep"), True, step, epoch):
            save_checkpoint(save_folder, model, optimizer, {"epoch": epoch, "batch": step}, hf_config, base,
                            cfg.get("save_num_checkpoints_to_keep"))
    if save_folder:
        latest = os.path.join(save_folder, "latest-rank0.pt")
        if not os.path.exists(latest) or os.path.realpath(latest) != os.path.realpath(
            os.path.join(save_folder, f"ep{epoch}-ba{step}-rank0.pt")
        ):
            save_checkpoint(save_folder, model, optimizer, {"epoch": epoch, "batch": step}, hf_config, base,
                            cfg.get("save_num_checkpoints_to_keep"))
    log(f"trained {step} batches in {time.time() - started:.1f} s")


if __name__ == "__main__":
    main()
