"""Training code for experiments (do not edit; protected).

    python3 train.py --n_embd 64 --max_iters 500
    python3 train.py --n_embd 64 --max_iters 500 --eval_interval 50 --out runs/e64.json

Trains the model in model.py with hidden size `n_embd` for `max_iters`
steps, every other setting fixed by config.json, and reports the validation
loss (mean cross-entropy in nats per byte) during and at the end of training.

FLOPs are counted as 6 * params * tokens, where params is every weight of
the model (embeddings and output layer included),

    params = 12 * n_layer * n_embd**2 + (2 * n_layer + 1 + 2 * vocab_size + block_size) * n_embd

and tokens = max_iters * batch_size * block_size.

A run over config.json's `experiment_flop_cap` is refused before it starts.

The learning rate warms up linearly over `warmup_iters` steps and then stays
constant, so a run's first k steps are the same whatever its `max_iters`.

You may import this module from your own scripts (`train.train(...)`
returns the same dict that --out writes) but not change what it computes or
get around the FLOP cap.
"""

import argparse
import json
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import data as data_lib  # noqa: E402  (after the path fix, so `python3 /x/train.py` works)


def load_config(path=None):
    with open(path or os.path.join(HERE, "config.json")) as f:
        return json.load(f)


def params(n_embd, config):
    """The model's parameter count: 12 n_embd^2 per block (attention 4, MLP 8),
    two LayerNorms per block and a final one, token and position embeddings
    and the output layer."""
    n_layer, vocab, block = config["n_layer"], config["vocab_size"], config["block_size"]
    return 12 * n_layer * n_embd**2 + (2 * n_layer + 1 + 2 * vocab + block) * n_embd


def flops(n_embd, max_iters, config):
    """The FLOPs a run is counted as using: 6 * params * tokens."""
    return 6 * params(n_embd, config) * config["block_size"] * config["batch_size"] * max_iters


def max_iters_for(n_embd, budget, config):
    """The most steps a run of this size may take within `budget` FLOPs."""
    return int(budget // flops(n_embd, 1, config))


class OverBudget(Exception):
    pass


def train(n_embd, max_iters, seed=None, eval_interval=None, log=print, config=None):
    """An experiment: refuses runs over the cap, evaluates on the validation split."""
    config = config or load_config()
    used = flops(n_embd, max_iters, config)
    cap = config["experiment_flop_cap"]
    if used > cap:
        raise OverBudget(
            f"n_embd={n_embd}, max_iters={max_iters} is {used:.4g} FLOPs, over the "
            f"experiment cap of {cap:.4g} FLOPs (at most max_iters="
            f"{max_iters_for(n_embd, cap, config)} for this n_embd)"
        )
    every = eval_interval or config["eval_interval"]
    eval_at = sorted({i for i in range(every, max_iters + 1, every)} | {max_iters})
    return run(n_embd, max_iters, config, eval_at, "val", seed=seed, log=log)


def pick_device(config):
    import torch

    wanted = config.get("device", "auto")
    if wanted == "auto":
        wanted = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(wanted)


def run(n_embd, max_iters, config, eval_at, split, seed=None, log=print, data_dir=None,
        eval_dir=None):
    """The training loop itself; evaluates on `split` (from `eval_dir`, default
    `data_dir`, default data/) after each step in `eval_at`."""
    import torch

    from model import GPT

    if max_iters < 1:
        raise ValueError(f"max_iters must be at least 1, got {max_iters}")
    device = pick_device(config)
    if device.type == "cpu" and config.get("threads"):
        torch.set_num_threads(int(config["threads"]))
    seed = config["seed"] if seed is None else seed
    torch.manual_seed(seed)
    block, batch = config["block_size"], config["batch_size"]
    model = GPT(n_embd, config["n_layer"], config["head_dim"], block, config["vocab_size"]).to(device)
    assert sum(p.numel() for p in model.parameters()) == params(n_embd, config)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    lr = config["learning_rate"]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": config["weight_decay"]},
         {"params": no_decay, "weight_decay": 0.0}],
        lr=lr, betas=(0.9, 0.95),
    )
    forward = model
    if config.get("compile") and device.type == "cuda":
        forward = torch.compile(model)
    use_bf16 = device.type == "cuda" and config.get("dtype") == "bfloat16"

    def autocast():
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=use_bf16)

    train_data = data_lib.load_split("train", data_dir)
    eval_data = data_lib.load_split(split, eval_dir or data_dir)
    batches = data_lib.TrainBatches(train_data, block, batch, seed)
    fixed_eval = data_lib.eval_batches(eval_data, block, batch, config["eval_batches"])

    def evaluate():
        model.eval()
        total = 0.0
        with torch.no_grad(), autocast():
            for x, y in fixed_eval:
                total += forward(x.to(device), y.to(device))[1].item()
        model.train()
        return total / len(fixed_eval)

    history, pending, started = [], set(eval_at), time.time()
    train_loss = float("nan")
    for it in range(1, max_iters + 1):
        for group in optimizer.param_groups:
            group["lr"] = lr * min(1.0, it / config["warmup_iters"])
        x, y = batches.next()
        with autocast():
            _, loss = forward(x.to(device), y.to(device))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config["grad_clip"])
        optimizer.step()
        if it in pending:
            train_loss = loss.item()
            val = evaluate()
            history.append({"iter": it, "train_loss": train_loss, f"{split}_loss": val})
            log(f"iter {it}/{max_iters}: train loss {train_loss:.4f}, {split} loss {val:.4f} "
                f"({time.time() - started:.1f} s)")
            if not math.isfinite(val):
                break
    final = history[-1][f"{split}_loss"] if history else float("nan")
    return {
        "n_embd": n_embd,
        "max_iters": max_iters,
        "seed": seed,
        "flops": flops(n_embd, max_iters, config),
        "params": params(n_embd, config),
        f"final_{split}_loss": final,
        "history": history,
        "seconds": round(time.time() - started, 2),
        "device": str(device),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n_embd", type=int, required=True)
    parser.add_argument("--max_iters", type=int, required=True)
    parser.add_argument("--seed", type=int, default=None, help="default: config.json's seed")
    parser.add_argument("--eval_interval", type=int, default=None)
    parser.add_argument("--out", help="write the result as JSON here")
    args = parser.parse_args()
    config = load_config()
    try:
        result = train(args.n_embd, args.max_iters, args.seed, args.eval_interval, config=config)
    except (OverBudget, ValueError) as e:
        print(f"refused: {e}", file=sys.stderr)
        sys.exit(2)
    print(json.dumps({k: v for k, v in result.items() if k != "history"}))
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
