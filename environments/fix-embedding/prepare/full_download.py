"""The full profile's downloads (stdlib + numpy + torch only). Needs internet;
untested on the development machines, which reach only PyPI.

  - GPT-2 weights: `model.safetensors` of openai-community/gpt2-xl (6.4 GB)
    and openai-community/gpt2 (0.55 GB) from the Hugging Face hub, parsed by
    hand (the safetensors format is an 8-byte header length, a JSON header
    and raw little-endian arrays) and mapped onto model.GPT's names.
  - GPT-2's tokenizer files (vocab.json, merges.txt) and a plain-Python
    byte-level BPE encoder. Pre-tokenization uses the stdlib `re` module,
    which lacks \\p{L}/\\p{N}: letters are [^\\W\\d_] and numbers \\d, which
    differs from GPT-2's pattern only on rare Unicode categories.
  - OpenWebText: the original release's subset tarballs (a tar of .xz files,
    each an xz-compressed tar of .txt documents), read with tarfile + lzma.

Overrides: FIX_EMBEDDING_HF_ENDPOINT (default https://huggingface.co),
FIX_EMBEDDING_OWT_URLS (space-separated subset tarball URLs) or
FIX_EMBEDDING_OWT_DIR (a local folder of .txt documents instead).
Downloads go to <prepared>/downloads/ and resume when interrupted.
"""

import functools
import json
import lzma
import os
import re
import tarfile
import time
import urllib.request
import zlib

import numpy as np
import torch

HF = os.environ.get("FIX_EMBEDDING_HF_ENDPOINT", "https://huggingface.co").rstrip("/")
OWT_URLS = os.environ.get(
    "FIX_EMBEDDING_OWT_URLS",
    " ".join(f"{HF}/datasets/Skylion007/openwebtext/resolve/main/subsets/urlsf_subset{i:02d}.tar" for i in range(3)),
).split()
EOT = 50256  # GPT-2's <|endoftext|>, put after every document


def log(message):
    print(f"[fix-embedding full {time.strftime('%H:%M:%S')}] {message}", flush=True)


def download(url, dest):
    """Streams `url` to `dest` (resuming a partial `dest.part`); returns dest."""
    if os.path.isfile(dest):
        return dest
    part = dest + ".part"
    have = os.path.getsize(part) if os.path.exists(part) else 0
    request = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})
    log(f"downloading {url}" + (f" (resuming at {have:,} bytes)" if have else ""))
    with urllib.request.urlopen(request, timeout=60) as response:
        if have and response.status != 206:  # the server ignored Range: start over
            have = 0
        with open(part, "ab" if have else "wb") as out:
            while True:
                chunk = response.read(1 << 22)
                if not chunk:
                    break
                out.write(chunk)
    os.replace(part, dest)
    log(f"  {os.path.getsize(dest):,} bytes -> {dest}")
    return dest


# ------------------------------------------------------------ GPT-2 weights


def download_safetensors(cache, repo):
    name = repo.replace("/", "--") + ".safetensors"
    return download(f"{HF}/{repo}/resolve/main/model.safetensors", os.path.join(cache, name))


def read_safetensors(path):
    """{name: torch tensor} from a .safetensors file."""
    dtypes = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16, "U8": np.uint8}
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
    """Hugging Face GPT-2 tensors renamed to model.GPT's state dict. GPT-2's
    Conv1D stores (in, out): those weights are transposed for nn.Linear."""
    raw = read_safetensors(path)
    transposed = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")
    state = {}
    for name, tensor in raw.items():
        name = name.removeprefix("transformer.")
        if name.endswith(".attn.bias") or name.endswith(".attn.masked_bias") or name == "lm_head.weight":
            continue  # causal-mask buffers; lm_head is tied to wte
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


# ---------------------------------------------------------- GPT-2 tokenizer


def bytes_to_unicode():
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


class GPT2BPE:
    PATTERN = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d+| ?(?:[^\s\w]|_)+|\s+(?!\S)|\s+""")

    def __init__(self, encoder, merges):
        self.encoder = encoder
        self.ranks = {pair: i for i, pair in enumerate(merges)}
        self.byte_encoder = bytes_to_unicode()

    @classmethod
    def download(cls, cache):
        vocab = download(f"{HF}/openai-community/gpt2/resolve/main/vocab.json", os.path.join(cache, "gpt2-vocab.json"))
        merges = download(f"{HF}/openai-community/gpt2/resolve/main/merges.txt", os.path.join(cache, "gpt2-merges.txt"))
        with open(vocab, encoding="utf-8") as f:
            encoder = json.load(f)
        with open(merges, encoding="utf-8") as f:
            lines = f.read().split("\n")[1:]  # the first line is a version comment
        return cls(encoder, [tuple(line.split()) for line in lines if line.strip()])

    @functools.lru_cache(maxsize=1 << 20)
    def bpe(self, word):
        parts = list(word)
        while len(parts) > 1:
            pairs = [(self.ranks.get(p, 1 << 30), i) for i, p in enumerate(zip(parts, parts[1:]))]
            rank, i = min(pairs)
            if rank == 1 << 30:
                break
            first, second = parts[i], parts[i + 1]
            merged, j = [], 0
            while j < len(parts):  # merge every occurrence of the pair
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
            out.extend(self.bpe("".join(self.byte_encoder[b] for b in piece.encode("utf-8"))))
        return out


# -------------------------------------------------------------- OpenWebText


def owt_documents(cache):
    """(name, text) of OpenWebText documents in a fixed order."""
    local = os.environ.get("FIX_EMBEDDING_OWT_DIR")
    if local:
        for name in sorted(os.listdir(local)):
            if name.endswith(".txt"):
                with open(os.path.join(local, name), encoding="utf-8", errors="replace") as f:
                    yield name, f.read()
        return
    for url in OWT_URLS:
        path = download(url, os.path.join(cache, os.path.basename(url)))
        with tarfile.open(path) as outer:
            for member in outer:
                if not member.name.endswith(".xz"):
                    continue
                with lzma.open(outer.extractfile(member)) as xz, tarfile.open(fileobj=xz, mode="r|") as inner:
                    for doc in inner:
                        if doc.isfile():
                            yield doc.name, inner.extractfile(doc).read().decode("utf-8", errors="replace")


def openwebtext_splits(cache, bpe, train_tokens, val_tokens, test_tokens):
    """Documents go, by a fixed hash of their name, 10% to test, 10% to
    validation and 80% to training, until each split has its tokens."""
    want = {"train": train_tokens, "val": val_tokens, "test": test_tokens}
    got = {k: [] for k in want}
    count = {k: 0 for k in want}
    started = time.time()
    for name, text in owt_documents(cache):
        bucket = zlib.crc32(name.encode()) % 10
        split = "test" if bucket == 0 else "val" if bucket == 1 else "train"
        if count[split] >= want[split]:
            if all(count[k] >= want[k] for k in want):
                break
            continue
        ids = bpe.encode(text) + [EOT]
        got[split].append(np.array(ids, dtype=np.uint16))
        count[split] += len(ids)
        if sum(count.values()) % 1_000_000 < len(ids):
            log(f"  tokenized {count} in {time.time() - started:.0f} s")
    if any(count[k] < want[k] for k in want):
        raise SystemExit(f"OpenWebText ran out: {count} tokens, wanted {want}")
    return tuple(np.concatenate(got[k])[: want[k]] for k in ("train", "val", "test"))
