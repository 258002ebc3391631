"""Offline self-test of the full profile's download code (full_download.py),
which cannot run for real without internet. Run by the CI test:

    selftest_full.py MODEL_PY FULL_DOWNLOAD_PY

Checks, on synthetic data in a temporary folder:
  - a tiny GPT written in Hugging Face's GPT-2 layout (Conv1D weights stored
    (in, out), causal-mask buffers, no "transformer." prefix) as safetensors,
    in float32 and bfloat16, maps back onto model.GPT with the same outputs;
  - the BPE encoder merges by rank and splits text like GPT-2's pattern;
  - an OpenWebText-format tarball (a tar of .xz files, each an xz-compressed
    tar of .txt documents), fetched through download() from a file:// URL,
    is split by document and tokenized with an end-of-text after each one.
Prints "ok" last.
"""

import importlib.util
import io
import json
import lzma
import os
import sys
import tarfile
import tempfile

import numpy as np
import torch


def import_path(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_safetensors(path, arrays, dtype):
    """Writes {name: float32 array} as safetensors, stored as F32 or BF16."""
    header, blobs, offset = {}, [], 0
    for name, array in arrays.items():
        if dtype == "BF16":  # the top 16 bits of each float32 (truncation)
            data = (np.ascontiguousarray(array, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16).tobytes()
        else:
            data = np.ascontiguousarray(array, dtype=np.float32).tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text + b"".join(blobs))


def check_weights(model_mod, full, tmp):
    config = model_mod.GPTConfig(vocab_size=61, block_size=16, n_layer=2, n_head=2, n_embd=8)
    torch.manual_seed(0)
    original = model_mod.GPT(config).eval()
    arrays = {}
    conv1d = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")
    for key, value in original.state_dict().items():
        name = key.removeprefix("transformer.")
        arrays[name] = (value.t() if name.endswith(conv1d) else value).numpy()
    for i in range(config.n_layer):
        arrays[f"h.{i}.attn.bias"] = np.tril(np.ones((1, 1, 16, 16), np.float32))
    x = torch.randint(0, config.vocab_size, (2, 16))
    for dtype, tolerance in (("F32", 1e-6), ("BF16", 0.1)):
        path = os.path.join(tmp, f"tiny-{dtype}.safetensors")
        write_safetensors(path, arrays, dtype)
        rebuilt = model_mod.GPT(config).eval()
        rebuilt.load_state_dict(full.gpt2_state_dict(path, rebuilt))
        with torch.no_grad():
            gap = float((rebuilt(x)[0] - original(x)[0]).abs().max())
        assert gap <= tolerance, f"{dtype}: logits differ by {gap}"


def check_bpe(full):
    byte_encoder = full.bytes_to_unicode()
    assert len(set(byte_encoder.values())) == 256
    encoder = {c: i for i, c in enumerate(sorted(byte_encoder.values()))}
    merges = [("l", "l"), ("h", "e"), ("he", "ll"), ("Ġ", "w"), ("Ġw", "o")]
    for a, b in merges:
        encoder[a + b] = len(encoder)
    bpe = full.GPT2BPE(encoder, merges)
    decoder = {i: s for s, i in encoder.items()}
    got = [decoder[i] for i in bpe.encode("hello world")]
    assert got == ["hell", "o", "Ġwo", "r", "l", "d"], got
    pieces = full.GPT2BPE.PATTERN.findall("it's 42 __x__  \n\n é2")
    assert pieces == ["it", "'s", " 42", " __", "x", "__", "  \n\n", " é", "2"], pieces


def check_openwebtext(full, tmp):
    docs = {f"doc{i:03d}.txt": f"document number {i} says hello " * (1 + i % 5) for i in range(200)}
    outer_path = os.path.join(tmp, "urlsf_subset00.tar")
    with tarfile.open(outer_path, "w") as outer:
        for part in range(2):
            inner_bytes = io.BytesIO()
            with tarfile.open(fileobj=inner_bytes, mode="w") as inner:
                for name in sorted(docs)[part::2]:
                    data = docs[name].encode()
                    info = tarfile.TarInfo(name)
                    info.size = len(data)
                    inner.addfile(info, io.BytesIO(data))
            packed = lzma.compress(inner_bytes.getvalue())
            info = tarfile.TarInfo(f"openwebtext/urlsf_subset00-{part}_data.xz")
            info.size = len(packed)
            outer.addfile(info, io.BytesIO(packed))
    full.OWT_URLS[:] = ["file://" + outer_path]
    cache = os.path.join(tmp, "cache")
    os.makedirs(cache)

    class Bytes:  # a stand-in tokenizer: one token per byte
        def encode(self, text):
            return list(text.encode())

    train, val, test = full.openwebtext_splits(cache, Bytes(), 2000, 200, 300)
    assert (len(train), len(val), len(test)) == (2000, 200, 300), (len(train), len(val), len(test))
    assert train.dtype == np.uint16
    assert int((test == full.EOT).sum()) >= 2, "documents are separated by <|endoftext|>"
    assert os.path.isfile(os.path.join(cache, "urlsf_subset00.tar")), "download() keeps its copy"


def main():
    model_mod = import_path("fix_embedding_model", sys.argv[1])
    full = import_path("full_download", sys.argv[2])
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        check_weights(model_mod, full, tmp)
        check_bpe(full)
        check_openwebtext(full, tmp)
    print("ok")


if __name__ == "__main__":
    main()
