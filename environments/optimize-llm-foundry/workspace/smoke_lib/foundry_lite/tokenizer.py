"""A byte-level BPE tokenizer (GPT-2 style) for the smoke model.

tokenizer.json holds the pre-tokenization pattern, the merges in rank order
(merge i makes token id 256 + i from two existing ids) and the special
tokens, whose ids follow the merges. Text is cut into words by the pattern;
each word's UTF-8 bytes are merged by lowest rank first, exactly as GPT-2's
`bpe()` does.
"""

import json
import os
import re

DEFAULT_PATTERN = r" ?[A-Za-z_][A-Za-z0-9_]*| ?[0-9]+|\n[ ]*| +| ?[^A-Za-z0-9_\s]+|\s"


class Tokenizer:
    def __init__(self, merges, pattern=DEFAULT_PATTERN, special_tokens=("<|endoftext|>", "<|pad|>")):
        self.merges = [tuple(m) for m in merges]
        self.pattern = pattern
        self.word = re.compile(pattern)
        self.ranks = {pair: i for i, pair in enumerate(self.merges)}
        first_special = 256 + len(self.merges)
        self.special = {name: first_special + i for i, name in enumerate(special_tokens)}
        self.eos_id = self.special[special_tokens[0]]
        self.pad_id = self.special[special_tokens[1]]
        self.vocab_size = first_special + len(self.special)

    @classmethod
    def from_pretrained(cls, path):
        """`path` is a tokenizer.json or a model folder holding one."""
        if os.path.isdir(path):
            path = os.path.join(path, "tokenizer.json")
        with open(path) as f:
            blob = json.load(f)
        return cls(blob["merges"], blob["pattern"], tuple(blob["special_tokens"]))

    def save_pretrained(self, folder):
        os.makedirs(folder, exist_ok=True)
        blob = {
            "kind": "byte-level BPE",
            "pattern": self.pattern,
            "merges": [list(m) for m in self.merges],
            "special_tokens": list(self.special),
        }
        with open(os.path.join(folder, "tokenizer.json"), "w") as f:
            json.dump(blob, f)
            f.write("\n")

    def bpe(self, word_bytes):
        ids = list(word_bytes)
        ranks = self.ranks
        while len(ids) > 1:
            best, best_rank = None, None
            for pair in zip(ids, ids[1:]):
                rank = ranks.get(pair)
                if rank is not None and (best_rank is None or rank < best_rank):
                    best, best_rank = pair, rank
            if best is None:
                break
            new_id = 256 + best_rank
            merged, i = [], 0
            while i < len(ids):
                if i + 1 < len(ids) and ids[i] == best[0] and ids[i + 1] == best[1]:
                    merged.append(new_id)
                    i += 2
                else:
                    merged.append(ids[i])
                    i += 1
            ids = merged
        return ids

    def encode(self, text, cache=None):
        """Token ids of `text`. `cache` (a dict, optional) remembers words
        already merged; the ids are the same with or without it."""
        out = []
        for word in self.word.findall(text):
            if cache is not None:
                ids = cache.get(word)
                if ids is None:
                    ids = cache[word] = self.bpe(word.encode("utf-8"))
            else:
                ids = self.bpe(word.encode("utf-8"))
            out.extend(ids)
        return out

    def decode(self, ids):
        table = {i: bytes([i]) for i in range(256)}
        for i, (a, b) in enumerate(self.merges):
            table[256 + i] = table[a] + table[b]
        names = {v: k for k, v in self.special.items()}
        parts = []
        for i in ids:
            parts.append(names[i].encode() if i in names else table[i])
        return b"".join(parts).decode("utf-8", errors="replace")


def train_bpe(text, n_merges, pattern=DEFAULT_PATTERN):
    """Merges learned from `text`: repeatedly the most frequent adjacent pair
    (ties: the smallest pair of ids), counted over distinct words."""
    counts = {}
    for word in re.findall(pattern, text):
        counts[word] = counts.get(word, 0) + 1
    words = [[list(w.encode("utf-8")), n] for w, n in sorted(counts.items())]
    merges = []
    for step in range(n_merges):
        pairs = {}
        for ids, n in words:
            for pair in zip(ids, ids[1:]):
                pairs[pair] = pairs.get(pair, 0) + n
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], p))
        new_id = 256 + step
        merges.append(best)
        for entry in words:
            ids = entry[0]
            if len(ids) < 2:
                continue
            merged, i = [], 0
            while i < len(ids):
                if i + 1 < len(ids) and ids[i] == best[0] and ids[i + 1] == best[1]:
                    merged.append(new_id)
                    i += 2
                else:
                    merged.append(ids[i])
                    i += 1
            entry[0] = merged
    return merges
