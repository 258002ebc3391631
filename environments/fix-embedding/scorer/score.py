"""Official scorer for fix-embedding (hidden from the participant).

Loads <workspace>/fixed_model.pth into the environment's own, unchanged
model class (its pristine workspace/model.py, not the participant's copy),
requires the large model's exact parameter names and shapes, and reports
the mean next-token cross-entropy (nats per token) on the held-out tokens in
$REBENCH_PREPARED/test.bin. No participant code runs: the file is read with
torch.load(weights_only=True).

Also checks that the provided model files in the workspace
(large_model.pth, small_model.pth) are the ones the preparation made.

Protocol: the LAST stdout line is one JSON object
{"raw": loss | null, "message": {...}, "details": {...}}; exit 0 whenever
the outcome is known (invalid submissions included).

Settings (environment variables; the profiles set them):
  FIX_EMBEDDING_DEVICE   "cuda" (default) or "cpu"
  FIX_EMBEDDING_THREADS  torch CPU threads (default: torch's choice)
The workspace is argv[1], else $REBENCH_WORKSPACE, else the cwd.
"""

import hashlib
import importlib.util
import json
import math
import os
import sys
import traceback
import zipfile

sys.dont_write_bytecode = True  # leave no __pycache__ anywhere

SUBMISSION = "fixed_model.pth"


class Invalid(Exception):
    """An attempt that gets no score; the message is shown to the participant."""


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def load_info(prepared):
    path = os.path.join(prepared, "info.json")
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise RuntimeError(f"cannot read {path} ({e}); is the environment prepared?")


def check_provided(workspace, info):
    """The provided model files must be present and unchanged."""
    for name, digest in sorted(info["provided_sha256"].items()):
        path = os.path.join(workspace, name)
        if not os.path.isfile(path):
            raise Invalid(f"protected file missing: {name} (the provided files must stay in the workspace)")
        if sha256(path) != digest:
            raise Invalid(f"protected file changed: {name} (write your model to {SUBMISSION} instead)")


def short_reason(error, limit=240):
    """The telling line of a (long, multi-line) torch.load error."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    telling = [line for line in lines if line.startswith("WeightsUnpickler error:")]
    text = (telling or lines or [""])[0]
    if telling:
        text = text.split(". ")[0]  # "Unsupported global: GLOBAL model.GPT was not an allowed global by default"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def state_dict_of(torch, blob, expected_config):
    """The state dict in a loaded fixed_model.pth: {"config", "model"} as
    model.save_model writes it, or a bare state dict."""
    if not isinstance(blob, dict):
        raise Invalid(f"{SUBMISSION} must hold a dict (use model.save_model), got {type(blob).__name__}")
    if "model" in blob and isinstance(blob["model"], dict):
        config = blob.get("config")
        if config is not None and config != expected_config:
            diffs = [
                f"{k} {config.get(k)!r} (expected {v!r})"
                for k, v in expected_config.items()
                if config.get(k) != v
            ] + [f"unknown field {k!r}" for k in config if k not in expected_config]
            raise Invalid(f"architecture changed: config differs from the large model's: {', '.join(diffs)}")
        blob = blob["model"]
    for key, value in blob.items():
        if not isinstance(value, torch.Tensor):
            raise Invalid(f"{SUBMISSION}: entry {key!r} is a {type(value).__name__}, not a tensor")
    return blob


def check_state(torch, state, model):
    """Same keys and shapes as the unchanged model; finite floating values."""
    expected = model.state_dict()
    missing = [k for k in expected if k not in state]
    unexpected = [k for k in state if k not in expected]
    if missing or unexpected:
        parts = []
        if missing:
            parts.append(f"missing {', '.join(missing[:5])}" + (f" and {len(missing) - 5} more" if len(missing) > 5 else ""))
        if unexpected:
            parts.append(
                f"unexpected {', '.join(unexpected[:5])}" + (f" and {len(unexpected) - 5} more" if len(unexpected) > 5 else "")
            )
        raise Invalid(f"parameter names do not match the model class: {'; '.join(parts)}")
    for key, want in expected.items():
        got = state[key]
        if tuple(got.shape) != tuple(want.shape):
            raise Invalid(f"shape mismatch for {key}: got {tuple(got.shape)}, expected {tuple(want.shape)}")
        if not got.is_floating_point():
            raise Invalid(f"{key} has dtype {got.dtype}, expected a floating-point tensor")
        if not bool(torch.isfinite(got).all()):
            raise Invalid(f"{key} contains NaN or infinite values")


def import_model_class(env_dir):
    path = os.path.join(env_dir, "workspace", "model.py")
    spec = importlib.util.spec_from_file_location("fix_embedding_model", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def heldout_loss(torch, np, model, tokens, seq_len, n_seqs, batch, device):
    """Mean next-token cross-entropy over the first n_seqs consecutive
    windows of `tokens`: window r reads tokens[r*seq_len : (r+1)*seq_len]
    and predicts each next token (the same definition as prepare's)."""
    total, count = 0.0, 0
    with torch.no_grad():
        for start in range(0, n_seqs, batch):
            rows = range(start, min(start + batch, n_seqs))
            chunk = np.stack([tokens[r * seq_len : r * seq_len + seq_len + 1] for r in rows]).astype(np.int64)
            chunk = torch.from_numpy(chunk).to(device)
            _, loss = model(chunk[:, :-1], chunk[:, 1:])
            total += float(loss) * len(rows)
            count += len(rows)
    return total / count


def score(workspace, details):
    prepared = os.environ.get("REBENCH_PREPARED", "")
    env_dir = os.environ.get("REBENCH_ENV_DIR") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if not prepared:
        raise RuntimeError("REBENCH_PREPARED is not set; the scorer needs the preparation folder")
    device_name = os.environ.get("FIX_EMBEDDING_DEVICE", "cuda").strip() or "cuda"
    if device_name not in ("cuda", "cpu"):
        raise Invalid(f"bad scorer settings: FIX_EMBEDDING_DEVICE must be cuda or cpu, got {device_name!r}")
    info = load_info(prepared)
    details.update(scale=info.get("scale"), device=device_name)

    try:
        import numpy as np
        import torch
    except ImportError as e:
        raise Invalid(f"torch/numpy not importable by {sys.executable} ({e}); is the environment prepared?")
    details["torch"] = torch.__version__
    threads = os.environ.get("FIX_EMBEDDING_THREADS", "").strip()
    if threads:
        torch.set_num_threads(int(threads))
    if device_name == "cuda":
        if not torch.cuda.is_available():
            raise Invalid(f"this profile scores on a CUDA GPU, but torch {torch.__version__} sees none")
        details["gpu"] = torch.cuda.get_device_name(0)

    check_provided(workspace, info)
    path = os.path.join(workspace, SUBMISSION)
    if not os.path.isfile(path):
        raise Invalid(f"no {SUBMISSION} in the workspace: write one (the starting `python3 solve.py` does)")

    mod = import_model_class(env_dir)
    expected_config = info["large_config"]
    model = mod.GPT(mod.GPTConfig(**expected_config))
    try:
        blob = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:
        hint = "" if zipfile.is_zipfile(path) else " (it is not a file written by torch.save)"
        raise Invalid(
            f"could not load {SUBMISSION} with torch.load(weights_only=True): {type(e).__name__}: {short_reason(e)}{hint}"
        )
    state = state_dict_of(torch, blob, expected_config)
    check_state(torch, state, model)
    model.load_state_dict({k: v.float() for k, v in state.items()}, strict=True)
    model.eval().to(device_name)

    ev = info["eval"]
    tokens = np.fromfile(os.path.join(prepared, "test.bin"), dtype=np.uint16)
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=device_name == "cuda"):
        loss = heldout_loss(torch, np, model, tokens, ev["seq_len"], ev["n_seqs"], ev["batch"], device_name)
    if not math.isfinite(loss):
        raise Invalid(f"held-out loss is not finite ({loss})")
    n_tokens = ev["seq_len"] * ev["n_seqs"]
    details.update(loss=loss, tokens=n_tokens, measured_at_prepare=info.get("measured"))
    return {"raw": loss, "message": {"loss": round(loss, 5), "tokens": n_tokens}, "details": details}


def main():
    if len(sys.argv) > 1:
        workspace = sys.argv[1]
    else:
        workspace = os.environ.get("REBENCH_WORKSPACE") or os.getcwd()
    workspace = os.path.abspath(workspace)
    details = {"workspace": workspace}
    try:
        result = score(workspace, details)
    except Invalid as e:
        result = {"raw": None, "message": {"error": str(e)}, "details": details}
    except Exception as e:
        details["traceback"] = traceback.format_exc()
        result = {"raw": None, "message": {"error": f"scorer error: {type(e).__name__}: {e}"}, "details": details}
    print(json.dumps(result), flush=True)
    sys.stderr.flush()
    os._exit(0)  # nothing may print after the result line


if __name__ == "__main__":
    main()
