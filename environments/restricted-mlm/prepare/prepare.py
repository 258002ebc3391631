"""Run by `rebench env prepare restricted-mlm` with the venv's python (cwd and
$REBENCH_PREPARED = the preparation folder). Writes the scorer's hidden data:

    heldout.bin    held-out tokens, uint16, one stream
    heldout.json   its corpus, vocabulary, length and sha256
    torch.json     what torch version/devices it found

$RESTRICTED_MLM_CORPUS (the profile's prepare_env) picks the corpus:

  stdlib       (smoke) the held-out top-level modules of this Python's
               standard library, split by the workspace's get_data.py (the
               same code the participant uses for the training split, so the
               splits never overlap). Offline, about a second.
  openwebtext  (full) GPT-2 tokens of OpenWebText's validation split, in
               nanoGPT's format (train.bin / val.bin, uint16). Taken from
               $RESTRICTED_MLM_OPENWEBTEXT_SOURCE when that folder holds both
               files; otherwise, only on a machine with internet access,
               downloaded and tokenized here (pip installs `datasets` and
               `tiktoken` into a side folder, never into the shared venv; the
               download is ~13 GB, the result ~18 GB, hours on 8 cores) into
               $RESTRICTED_MLM_OPENWEBTEXT_CACHE (default
               ~/.cache/rebench/restricted-mlm-openwebtext). Only val.bin is
               copied here; train.bin stays in the source/cache folder, whose
               path is written to train_source.txt for the operator (the
               participant's get_data.py links it; see instructions.md).
               This path has not been run by us (no internet, no GPU here).
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import torch

PREPARED = os.environ["REBENCH_PREPARED"]
ENV_DIR = os.environ["REBENCH_ENV_DIR"]
CORPUS = os.environ.get("RESTRICTED_MLM_CORPUS", "openwebtext")

# argv[1]: the workspace's get_data.py (named in the manifest's command so that
# rebench re-prepares when it changes).
GET_DATA = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ENV_DIR, "workspace", "get_data.py")
sys.path.insert(0, os.path.dirname(os.path.abspath(GET_DATA)))
sys.dont_write_bytecode = True  # leave no __pycache__ in the environment's workspace
import get_data  # noqa: E402  (the participant's protected copy is the same file)


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_json(name, value):
    with open(os.path.join(PREPARED, name), "w") as f:
        json.dump(value, f, indent=2, sort_keys=True)
        f.write("\n")


def check_torch():
    info = {
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "cuda_available": torch.cuda.is_available(),
        "gpus": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())],
    }
    print(f"torch {info['torch']} (python {info['python']}), GPUs: {info['gpus'] or 'none'}")
    write_json("torch.json", info)


def stdlib_heldout():
    tokens = get_data.stdlib_tokens(held_out=True)
    files = [name for name, _ in get_data.stdlib_modules() if get_data.is_held_out(name)]
    return tokens, {"python": sys.version.split()[0], "files": files}


def openwebtext_source():
    """A folder holding nanoGPT-format train.bin and val.bin."""
    source = os.environ.get("RESTRICTED_MLM_OPENWEBTEXT_SOURCE", "")
    if source:
        if not all(os.path.isfile(os.path.join(source, f)) for f in ("train.bin", "val.bin")):
            raise SystemExit(f"RESTRICTED_MLM_OPENWEBTEXT_SOURCE={source} lacks train.bin and val.bin")
        return source
    cache = os.environ.get("RESTRICTED_MLM_OPENWEBTEXT_CACHE") or os.path.expanduser(
        "~/.cache/rebench/restricted-mlm-openwebtext"
    )
    if all(os.path.isfile(os.path.join(cache, f)) for f in ("train.bin", "val.bin")):
        return cache
    download_openwebtext(cache)
    return cache


def download_openwebtext(cache):
    """nanoGPT's data/openwebtext/prepare.py, in a side process with its own
    packages (needs internet; untested here)."""
    deps = os.path.join(cache, "deps")
    os.makedirs(deps, exist_ok=True)
    print("downloading and tokenizing OpenWebText (needs internet; ~13 GB download, hours)", flush=True)
    subprocess.check_call([sys.executable, "-m", "pip", "install", "--quiet", "--target", deps,
                           "datasets<4", "tiktoken"])
    script = r"""
import os, sys, numpy as np, tiktoken
from datasets import load_dataset
out = sys.argv[1]
enc = tiktoken.get_encoding("gpt2")
data = load_dataset("openwebtext", num_proc=8, trust_remote_code=True)
split = data["train"].train_test_split(test_size=0.0005, seed=2357, shuffle=True)
split["val"] = split.pop("test")
def process(example):
    ids = enc.encode_ordinary(example["text"]) + [enc.eot_token]
    return {"ids": ids, "len": len(ids)}
tokenized = split.map(process, remove_columns=["text"], num_proc=8)
for name, dset in tokenized.items():
    total = int(np.sum(dset["len"], dtype=np.uint64))
    path = os.path.join(out, f"{name}.bin.partial")
    arr = np.memmap(path, dtype=np.uint16, mode="w+", shape=(total,))
    shards, at = 1024, 0
    for i in range(shards):
        chunk = np.concatenate(dset.shard(num_shards=shards, index=i, contiguous=True).with_format("numpy")["ids"])
        arr[at : at + len(chunk)] = chunk
        at += len(chunk)
    arr.flush()
    os.replace(path, os.path.join(out, f"{name}.bin"))
"""
    env = dict(os.environ, PYTHONPATH=deps)
    subprocess.check_call([sys.executable, "-c", script, cache], env=env)
    shutil.rmtree(deps, ignore_errors=True)


def openwebtext_heldout():
    source = openwebtext_source()
    with open(os.path.join(PREPARED, "train_source.txt"), "w") as f:
        f.write(os.path.join(os.path.abspath(source), "train.bin") + "\n")
    tokens = np.fromfile(os.path.join(source, "val.bin"), dtype=np.uint16)
    return tokens, {"source": os.path.abspath(source)}


def main():
    if CORPUS not in get_data.CORPORA:
        raise SystemExit(f"RESTRICTED_MLM_CORPUS must be one of {sorted(get_data.CORPORA)}, got {CORPUS!r}")
    check_torch()
    heldout_path = os.path.join(PREPARED, "heldout.bin")
    meta_path = os.path.join(PREPARED, "heldout.json")
    if os.path.exists(heldout_path) and os.path.exists(meta_path):
        with open(meta_path) as f:
            meta = json.load(f)
        if meta.get("corpus") == CORPUS and meta.get("sha256") == sha256_of(heldout_path):
            print(f"held-out data already there: {meta['tokens']:,} tokens of {CORPUS}")
            return
    tokens, extra = stdlib_heldout() if CORPUS == "stdlib" else openwebtext_heldout()
    if len(tokens) < 10 * get_data.CORPORA[CORPUS]["seq_len"]:
        raise SystemExit(f"held-out split too small: {len(tokens)} tokens")
    tokens.astype(np.uint16).tofile(heldout_path + ".partial")
    os.replace(heldout_path + ".partial", heldout_path)
    meta = dict(get_data.CORPORA[CORPUS], corpus=CORPUS, tokens=int(len(tokens)), sha256=sha256_of(heldout_path))
    meta.update(extra)
    write_json("heldout.json", meta)
    print(f"wrote {heldout_path}: {len(tokens):,} tokens of {CORPUS}")


if __name__ == "__main__":
    main()
