"""Run by `rebench env prepare gpt2-chat-rl` with the venv's python.

    prepare.py MODEL_PY CHAT_PY JUDGE_PY SMOKE_WORLD_PY FULL_DOWNLOAD_PY

(the manifest names every file, so rebench re-prepares when one changes)

Writes into $REBENCH_PREPARED (the preparation folder):

    workspace/               copied into every session's workspace (participant-visible)
        base_model.pth       the pretrained model (smoke: trained here; full: GPT-2)
        final_model.pth      a copy of it: the starting solution, scorable as it is
        tokenizer.json       the tokenizer (chat.load_tokenizer)
        train_prompts.txt    TRAINING prompts, one per line, no answers
        public_prompts.json  a few other prompts with both baselines' answers,
                             for the local score.py
        topics.json          smoke only: the topics the rules judge knows
        judge_config.json    full only, when the operator set REBENCH_TRAIN_JUDGE_URL
    heldout.json             HELD-OUT prompts and both baselines' answers (hidden)
    info.json                configs, decoding, baselines, file list (hidden)

$GPT2_CHAT_RL_SCALE (the profile's prepare_env) picks what is made:

  smoke  offline, ~1 minute on one CPU thread: a tiny word-level GPT trained
         on a generated plain-text corpus (prepare/smoke_world.py).
  full   needs internet: GPT-2 (124M) and prompt sets from the Hugging Face
         hub (prepare/full_download.py). Never runs at scoring time.

The two baselines are fixed models whose held-out answers are made here:
  baseline "base-greedy":   the base model, greedy (the scorer's decoding)
  baseline "base-sampled":  the base model sampled at temperature 0.7,
                            top-k 50, seed 0 (full) / temperature 0.7 (smoke)

Work already done is skipped: the script exits at once when info.json (with
the same fingerprint of the scripts, scale and versions) and every file it
lists are present.
"""

import dataclasses
import hashlib
import importlib.util
import json
import os
import shutil
import sys
import time

sys.dont_write_bytecode = True

import numpy as np
import torch

PUBLIC = "workspace"
MODULES = {}


def log(message):
    print(f"[gpt2-chat-rl prepare {time.strftime('%H:%M:%S')}] {message}", flush=True)


def import_path(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def fingerprint(scale):
    digest = hashlib.sha256(f"{scale}\n{sys.version}\n{torch.__version__}\n".encode())
    for path in [os.path.abspath(__file__)] + sys.argv[1:]:
        with open(path, "rb") as f:
            digest.update(hashlib.sha256(f.read()).digest())
    return digest.hexdigest()


def already_done(out, stamp):
    try:
        with open(os.path.join(out, "info.json")) as f:
            info = json.load(f)
    except (OSError, ValueError):
        return False
    if info.get("fingerprint") != stamp:
        return False
    return all(os.path.isfile(os.path.join(out, rel)) for rel in info.get("files", []))


def write_json(path, value, indent=1):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, indent=indent, sort_keys=True)
        f.write("\n")


def make_baselines(chat, model, tok, prompts, sampled):
    """{baseline name: [answer per prompt]}"""
    return {
        "base-greedy": chat.respond(model, tok, prompts),
        "base-sampled": [a[0] for a in chat.sample(model, tok, prompts, n=1, **sampled)],
    }


def finish(out, info, public_files, heldout, public):
    pub = os.path.join(out, PUBLIC)
    write_json(os.path.join(out, "heldout.json"), heldout)
    write_json(os.path.join(pub, "public_prompts.json"), public)
    shutil.copyfile(os.path.join(pub, "base_model.pth"), os.path.join(pub, "final_model.pth"))
    files = list(public_files) + ["public_prompts.json", "final_model.pth"]
    info["base_sha256"] = sha256(os.path.join(pub, "base_model.pth"))
    info["files"] = [os.path.join(PUBLIC, name) for name in files] + ["heldout.json"]
    write_json(os.path.join(out, "info.json"), info, indent=2)


def pairs(prompts, baselines):
    return [{"prompt": p, **{name: answers[i] for name, answers in baselines.items()}} for i, p in enumerate(prompts)]


# ---------------------------------------------------------------- smoke scale

SMOKE = {
    "model": {"block_size": 64, "n_layer": 2, "n_head": 4, "n_embd": 64},
    "train": {"steps": 600, "batch": 32, "lr": 3e-3, "seed": 1},
    "corpus": {"seed": 7, "docs": 3000},
    "sampled": {"temperature": 0.7, "seed": 0},
}


def pretrain(model, tokens, steps, batch, lr, seed):
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
    model.eval()
    return model


def prepare_smoke(out, model_mod, chat, stamp):
    torch.set_num_threads(1)
    world = import_path("smoke_world", MODULES["smoke_world"])
    judge_mod = import_path("gpt2_chat_rl_judge", MODULES["judge"])
    topics = world.topics()
    docs = world.corpus(SMOKE["corpus"]["seed"], SMOKE["corpus"]["docs"])
    text = "\n".join(docs) + "\n"
    prompts = world.prompts()
    pattern = chat.WordTokenizer.PATTERN
    seen = set(pattern.findall(text))
    for split in prompts.values():
        for p in split:
            seen.update(pattern.findall(chat.SETTINGS["words"]["template"].format(prompt=p).lower()))
    words = ["<unk>", "\n"] + sorted(seen - {"\n"})
    tok = chat.WordTokenizer(words)
    tokens = np.array(tok.encode(text), dtype=np.uint16)
    log(f"corpus: {len(docs):,} documents, {len(tokens):,} tokens, vocabulary {len(words)}")

    pub = os.path.join(out, PUBLIC)
    os.makedirs(pub, exist_ok=True)
    write_json(os.path.join(pub, "tokenizer.json"), {"kind": "words", "words": words}, indent=None)
    write_json(os.path.join(pub, "topics.json"), topics)
    with open(os.path.join(pub, "train_prompts.txt"), "w") as f:
        f.write("".join(p + "\n" for p in prompts["train"]))

    config = model_mod.GPTConfig(vocab_size=len(words), **SMOKE["model"])
    torch.manual_seed(SMOKE["train"]["seed"])
    model = model_mod.GPT(config)
    n_params = sum(p.numel() for p in model.parameters())
    log(f"pretraining the base model ({n_params:,} parameters): {SMOKE['train']}")
    started = time.time()
    pretrain(model, tokens, **SMOKE["train"])
    log(f"  {time.time() - started:.1f} s")
    model_mod.save_model(model, os.path.join(pub, "base_model.pth"))

    judge = judge_mod.RulesJudge(topics)
    heldout = pairs(prompts["heldout"], make_baselines(chat, model, tok, prompts["heldout"], SMOKE["sampled"]))
    public = pairs(prompts["public"], make_baselines(chat, model, tok, prompts["public"], SMOKE["sampled"]))
    measured = {}
    for name in ("base-greedy", "base-sampled"):
        measured[f"{name} mean points"] = sum(judge.points(r["prompt"], r[name]) for r in heldout) / len(heldout)
    measured["base-greedy vs base-sampled"] = sum(
        judge_mod.win_rate(judge, r["prompt"], r["base-greedy"], r["base-sampled"]) for r in heldout
    ) / len(heldout)
    log(f"baselines on the held-out prompts: {measured}")
    info = {
        "scale": "smoke",
        "fingerprint": stamp,
        "config": dataclasses.asdict(config),
        "tokenizer": "words",
        "baselines": {"base-greedy": {"temperature": 0}, "base-sampled": SMOKE["sampled"]},
        "measured": measured,
        "n_heldout": len(heldout),
        "torch": torch.__version__,
        "python": sys.version.split()[0],
    }
    finish(out, info, ("base_model.pth", "tokenizer.json", "topics.json", "train_prompts.txt"), heldout, public)


# ----------------------------------------------------------------- full scale


def prepare_full(out, model_mod, chat, stamp):
    """GPT-2 + prompt sets; needs internet (see prepare/full_download.py)."""
    full = import_path("full_download", MODULES["full_download"])
    pub = os.path.join(out, PUBLIC)
    os.makedirs(pub, exist_ok=True)
    cache = os.path.join(out, "downloads")
    os.makedirs(cache, exist_ok=True)
    try:
        encoder, merges = full.gpt2_tokenizer_files(cache)
        weights = full.download_safetensors(cache, "openai-community/gpt2")
        prompts = full.prompt_sets(cache)
    except OSError as e:  # URLError is an OSError
        raise SystemExit(
            f"gpt2-chat-rl full preparation needs internet access to the Hugging Face hub "
            f"({full.HF}): {e}. Run `rebench env prepare gpt2-chat-rl --profile full` on a "
            f"machine that can reach it (or set GPT2_CHAT_RL_HF_ENDPOINT to a mirror)."
        )
    write_json(os.path.join(pub, "tokenizer.json"), {"kind": "gpt2-bpe", "encoder": encoder, "merges": merges}, indent=None)
    tok = chat.GPT2Tokenizer(encoder, merges)
    config = model_mod.GPTConfig(vocab_size=50257, block_size=1024, n_layer=12, n_head=12, n_embd=768)
    model = model_mod.GPT(config)
    model.load_state_dict(full.gpt2_state_dict(weights, model))
    model.eval()
    model_mod.save_model(model, os.path.join(pub, "base_model.pth"))
    with open(os.path.join(pub, "train_prompts.txt"), "w") as f:
        f.write("".join(p.replace("\n", " ") + "\n" for p in prompts["train"]))

    device = "cuda" if torch.cuda.is_available() else "cpu"
    model.to(device)
    sampled = {"temperature": 0.7, "top_k": 50, "seed": 0}
    log(f"baseline answers on {device}: {len(prompts['heldout'])} held-out, {len(prompts['public'])} public prompts")
    heldout = pairs(prompts["heldout"], make_baselines(chat, model, tok, prompts["heldout"], sampled))
    public = pairs(prompts["public"], make_baselines(chat, model, tok, prompts["public"], sampled))
    public_files = ["base_model.pth", "tokenizer.json", "train_prompts.txt"]
    train_judge = os.environ.get("REBENCH_TRAIN_JUDGE_URL", "").strip()
    if train_judge:  # the operator's endpoint for participants' training calls
        write_json(
            os.path.join(pub, "judge_config.json"),
            {
                "url": train_judge,
                "key": os.environ.get("REBENCH_TRAIN_JUDGE_KEY", ""),
                "model": os.environ.get("REBENCH_TRAIN_JUDGE_MODEL", ""),
            },
        )
        public_files.append("judge_config.json")
    shutil.rmtree(cache)
    info = {
        "scale": "full",
        "fingerprint": stamp,
        "config": dataclasses.asdict(config),
        "tokenizer": "gpt2-bpe",
        "baselines": {"base-greedy": {"temperature": 0}, "base-sampled": sampled},
        "n_heldout": len(heldout),
        "prompt_sources": full.PROMPT_SOURCES,
        "torch": torch.__version__,
        "python": sys.version.split()[0],
    }
    finish(out, info, public_files, heldout, public)


def main():
    if len(sys.argv) != 6:
        raise SystemExit("usage: prepare.py MODEL_PY CHAT_PY JUDGE_PY SMOKE_WORLD_PY FULL_DOWNLOAD_PY")
    MODULES.update(judge=sys.argv[3], smoke_world=sys.argv[4], full_download=sys.argv[5])
    out = os.environ["REBENCH_PREPARED"]
    scale = os.environ.get("GPT2_CHAT_RL_SCALE", "full").strip()
    if scale not in ("smoke", "full"):
        raise SystemExit(f"GPT2_CHAT_RL_SCALE must be smoke or full, got {scale!r}")
    stamp = fingerprint(scale)
    if already_done(out, stamp):
        log(f"{scale}: already prepared in {out}")
        return
    info_path = os.path.join(out, "info.json")
    if os.path.exists(info_path):
        os.remove(info_path)
    model_mod = import_path("gpt2_chat_rl_model", sys.argv[1])
    chat = import_path("gpt2_chat_rl_chat", sys.argv[2])
    started = time.time()
    (prepare_smoke if scale == "smoke" else prepare_full)(out, model_mod, chat, stamp)
    log(f"{scale}: done in {time.time() - started:.1f} s")


if __name__ == "__main__":
    main()
