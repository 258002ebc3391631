"""Builds the training split into ./data/ (do not edit: this file is protected).

    python3 get_data.py                    # the task: OpenWebText, GPT-2 tokens
    python3 get_data.py --corpus stdlib    # the smoke profile: bytes of Python's stdlib

Writes
    data/train.bin   the training tokens, uint16, one long stream
    data/meta.json   the corpus's vocabulary size, mask id, sequence length, ...

Corpora
  openwebtext  GPT-2 BPE token ids (vocabulary 50257; the mask id is 50256,
               which is also GPT-2's <|endoftext|> separating documents).
               The tokens come prepared on the machine: the file named by
               --source or $RESTRICTED_MLM_OPENWEBTEXT_TRAIN (a nanoGPT-style
               train.bin of uint16 ids) is linked, not copied (~18 GB).
  stdlib       the bytes of the top-level modules of this Python's standard
               library (vocabulary 257: bytes 0-255 plus the mask id 256).
               The files are split by a hash of their names; this script
               writes only the training files. The held-out files are the
               scorer's: reading them (or your own copy of the standard
               library's held-out modules) is against the rules.

The hidden scorer builds its held-out split with this same module, so the two
splits never overlap.
"""

import argparse
import hashlib
import json
import os
import sys
import sysconfig

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DATA_DIR = os.path.join(HERE, "data")

# What the model sees and predicts, per corpus. Sequences are SEQ_LEN tokens;
# in each, round(MASK_FRACTION * SEQ_LEN) positions are replaced by MASK_ID.
CORPORA = {
    "openwebtext": {"vocab_size": 50257, "mask_id": 50256, "seq_len": 128, "mask_fraction": 0.15},
    "stdlib": {"vocab_size": 257, "mask_id": 256, "seq_len": 128, "mask_fraction": 0.15},
}
DEFAULT_CORPUS = "openwebtext"

# stdlib: a file is held out when the first byte of sha256(its name) is below
# this (about 1 file in 8).
HELD_OUT_BELOW = 32


def stdlib_modules():
    """(name, path) of the standard library's top-level .py modules, sorted."""
    root = sysconfig.get_paths()["stdlib"]
    names = sorted(n for n in os.listdir(root) if n.endswith(".py"))
    return [(n, os.path.join(root, n)) for n in names if os.path.isfile(os.path.join(root, n))]


def is_held_out(name):
    return hashlib.sha256(name.encode()).digest()[0] < HELD_OUT_BELOW


def stdlib_tokens(held_out):
    """The bytes of the training (held_out=False) or held-out files, each
    followed by a blank line, as a uint16 array."""
    parts = []
    for name, path in stdlib_modules():
        if is_held_out(name) == held_out:
            with open(path, "rb") as f:
                parts.append(f.read().rstrip(b"\n") + b"\n\n\n")
    return np.frombuffer(b"".join(parts), dtype=np.uint8).astype(np.uint16)


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def build(corpus, source=None, data_dir=DATA_DIR):
    """Writes data_dir/train.bin and data_dir/meta.json; returns the meta."""
    if corpus not in CORPORA:
        raise SystemExit(f"unknown corpus {corpus!r} (expected one of {', '.join(CORPORA)})")
    os.makedirs(data_dir, exist_ok=True)
    train_path = os.path.join(data_dir, "train.bin")
    if os.path.lexists(train_path):
        os.remove(train_path)
    meta = dict(CORPORA[corpus], corpus=corpus)
    if corpus == "stdlib":
        tokens = stdlib_tokens(held_out=False)
        tokens.tofile(train_path)
        meta["python"] = sys.version.split()[0]
        meta["files"] = sum(1 for name, _ in stdlib_modules() if not is_held_out(name))
    else:
        source = source or os.environ.get("RESTRICTED_MLM_OPENWEBTEXT_TRAIN", "")
        if not source or not os.path.isfile(source):
            raise SystemExit(
                "the OpenWebText training tokens were not found: pass --source PATH/train.bin "
                "or set RESTRICTED_MLM_OPENWEBTEXT_TRAIN (ask the operator where the prepared "
                "copy lives); for the smoke profile use --corpus stdlib"
            )
        os.symlink(os.path.abspath(source), train_path)
    meta["tokens"] = os.path.getsize(train_path) // 2
    if corpus == "stdlib":  # hashing 18 GB would take minutes; the small corpus is checked
        meta["sha256"] = sha256_of(train_path)
    with open(os.path.join(data_dir, "meta.json"), "w") as f:
        json.dump(meta, f, indent=2, sort_keys=True)
        f.write("\n")
    return meta


def load(data_dir=DATA_DIR):
    """(meta, tokens) of the built training split; tokens is a read-only uint16 memmap."""
    with open(os.path.join(data_dir, "meta.json")) as f:
        meta = json.load(f)
    tokens = np.memmap(os.path.join(data_dir, "train.bin"), dtype=np.uint16, mode="r")
    return meta, tokens


def ensure(corpus=None, data_dir=DATA_DIR):
    """The training split, built first when missing. The corpus: `corpus`,
    else $RESTRICTED_MLM_CORPUS (the scorer sets it), else whatever is built,
    else openwebtext; a different corpus already built is replaced."""
    corpus = corpus or os.environ.get("RESTRICTED_MLM_CORPUS") or None
    meta_path = os.path.join(data_dir, "meta.json")
    if os.path.exists(meta_path):
        meta, tokens = load(data_dir)
        if corpus is None or meta["corpus"] == corpus:
            return meta, tokens
    build(corpus or DEFAULT_CORPUS, data_dir=data_dir)
    return load(data_dir)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", choices=sorted(CORPORA),
                        default=os.environ.get("RESTRICTED_MLM_CORPUS") or DEFAULT_CORPUS)
    parser.add_argument("--source", help="openwebtext: the prepared train.bin to link")
    args = parser.parse_args()
    meta = build(args.corpus, args.source)
    print(f"wrote {os.path.join(DATA_DIR, 'train.bin')}: {meta['tokens']:,} tokens of {meta['corpus']} "
          f"(vocabulary {meta['vocab_size']}, mask id {meta['mask_id']}, sequences of {meta['seq_len']})")


if __name__ == "__main__":
    main()
