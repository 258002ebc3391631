"""A synthetic language for the smoke profile: generated offline from a fixed
seed (numpy's PCG64, identical on every machine), with structure at several
scales so that bigger models and longer training keep helping.

A lexicon of pronounceable made-up words with Zipf-like frequencies; every
word belongs to one of a few word classes; sentences follow a random Markov
chain over the classes, start with a capital letter and end with "." or "?".
"""

import numpy as np

CONSONANTS = list("bcdfghjklmnprstvwz")
VOWELS = list("aeiou")


def lexicon(rng, n_words):
    """`n_words` distinct words of 1-4 consonant-vowel(-consonant) syllables."""
    words, seen = [], set()
    while len(words) < n_words:
        syllables = int(rng.integers(1, 5))
        parts = []
        for _ in range(syllables):
            parts.append(CONSONANTS[rng.integers(len(CONSONANTS))] + VOWELS[rng.integers(len(VOWELS))])
            if rng.random() < 0.3:
                parts.append(CONSONANTS[rng.integers(len(CONSONANTS))])
        word = "".join(parts)
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


def generate(n_bytes, seed, n_words=3000, n_classes=12):
    """About `n_bytes` of text (exactly n_bytes after truncation) as bytes."""
    rng = np.random.default_rng(seed)
    words = lexicon(rng, n_words)
    word_class = rng.integers(0, n_classes, n_words)
    # Zipf-like weights by rank, normalized within each class.
    weight = 1.0 / (np.arange(n_words) + 2.7)
    members, member_cdf = [], []
    for c in range(n_classes):
        idx = np.flatnonzero(word_class == c)
        members.append(idx)
        member_cdf.append(np.cumsum(weight[idx]) / weight[idx].sum())
    transition = rng.dirichlet(np.full(n_classes, 0.3), size=n_classes)
    transition_cdf = np.cumsum(transition, axis=1)
    start_cdf = np.cumsum(rng.dirichlet(np.full(n_classes, 0.5)))

    n_tokens = n_bytes // 5 + 1000  # ~6 bytes per word with its space
    uniforms = rng.random(n_tokens)
    ends = rng.random(n_tokens) < 1.0 / 9.0  # sentences of ~9 words
    classes = np.empty(n_tokens, dtype=np.int64)
    c = int(np.searchsorted(start_cdf, uniforms[0]))
    for i in range(n_tokens):
        classes[i] = c
        row = start_cdf if ends[i] else transition_cdf[c]
        nxt = uniforms[i + 1] if i + 1 < n_tokens else 0.5
        c = min(int(np.searchsorted(row, nxt)), n_classes - 1)
    picks = rng.random(n_tokens)
    chosen = np.empty(n_tokens, dtype=np.int64)
    for cl in range(n_classes):
        at = np.flatnonzero(classes == cl)
        pos = np.minimum(np.searchsorted(member_cdf[cl], picks[at]), len(members[cl]) - 1)
        chosen[at] = members[cl][pos]
    question = rng.random(n_tokens) < 0.15
    newline = rng.random(n_tokens) < 0.3
    out, sentence_start = [], True
    for i in range(n_tokens):
        w = words[chosen[i]]
        out.append(w.capitalize() if sentence_start else w)
        if ends[i]:
            out.append("?" if question[i] else ".")
            out.append("\n" if newline[i] else " ")
            sentence_start = True
        else:
            out.append(" ")
            sentence_start = False
    text = "".join(out).encode("ascii")
    if len(text) < n_bytes:
        raise RuntimeError(f"generated {len(text)} bytes, wanted {n_bytes}")
    return text[:n_bytes]
