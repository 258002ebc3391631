"""Tokenizer, chat format and decoding for gpt2-chat-rl (protected: do not edit).

The official scorer uses exactly this file (its own pristine copy) to turn
your `final_model.pth` into answers: every held-out prompt is put into the
chat template, and the answer is decoded GREEDILY (temperature 0) until the
stop token or `max_new_tokens`, whichever comes first:

                 template                                    stop     max_new_tokens
    smoke        "user : {prompt}\\nassistant :"             "\\n"     32 words
    full (GPT-2) "User: {prompt}\\nAssistant:"               newline  128 BPE tokens
                                                             or <|endoftext|>

The first answer token is never the stop token (it is masked out at the
first step: answers are never empty). The answer the judge sees is the
decoded text before the stop token (an answer cut off by `max_new_tokens`
is judged as it is). To teach your model
to stop, train it to emit `tok.stop_id` after its answer (`answer_ids`).

    tok = load_tokenizer()                     # tokenizer.json in the workspace
    ids = prompt_ids(tok, "tell me about the river .")
    answers = respond(model, tok, prompts)     # the scorer's decoding: greedy
    samples = sample(model, tok, prompts, n=8, temperature=1.0, seed=0)
    # samples[i] is a list of n answers to prompts[i]
    ids, texts = generate(model, tok, prompts, n=..., temperature=..., seed=...)

Model inputs are `prompt_ids + answer_ids`; `answer_ids` ends with the stop
token. Sequences longer than the model's block_size keep their last tokens.
"""

import functools
import json
import re

import torch

SETTINGS = {
    "words": {"template": "user : {prompt}\nassistant :", "max_new_tokens": 32},
    "gpt2-bpe": {"template": "User: {prompt}\nAssistant:", "max_new_tokens": 128},
}


# ------------------------------------------------------------------ tokenizers


class WordTokenizer:
    """The smoke tokenizer: lower-case words, punctuation and newlines."""

    kind = "words"
    PATTERN = re.compile(r"[a-z]+|[.,!?:;']|\n")

    def __init__(self, words):
        self.words = list(words)
        self.index = {w: i for i, w in enumerate(self.words)}
        self.unk_id = self.index["<unk>"]
        self.stop_id = self.index["\n"]
        self.stop_ids = {self.stop_id}

    def encode(self, text):
        return [self.index.get(w, self.unk_id) for w in self.PATTERN.findall(text.lower())]

    def decode(self, ids):
        out = ""
        for i in ids:
            word = self.words[i]
            if not out or out.endswith("\n") or word == "\n" or word in ".,!?:;'":
                out += word
            else:
                out += " " + word
        return out


def _bytes_to_unicode():
    """GPT-2's reversible map from bytes to printable unicode characters."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


class GPT2Tokenizer:
    """GPT-2's byte-level BPE in plain Python (the full task). Pre-tokenizing
    uses the stdlib `re`, which lacks \\p{L}/\\p{N}: letters are [^\\W\\d_] and
    numbers \\d (differs from GPT-2 only on rare Unicode categories)."""

    kind = "gpt2-bpe"
    PATTERN = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d+| ?(?:[^\s\w]|_)+|\s+(?!\S)|\s+""")
    EOT = 50256

    def __init__(self, encoder, merges):
        self.encoder = encoder
        self.decoder = {v: k for k, v in encoder.items()}
        self.ranks = {tuple(pair.split()): i for i, pair in enumerate(merges)}
        self.byte_encoder = _bytes_to_unicode()
        self.byte_decoder = {v: k for k, v in self.byte_encoder.items()}
        self.stop_id = self.encoder["Ċ"]  # "\n"
        # any token containing a newline stops an answer, and so does <|endoftext|>
        self.stop_ids = {i for t, i in encoder.items() if "Ċ" in t} | {self.EOT}
        self._bpe = functools.lru_cache(maxsize=1 << 16)(self._bpe_uncached)

    def _bpe_uncached(self, word):
        parts = list(word)
        while len(parts) > 1:
            pairs = [(self.ranks.get(p, 1 << 30), i) for i, p in enumerate(zip(parts, parts[1:]))]
            rank, i = min(pairs)
            if rank == 1 << 30:
                break
            first, second = parts[i], parts[i + 1]
            merged, j = [], 0
            while j < len(parts):
                if j < len(parts) - 1 and parts[j] == first and parts[j + 1] == second:
                    merged.append(first + second)
                    j += 2
                else:
                    merged.append(parts[j])
                    j += 1
            parts = merged
        return tuple(self.encoder[p] for p in parts)

    def encode(self, text):
        out = []
        for piece in self.PATTERN.findall(text):
            out.extend(self._bpe("".join(self.byte_encoder[b] for b in piece.encode("utf-8"))))
        return out

    def decode(self, ids):
        text = "".join(self.decoder.get(i, "") for i in ids)
        return bytes(self.byte_decoder[c] for c in text if c in self.byte_decoder).decode("utf-8", errors="replace")


def load_tokenizer(path="tokenizer.json"):
    with open(path, encoding="utf-8") as f:
        spec = json.load(f)
    if spec["kind"] == "words":
        return WordTokenizer(spec["words"])
    if spec["kind"] == "gpt2-bpe":
        return GPT2Tokenizer(spec["encoder"], spec["merges"])
    raise ValueError(f"unknown tokenizer kind {spec['kind']!r}")


# ----------------------------------------------------------------- chat format


def prompt_ids(tok, prompt):
    """The token ids the model reads before its answer."""
    return tok.encode(SETTINGS[tok.kind]["template"].format(prompt=prompt))


def answer_ids(tok, answer):
    """The token ids of `answer` followed by the stop token (training targets)."""
    return tok.encode(answer) + [tok.stop_id]


def _forward_cached(model, idx, cache):
    """model.GPT's forward with a key/value cache: `idx` are the tokens after
    the cached ones. Returns (logits, new cache). The same arithmetic as
    GPT.forward (it reads the model's own modules)."""
    tr = model.transformer
    past = 0 if cache is None else cache[0][0].shape[2]
    t = idx.shape[1]
    pos = torch.arange(past, past + t, device=idx.device)
    x = tr.wte(idx) + tr.wpe(pos)
    new_cache = []
    for i, block in enumerate(tr.h):
        attn = block.attn
        h = block.ln_1(x)
        b, _, c = h.shape
        q, k, v = attn.c_attn(h).split(c, dim=2)
        q, k, v = (z.view(b, t, attn.n_head, c // attn.n_head).transpose(1, 2) for z in (q, k, v))
        if cache is not None:
            k = torch.cat([cache[i][0], k], dim=2)
            v = torch.cat([cache[i][1], v], dim=2)
        new_cache.append((k, v))
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=cache is None and t > 1)
        x = x + attn.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))
        x = x + block.mlp(block.ln_2(x))
    x = tr.ln_f(x)
    return torch.nn.functional.linear(x, tr.wte.weight), new_cache


def max_new_tokens(tok):
    return SETTINGS[tok.kind]["max_new_tokens"]


@torch.no_grad()
def generate(model, tok, prompts, n=1, temperature=0.0, top_k=None, seed=0, batch_size=64, max_new=None):
    """Answers `n` per prompt. temperature 0 = greedy (the scorer's
    decoding; `n` copies are then identical). Returns (ids, texts), each a
    list (per prompt) of n answers: the answer's token ids without the stop
    token, and its decoded text. Prompts of equal token length are batched
    together (no padding), so results do not depend on other prompts of
    other lengths; sampling is reproducible for the same call and seed."""
    max_new = max_new or max_new_tokens(tok)
    device = next(model.parameters()).device
    block = model.config.block_size
    was_training = model.training
    model.eval()
    encoded = [prompt_ids(tok, p) for p in prompts]
    groups = {}
    for i, ids in enumerate(encoded):
        for j in range(n):
            groups.setdefault(len(ids), []).append((i, j))
    generator = torch.Generator(device=device).manual_seed(seed) if temperature > 0 else None
    out_ids = [[None] * n for _ in prompts]
    stop = torch.tensor(sorted(tok.stop_ids), device=device)
    for length in sorted(groups):
        rows = groups[length]
        for start in range(0, len(rows), batch_size):
            chunk = rows[start : start + batch_size]
            x = torch.tensor([encoded[i] for i, _ in chunk], dtype=torch.long, device=device)[:, -(block - 1) :]
            done = torch.zeros(len(chunk), dtype=torch.bool, device=device)
            answers = [[] for _ in chunk]
            cache = None
            for step in range(max_new):
                if cache is None or cache[0][0].shape[2] >= block:  # (re)start on the last tokens
                    x = x[:, -(block - 1) :] if cache is not None else x
                    logits, cache = _forward_cached(model, x, None)
                else:
                    logits, cache = _forward_cached(model, x[:, -1:], cache)
                logits = logits[:, -1, :].float()
                if step == 0:  # an answer has at least one token
                    logits[:, stop] = float("-inf")
                if temperature > 0:
                    logits = logits / temperature
                    if top_k:
                        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]
                        logits = logits.masked_fill(logits < kth, float("-inf"))
                    nxt = torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator)[:, 0]
                else:
                    nxt = logits.argmax(dim=-1)
                stopped = torch.isin(nxt, stop)
                for r in (~done & ~stopped).nonzero()[:, 0].tolist():
                    answers[r].append(int(nxt[r]))
                done |= stopped
                if bool(done.all()):
                    break
                x = torch.cat([x, nxt[:, None]], dim=1)
            for (i, j), ids in zip(chunk, answers):
                out_ids[i][j] = ids
    model.train(was_training)
    texts = [[tok.decode(ids) for ids in per] for per in out_ids]
    return out_ids, texts


def respond(model, tok, prompts, batch_size=64):
    """One greedy answer per prompt: what the scorer does with your model."""
    return [texts[0] for texts in generate(model, tok, prompts, n=1, temperature=0.0, batch_size=batch_size)[1]]


def sample(model, tok, prompts, n=8, temperature=1.0, top_k=None, seed=0, batch_size=64):
    """n sampled answers (strings) per prompt."""
    return generate(model, tok, prompts, n=n, temperature=temperature, top_k=top_k, seed=seed, batch_size=batch_size)[1]
