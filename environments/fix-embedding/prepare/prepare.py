"""Run by `rebench env prepare fix-embedding` with the venv's python.

    prepare.py MODEL_PY SMOKE_TOKENIZER_PY FULL_DOWNLOAD_PY

(the manifest names all three files, so rebench re-prepares when one changes)

Writes into $REBENCH_PREPARED (the preparation folder):

    workspace/            copied into every session's workspace (participant-visible)
        large_model.pth   the large model with its token-embedding rows permuted
        small_model.pth   a smaller model trained on the same data, intact
        train.bin         training tokens (uint16, raw: numpy.fromfile(path, numpy.uint16))
        val.bin           a small validation split for the local score.py (uint16)
        tokenizer.json    the token strings, to decode ids (informational)
    test.bin              HELD-OUT tokens for the official scorer (hidden)
    info.json             configs, evaluation settings, hashes of the provided
                          files, and the losses measured here (hidden)

The un-permuted large model is never written: the scorer needs only the
held-out text, and nothing in the preparation gives the permutation away.

$FIX_EMBEDDING_SCALE (the profile's prepare_env) picks what is made:

  smoke  offline, ~1 minute on one CPU thread: a word-piece tokenizer and two
         small GPT-2-style models trained here on the Python standard
         library's own sources, split by file into train/val/test.
  full   the real task (needs internet and ~20 GB of disk): GPT-2 XL
         (1.5B, the large model) and GPT-2 (124M, the small one) from the
         Hugging Face hub, and OpenWebText tokenized with GPT-2's BPE.
         See instructions.md for sizes and times. Never runs at scoring time.

Work already done is skipped: the script exits at once when info.json (with
the same fingerprint of the scripts, scale and versions) and every file it
lists are present; rebench deletes damaged files first. The full profile's
downloads go to <prepared>/downloads/, stay there while the preparation is
unfinished (a rerun resumes them) and are removed when it succeeds.
"""

import dataclasses
import hashlib
import importlib.util
import json
import os
import shutil
import sys
import time

import numpy as np
import torch

MODULES = {}  # helper modules by name -> path, from argv
PERMUTATION_SEED = 20240917  # fixed: the same permutation on every machine
PUBLIC = "workspace"  # the preparation's subfolder copied into session workspaces
PROVIDED = ("large_model.pth", "small_model.pth")  # must stay unchanged in the workspace


def log(message):
    print(f"[fix-embedding prepare {time.strftime('%H:%M:%S')}] {message}", flush=True)


def import_path(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def fingerprint(scale):
    """What the outputs depend on: this script, its helper modules, the
    scale, and the Python and torch versions (the smoke corpus is this
    Python's standard library)."""
    digest = hashlib.sha256(f"{scale}\n{sys.version}\n{torch.__version__}\n".encode())
    for path in [os.path.abspath(__file__)] + sys.argv[1:]:
        with open(path, "rb") as f:
            digest.update(hashlib.sha256(f.read()).digest())
    return digest.hexdigest()


def already_done(out, stamp):
    """True when a previous run with the same fingerprint left info.json and
    every file it lists."""
    try:
        with open(os.path.join(out, "info.json")) as f:
            info = json.load(f)
    except (OSError, ValueError):
        return False
    if info.get("fingerprint") != stamp:
        return False
    return all(os.path.isfile(os.path.join(out, rel)) for rel in info.get("files", []))


@torch.no_grad()
def heldout_loss(model, tokens, seq_len, n_seqs, batch, device):
    """Mean next-token cross-entropy over the first n_seqs consecutive
    windows of `tokens`: window r reads tokens[r*seq_len : (r+1)*seq_len]
    and predicts each next token (the scorer's definition)."""
    model.eval().to(device)
    total, count = 0.0, 0
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=device == "cuda")  # as the scorer does
    for start in range(0, n_seqs, batch):
        rows = range(start, min(start + batch, n_seqs))
        chunk = np.stack([tokens[r * seq_len : r * seq_len + seq_len + 1] for r in rows]).astype(np.int64)
        chunk = torch.from_numpy(chunk).to(device)
        with autocast:
            _, loss = model(chunk[:, :-1], chunk[:, 1:])
        total += float(loss) * len(rows)
        count += len(rows)
    return total / count


def permute_embedding(model, seed):
    """Permutes the rows of the (tied) token embedding in place: afterwards
    row i holds what was row perm[i]."""
    generator = torch.Generator().manual_seed(seed)
    weight = model.transformer.wte.weight
    perm = torch.randperm(weight.shape[0], generator=generator)
    with torch.no_grad():
        weight.copy_(weight[perm].clone())


def save_model(model_mod, model, path):
    model_mod.save_model(model.cpu(), path)


def finish(out, info, public_files):
    """Hashes the provided files and writes info.json last."""
    pub = os.path.join(out, PUBLIC)
    info["provided_sha256"] = {name: sha256(os.path.join(pub, name)) for name in PROVIDED}
    info["files"] = [os.path.join(PUBLIC, name) for name in public_files] + ["test.bin"]
    with open(os.path.join(out, "info.json"), "w") as f:
        json.dump(info, f, indent=2, sort_keys=True)
        f.write("\n")


# ---------------------------------------------------------------- smoke scale

SMOKE = {
    "vocab_size": 1024,
    "block_size": 64,
    "large": {"n_layer": 4, "n_head": 4, "n_embd": 64},
    "small": {"n_layer": 2, "n_head": 2, "n_embd": 32},
    "large_train": {"steps": 300, "batch": 32, "lr": 3e-3, "seed": 1},
    "small_train": {"steps": 300, "batch": 32, "lr": 3e-3, "seed": 2},
    "eval": {"seq_len": 64, "n_seqs": 1024, "batch": 128},  # 65,536 held-out tokens
}


def train(model, tokens, steps, batch, lr, seed):
    """Plain AdamW with warmup and cosine decay on random windows of `tokens`."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    data = torch.from_numpy(tokens.astype(np.int64))
    t = model.config.block_size
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.99), weight_decay=0.1)
    model.train()
    for step in range(steps):
        starts = rng.integers(0, len(data) - t - 1, batch)
        x = torch.stack([data[s : s + t] for s in starts])
        y = torch.stack([data[s + 1 : s + t + 1] for s in starts])
        scale = min(1.0, (step + 1) / 30) * (0.1 + 0.45 * (1 + np.cos(np.pi * step / steps)))
        for group in opt.param_groups:
            group["lr"] = lr * scale
        _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 100 == 0 or step == steps - 1:
            log(f"  step {step}: train loss {loss.item():.3f}")
    return model


def prepare_smoke(out, model_mod, stamp):
    torch.set_num_threads(1)  # deterministic and kind to a shared machine
    tok = import_path("smoke_tokenizer", MODULES["smoke_tokenizer"])
    texts = tok.stdlib_splits()
    log("corpus: " + ", ".join(f"{k} {len(v):,} chars" for k, v in texts.items()))
    pieces = tok.build_vocab(texts["train"], SMOKE["vocab_size"])
    data = {split: tok.encode(text, pieces) for split, text in texts.items()}
    log("tokens: " + ", ".join(f"{k} {len(v):,}" for k, v in data.items()))
    ev = SMOKE["eval"]
    needed = ev["seq_len"] * ev["n_seqs"] + 1
    if len(data["test"]) < needed:
        raise SystemExit(f"held-out split too small: {len(data['test'])} tokens, need {needed}")

    pub = os.path.join(out, PUBLIC)
    os.makedirs(pub, exist_ok=True)
    data["train"].tofile(os.path.join(pub, "train.bin"))
    data["val"].tofile(os.path.join(pub, "val.bin"))
    data["test"][:needed].tofile(os.path.join(out, "test.bin"))
    with open(os.path.join(pub, "tokenizer.json"), "w") as f:
        json.dump(tok.describe(pieces), f, indent=1)
        f.write("\n")

    configs = {}
    losses = {}
    for name in ("large", "small"):
        config = model_mod.GPTConfig(vocab_size=SMOKE["vocab_size"], block_size=SMOKE["block_size"], **SMOKE[name])
        configs[name] = dataclasses.asdict(config)
        settings = SMOKE[f"{name}_train"]
        torch.manual_seed(settings["seed"])
        model = model_mod.GPT(config)
        n_params = sum(p.numel() for p in model.parameters())
        log(f"training the {name} model ({n_params:,} parameters): {settings}")
        started = time.time()
        train(model, data["train"], **settings)
        losses[f"{name}_original"] = heldout_loss(model, data["test"], ev["seq_len"], ev["n_seqs"], ev["batch"], "cpu")
        log(f"  {time.time() - started:.1f} s; held-out loss {losses[f'{name}_original']:.4f}")
        if name == "large":
            permute_embedding(model, PERMUTATION_SEED)
            losses["large_permuted"] = heldout_loss(model, data["test"], ev["seq_len"], ev["n_seqs"], ev["batch"], "cpu")
            log(f"  permuted: held-out loss {losses['large_permuted']:.4f}")
        save_model(model_mod, model, os.path.join(pub, f"{name}_model.pth"))

    info = {
        "scale": "smoke",
        "fingerprint": stamp,
        "large_config": configs["large"],
        "small_config": configs["small"],
        "eval": {"seq_len": ev["seq_len"], "n_seqs": ev["n_seqs"], "batch": ev["batch"]},
        "measured": losses,
        "torch": torch.__version__,
        "python": sys.version.split()[0],
    }
    finish(out, info, PROVIDED + ("train.bin", "val.bin", "tokenizer.json"))


# ----------------------------------------------------------------- full scale


def prepare_full(out, model_mod, stamp):
    """GPT-2 XL + GPT-2 + OpenWebText; needs internet. Untested here (no
    network but PyPI on the development machines)."""
    full = import_path("full_download", MODULES["full_download"])
    pub = os.path.join(out, PUBLIC)
    os.makedirs(pub, exist_ok=True)
    cache = os.path.join(out, "downloads")  # hidden; kept until done so a rerun resumes
    os.makedirs(cache, exist_ok=True)

    bpe = full.GPT2BPE.download(cache)
    train_tokens = int(os.environ.get("FIX_EMBEDDING_TRAIN_TOKENS", "50000000"))
    ev = {"seq_len": 1024, "n_seqs": 1024, "batch": 8}  # 1,048,576 held-out tokens
    needed = ev["seq_len"] * ev["n_seqs"] + 1
    train, val, test = full.openwebtext_splits(cache, bpe, train_tokens, 100_000, needed)
    train.tofile(os.path.join(pub, "train.bin"))
    val.tofile(os.path.join(pub, "val.bin"))
    test[:needed].tofile(os.path.join(out, "test.bin"))
    with open(os.path.join(pub, "tokenizer.json"), "w") as f:
        merges = [" ".join(pair) for pair in sorted(bpe.ranks, key=bpe.ranks.get)]
        json.dump({"kind": "GPT-2 byte-level BPE", "encoder": bpe.encoder, "merges": merges}, f)
        f.write("\n")

    device = "cuda" if torch.cuda.is_available() else "cpu"
    configs, losses = {}, {}
    for name, repo, shape in (
        ("large", "openai-community/gpt2-xl", dict(n_layer=48, n_head=25, n_embd=1600)),
        ("small", "openai-community/gpt2", dict(n_layer=12, n_head=12, n_embd=768)),
    ):
        config = model_mod.GPTConfig(vocab_size=50257, block_size=1024, **shape)
        configs[name] = dataclasses.asdict(config)
        model = model_mod.GPT(config)
        model.load_state_dict(full.gpt2_state_dict(full.download_safetensors(cache, repo), model))
        log(f"{name}: {repo} loaded; measuring its held-out loss on {device}")
        losses[f"{name}_original"] = heldout_loss(model, test, ev["seq_len"], ev["n_seqs"], ev["batch"], device)
        if name == "large":
            permute_embedding(model, PERMUTATION_SEED)
            losses["large_permuted"] = heldout_loss(model, test, ev["seq_len"], ev["n_seqs"], ev["batch"], device)
        log(f"  held-out losses so far: {losses}")
        save_model(model_mod, model, os.path.join(pub, f"{name}_model.pth"))
        del model
        if device == "cuda":
            torch.cuda.empty_cache()

    shutil.rmtree(cache)  # ~9 GB no longer needed: the models are in workspace/
    info = {
        "scale": "full",
        "fingerprint": stamp,
        "large_config": configs["large"],
        "small_config": configs["small"],
        "eval": ev,
        "measured": losses,
        "torch": torch.__version__,
        "python": sys.version.split()[0],
    }
    finish(out, info, PROVIDED + ("train.bin", "val.bin", "tokenizer.json"))


def main():
    if len(sys.argv) != 4:
        raise SystemExit("usage: prepare.py MODEL_PY SMOKE_TOKENIZER_PY FULL_DOWNLOAD_PY")
    MODULES.update(smoke_tokenizer=sys.argv[2], full_download=sys.argv[3])
    out = os.environ["REBENCH_PREPARED"]
    scale = os.environ.get("FIX_EMBEDDING_SCALE", "full").strip()
    if scale not in ("smoke", "full"):
        raise SystemExit(f"FIX_EMBEDDING_SCALE must be smoke or full, got {scale!r}")
    stamp = fingerprint(scale)
    if already_done(out, stamp):
        log(f"{scale}: already prepared in {out}")
        return
    info_path = os.path.join(out, "info.json")
    if os.path.exists(info_path):
        os.remove(info_path)  # written last: none means unfinished
    model_mod = import_path("fix_embedding_model", sys.argv[1])
    started = time.time()
    (prepare_smoke if scale == "smoke" else prepare_full)(out, model_mod, stamp)
    log(f"{scale}: done in {time.time() - started:.1f} s")


if __name__ == "__main__":
    main()
