"""Local check for gpt2-chat-rl (a convenience; it does NOT produce your score).

    python3 score.py                  # checks final_model.pth
    python3 score.py other.pth        # checks another file

Loads the file the way the official scorer does (torch.load with
weights_only=True into model.GPT with the base model's config: the same
parameter names and shapes), answers the PUBLIC prompts in
public_prompts.json greedily with chat.respond (the scorer's decoding), and
prints its win rate against both baselines' answers to them, judged by the
training judge (judge.load(): the rules in the smoke task; in the full task
the endpoint, which costs 4 calls per prompt). The official `score` command
does the same on hidden held-out prompts with its own judge. Do not edit
this file.
"""

import json
import sys

import torch

import chat
import judge as judge_mod
from model import GPT, GPTConfig


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "final_model.pth"
    config = GPTConfig(**torch.load("base_model.pth", map_location="cpu", weights_only=True)["config"])
    model = GPT(config)
    blob = torch.load(path, map_location="cpu", weights_only=True)
    state = blob["model"] if isinstance(blob, dict) and isinstance(blob.get("model"), dict) else blob
    if isinstance(blob, dict) and blob.get("config") not in (None, vars(config)):
        sys.exit(f"INVALID: {path} has config {blob['config']}, the base model's is {vars(config)}")
    expected = model.state_dict()
    problems = [f"missing {k}" for k in expected if k not in state]
    problems += [f"unexpected {k}" for k in state if k not in expected]
    problems += [
        f"shape of {k}: {tuple(state[k].shape)}, expected {tuple(v.shape)}"
        for k, v in expected.items()
        if k in state and tuple(state[k].shape) != tuple(v.shape)
    ]
    if problems:
        sys.exit(f"INVALID: {path}: " + "; ".join(problems[:8]))
    model.load_state_dict({k: v.float() for k, v in state.items()})
    model.eval().to("cuda" if torch.cuda.is_available() else "cpu")

    tok = chat.load_tokenizer()
    with open("public_prompts.json") as f:
        rows = json.load(f)
    answers = chat.respond(model, tok, [r["prompt"] for r in rows])
    judge = judge_mod.load()
    rates = {}
    for name in ("base-greedy", "base-sampled"):
        wins = [judge_mod.win_rate(judge, r["prompt"], a, r[name]) for r, a in zip(rows, answers)]
        rates[name] = sum(wins) / len(wins)
    for r, a in list(zip(rows, answers))[:3]:
        print(f"  {r['prompt']!r} -> {a!r}")
    mean = sum(rates.values()) / len(rates)
    detail = ", ".join(f"vs {k} {v:.3f}" for k, v in rates.items())
    print(f"{path}: public win rate {mean:.4f} ({detail}; {len(rows)} prompts, {judge.calls} judge calls)")


if __name__ == "__main__":
    main()
