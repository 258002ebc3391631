"""Checks answer.json locally (do not edit; protected).

    python3 check_answer.py              # checks ./answer.json
    python3 check_answer.py other.json

The official score is hidden from you: `score` only records it. This helper
tells you what the scorer will accept: answer.json must be a JSON object

    {"n_embd": <int>, "max_iters": <int>, "loss_prediction": <number>}

with n_embd a positive multiple of config.json's head_dim, max_iters >= 1,
and the run at most 1.1x the target budget (config.json's target_flops),
counted as train.py counts FLOPs. It prints the fraction of the budget used.
"""

import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from train import flops, load_config, max_iters_for  # noqa: E402


def problems(answer, config):
    if not isinstance(answer, dict):
        return ["answer.json must hold a JSON object"]
    found = [f"missing {k}" for k in ("n_embd", "max_iters", "loss_prediction") if k not in answer]
    if found:
        return found
    for key in ("n_embd", "max_iters"):
        v = answer[key]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v != int(v):
            found.append(f"{key} must be an integer, got {json.dumps(v)}")
    p = answer["loss_prediction"]
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not math.isfinite(p):
        found.append(f"loss_prediction must be a finite number, got {json.dumps(p)}")
    if found:
        return found
    n_embd, max_iters = int(answer["n_embd"]), int(answer["max_iters"])
    if n_embd < config["head_dim"] or n_embd % config["head_dim"]:
        found.append(f"n_embd must be a positive multiple of {config['head_dim']}")
    if max_iters < 1:
        found.append("max_iters must be at least 1")
    elif flops(n_embd, max_iters, config) > 1.1 * config["target_flops"]:
        found.append(
            f"{flops(n_embd, max_iters, config):.4g} FLOPs is over 1.1x the target "
            f"{config['target_flops']:.4g} (at most max_iters="
            f"{max_iters_for(n_embd, 1.1 * config['target_flops'], config)} for this n_embd)"
        )
    return found


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "answer.json")
    config = load_config()
    try:
        with open(path) as f:
            answer = json.load(f)
    except (OSError, ValueError) as e:
        print(f"INVALID: cannot read {path}: {e}")
        sys.exit(1)
    found = problems(answer, config)
    if found:
        print("INVALID: " + "; ".join(found))
        sys.exit(1)
    used = flops(int(answer["n_embd"]), int(answer["max_iters"]), config)
    print(f"valid: n_embd={int(answer['n_embd'])}, max_iters={int(answer['max_iters'])}, "
          f"{used:.4g} FLOPs = {used / config['target_flops']:.3f}x the target budget, "
          f"predicted loss {answer['loss_prediction']}")


if __name__ == "__main__":
    main()
