"""The smoke profile's corpus and tokenizer (stdlib only).

Corpus: every .py file of this Python's standard library, tests, idlelib
and site-packages left out, split BY FILE with a fixed hash of its relative
path (5% held-out test, 5% validation, 90% training), so no held-out file
is seen in training.

Tokenizer: word pieces, GPT-2 style. Text is cut into pieces (an optional
space plus an identifier or a number, a newline plus its indentation, a run
of spaces, a run of punctuation); the vocabulary is the 256 byte values plus
the most frequent multi-byte pieces of the training split; a piece outside
it is spelled as its UTF-8 bytes. Pieces make tokens about 1.8 bytes long,
so losses per token are GPT-2-like (~2-3 nats) rather than byte-level ones.
"""

import collections
import os
import re
import sysconfig
import zlib

import numpy as np

PIECE = re.compile(r" ?[A-Za-z_][A-Za-z0-9_]*| ?[0-9]+|\n[ ]*| +| ?[^A-Za-z0-9_\s]+|\s")
SKIP_DIRS = ("site-packages", "idlelib", "__pycache__", "tests")


def stdlib_files(root):
    """Relative paths of the corpus files, sorted (deterministic order)."""
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("test") and d not in SKIP_DIRS)
        rel = os.path.relpath(folder, root)
        for name in sorted(files):
            if name.endswith(".py") and not name.startswith("test_"):
                found.append(os.path.normpath(os.path.join(rel, name)))
    return sorted(found)


def stdlib_splits():
    root = sysconfig.get_paths()["stdlib"]
    splits = {"train": [], "val": [], "test": []}
    for rel in stdlib_files(root):
        bucket = zlib.crc32(rel.encode()) % 20
        split = "test" if bucket == 0 else "val" if bucket == 1 else "train"
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
            splits[split].append(f.read())
    return {name: "\n".join(parts) for name, parts in splits.items()}


def build_vocab(text, vocab_size):
    """The multi-byte pieces that get their own ids 256, 257, ...: the most
    frequent ones in `text` (ties broken by the piece itself)."""
    counts = collections.Counter(PIECE.findall(text))
    multi = [(n, p) for p, n in counts.items() if len(p.encode()) > 1]
    multi.sort(key=lambda item: (-item[0], item[1]))
    return [p for _, p in multi[: vocab_size - 256]]


def encode(text, pieces):
    ids = {p: 256 + i for i, p in enumerate(pieces)}
    out = []
    for piece in PIECE.findall(text):
        token = ids.get(piece)
        if token is None:
            out.extend(piece.encode())
        else:
            out.append(token)
    return np.array(out, dtype=np.uint16)


def describe(pieces):
    """tokenizer.json for the participant: what each id stands for."""
    return {
        "kind": "word pieces over UTF-8 bytes",
        "pattern": PIECE.pattern,
        "note": "ids 0-255 are single bytes; id 256 + i is pieces[i]; "
        "a piece outside the vocabulary is spelled as its UTF-8 bytes",
        "vocab_size": 256 + len(pieces),
        "pieces": pieces,
    }
