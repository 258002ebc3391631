"""Loading a trained_model/ folder's weights without running any of its
code, and the L1 distance between two sets of weights. Shared by the
scorer and prepare (imported by path)."""

import json
import os

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
INDEXES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")


class WeightsError(Exception):
    pass


def _load_file(torch, path):
    if path.endswith(".safetensors"):
        try:
            from safetensors.torch import load_file
        except ImportError:
            raise WeightsError(f"{os.path.basename(path)}: safetensors is not installed in this venv")
        return load_file(path, device="cpu")
    try:
        blob = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise WeightsError(f"could not load {os.path.basename(path)} with torch.load(weights_only=True): {first[:200]}")
    if not isinstance(blob, dict):
        raise WeightsError(f"{os.path.basename(path)} holds a {type(blob).__name__}, not a state dict")
    return blob


def load_folder(torch, folder):
    """The state dict in a Hugging Face-style model folder: one weights file
    or an index of shards."""
    if not os.path.isdir(folder):
        raise WeightsError(f"no {os.path.basename(folder)}/ folder")
    for index in INDEXES:
        path = os.path.join(folder, index)
        if os.path.isfile(path):
            with open(path) as f:
                shards = sorted(set(json.load(f)["weight_map"].values()))
            state = {}
            for shard in shards:
                state.update(_load_file(torch, os.path.join(folder, shard)))
            return state
    for name in WEIGHT_FILES:
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            return _load_file(torch, path)
    raise WeightsError(f"{os.path.basename(folder)}/ has no {' or '.join(WEIGHT_FILES)}")


def l1_distance(torch, state, reference):
    """sum |w - w_ref| over all weights (in float64), after checking that
    the names and shapes are the reference's and the values finite."""
    missing = [k for k in reference if k not in state]
    unexpected = [k for k in state if k not in reference]
    if missing or unexpected:
        parts = []
        if missing:
            parts.append("missing " + ", ".join(missing[:4]) + (f" and {len(missing) - 4} more" if len(missing) > 4 else ""))
        if unexpected:
            parts.append("unexpected " + ", ".join(unexpected[:4]) + (f" and {len(unexpected) - 4} more" if len(unexpected) > 4 else ""))
        raise WeightsError("weight names differ from the model's: " + "; ".join(parts))
    total = 0.0
    for key, ref in reference.items():
        got = state[key]
        if not isinstance(got, torch.Tensor):
            raise WeightsError(f"{key} is a {type(got).__name__}, not a tensor")
        if tuple(got.shape) != tuple(ref.shape):
            raise WeightsError(f"shape of {key}: {tuple(got.shape)}, expected {tuple(ref.shape)}")
        if not got.is_floating_point():
            raise WeightsError(f"{key} has dtype {got.dtype}, expected floating point")
        diff = (got.double() - ref.double()).abs().sum().item()
        if diff != diff or diff == float("inf"):
            raise WeightsError(f"{key} contains NaN or infinite values")
        total += diff
    return total
