"""Run by `rebench env prepare` with the venv's python: proves torch imports
and records what it found in $REBENCH_PREPARED/torch.json.

$OPTIMIZE_KERNEL_DEVICE (from the profile's prepare_env) says which device
the profile times on; a missing GPU is only a warning here, since the
session's hardware check is what refuses a machine.
"""

import json
import os
import sys

import torch

device = os.environ.get("OPTIMIZE_KERNEL_DEVICE", "cuda")
info = {
    "python": sys.version.split()[0],
    "torch": torch.__version__,
    "cuda_available": torch.cuda.is_available(),
    "device": device,
}
if torch.cuda.is_available():
    info["gpu"] = torch.cuda.get_device_name(0)
try:
    import triton

    info["triton"] = triton.__version__
except ImportError:
    info["triton"] = None

print(f"torch {info['torch']} (python {info['python']}), triton {info['triton']}, "
      f"CUDA {'available: ' + info['gpu'] if info['cuda_available'] else 'not available'}")
if device == "cuda" and not info["cuda_available"]:
    print("warning: this profile times on a CUDA GPU and torch sees none on this machine")

x = torch.tensor([3, -1, 2, 5, -4], dtype=torch.int32)
assert torch.cumsum(x, 0).tolist() == [3, 2, 4, 9, 5], "torch gives wrong sums"

with open(os.path.join(os.environ["REBENCH_PREPARED"], "torch.json"), "w") as out:
    json.dump(info, out, indent=2, sort_keys=True)
    out.write("\n")
