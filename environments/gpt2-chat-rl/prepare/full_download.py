"""The full profile's downloads (stdlib + numpy + torch only). Needs internet;
untested on the development machines, which reach only PyPI.

  - GPT-2 (124M): `model.safetensors` of openai-community/gpt2 from the
    Hugging Face hub, parsed by hand (8-byte header length, JSON header, raw
    little-endian arrays) and mapped onto model.GPT's names; its tokenizer
    files vocab.json and merges.txt.
  - Prompts, instructions only (NO answers are kept anywhere):
      training  the instructions of yahma/alpaca-cleaned (alpaca_data_cleaned.json)
                without an `input` field, at most 20,000, shuffled with seed 0
      public    20 instructions of tatsu-lab/alpaca_eval (alpaca_eval.json)
      held-out  200 other instructions of alpaca_eval (seed 0), never in the
                workspace; prompts also in the training set are dropped.

Overrides: GPT2_CHAT_RL_HF_ENDPOINT (default https://huggingface.co).
Downloads go to <prepared>/downloads/ (removed when prepare succeeds).
"""

import json
import os
import random
import time
import urllib.request

import numpy as np
import torch

HF = os.environ.get("GPT2_CHAT_RL_HF_ENDPOINT", "https://huggingface.co").rstrip("/")
PROMPT_SOURCES = {
    "train": f"{HF}/datasets/yahma/alpaca-cleaned/resolve/main/alpaca_data_cleaned.json",
    "eval": f"{HF}/datasets/tatsu-lab/alpaca_eval/resolve/main/alpaca_eval.json",
}
N_TRAIN, N_PUBLIC, N_HELDOUT = 20000, 20, 200
MAX_PROMPT_CHARS = 600


def log(message):
    print(f"[gpt2-chat-rl full {time.strftime('%H:%M:%S')}] {message}", flush=True)


def download(url, dest):
    if os.path.isfile(dest):
        return dest
    part = dest + ".part"
    log(f"downloading {url}")
    with urllib.request.urlopen(urllib.request.Request(url), timeout=60) as response, open(part, "wb") as out:
        while True:
            chunk = response.read(1 << 22)
            if not chunk:
                break
            out.write(chunk)
    os.replace(part, dest)
    log(f"  {os.path.getsize(dest):,} bytes -> {dest}")
    return dest


def download_safetensors(cache, repo):
    name = repo.replace("/", "--") + ".safetensors"
    return download(f"{HF}/{repo}/resolve/main/model.safetensors", os.path.join(cache, name))


def read_safetensors(path):
    dtypes = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16}
    with open(path, "rb") as f:
        header_len = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(header_len))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + header_len)
    tensors = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        begin, end = meta["data_offsets"]
        array = np.frombuffer(data[begin:end], dtype=dtypes[meta["dtype"]]).reshape(meta["shape"])
        tensor = torch.from_numpy(array.copy())
        tensors[name] = tensor.view(torch.bfloat16).float() if meta["dtype"] == "BF16" else tensor.float()
    return tensors


def gpt2_state_dict(path, model):
    """Hugging Face GPT-2 tensors renamed to model.GPT's state dict (Conv1D
    weights, stored (in, out), are transposed for nn.Linear)."""
    raw = read_safetensors(path)
    transposed = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")
    state = {}
    for name, tensor in raw.items():
        name = name.removeprefix("transformer.")
        if name.endswith(".attn.bias") or name.endswith(".attn.masked_bias") or name == "lm_head.weight":
            continue
        if name.endswith(transposed):
            tensor = tensor.t().contiguous()
        state["transformer." + name] = tensor
    expected = model.state_dict()
    missing = sorted(set(expected) - set(state))
    extra = sorted(set(state) - set(expected))
    if missing or extra:
        raise SystemExit(f"{path}: does not map onto model.GPT (missing {missing[:4]}, extra {extra[:4]})")
    for key, value in expected.items():
        if tuple(state[key].shape) != tuple(value.shape):
            raise SystemExit(f"{path}: {key} has shape {tuple(state[key].shape)}, expected {tuple(value.shape)}")
    return state


def gpt2_tokenizer_files(cache):
    """(encoder dict, merges list of "a b" strings) of GPT-2's tokenizer."""
    vocab = download(f"{HF}/openai-community/gpt2/resolve/main/vocab.json", os.path.join(cache, "gpt2-vocab.json"))
    merges = download(f"{HF}/openai-community/gpt2/resolve/main/merges.txt", os.path.join(cache, "gpt2-merges.txt"))
    with open(vocab, encoding="utf-8") as f:
        encoder = json.load(f)
    with open(merges, encoding="utf-8") as f:
        lines = f.read().split("\n")[1:]  # the first line is a version comment
    return encoder, [line for line in lines if line.strip()]


def clean(text):
    return " ".join(str(text).split())


def prompt_sets(cache):
    """{"train", "public", "heldout"}: lists of instruction strings."""
    with open(download(PROMPT_SOURCES["train"], os.path.join(cache, "alpaca_cleaned.json")), encoding="utf-8") as f:
        train_rows = json.load(f)
    with open(download(PROMPT_SOURCES["eval"], os.path.join(cache, "alpaca_eval.json")), encoding="utf-8") as f:
        eval_rows = json.load(f)
    train = sorted({clean(r["instruction"]) for r in train_rows if not clean(r.get("input", "")) and clean(r["instruction"])})
    train = [p for p in train if len(p) <= MAX_PROMPT_CHARS]
    random.Random(0).shuffle(train)
    train = train[:N_TRAIN]
    seen = set(train)
    evals = sorted({clean(r["instruction"]) for r in eval_rows} - seen)
    evals = [p for p in evals if p and len(p) <= MAX_PROMPT_CHARS]
    random.Random(0).shuffle(evals)
    if len(evals) < N_PUBLIC + N_HELDOUT or len(train) < 1000:
        raise SystemExit(f"prompt sets too small: {len(train)} training, {len(evals)} evaluation prompts")
    return {"train": train, "public": evals[:N_PUBLIC], "heldout": evals[N_PUBLIC : N_PUBLIC + N_HELDOUT]}
