"""Reference solution (hidden): rejection-sampling fine-tuning ("expert
iteration") against the training judge, on the training prompts only.

Each round samples N answers per training prompt from the current model,
keeps the one the judge prefers (a knockout of pairwise `judge.win_rate`
comparisons, both orders each), and fine-tunes the model on (prompt, best
answer + stop token) with the loss on the answer tokens only. The result
goes to final_model.pth. Deterministic: seeded sampling, one CPU thread.
"""

import random
import sys
import time

import torch
import torch.nn.functional as F

import chat
import judge as judge_mod
from model import load_model, save_model

ROUNDS = 5
SAMPLES = 16
TEMPERATURE = 1.0
STEPS = 60
BATCH = 32
LR = 1e-3


def best_of(judge, prompt, answers):
    best = answers[0]
    for other in answers[1:]:
        if judge_mod.win_rate(judge, prompt, other, best) > 0.5:
            best = other
    return best


def finetune(model, tok, examples, steps, seed):
    rng = random.Random(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.0)
    model.train()
    block = model.config.block_size
    for step in range(steps):
        batch = [examples[rng.randrange(len(examples))] for _ in range(BATCH)]
        seqs = [(p + a)[-block - 1 :] for p, a in batch]
        starts = [max(0, len(s) - 1 - len(a)) for s, (_, a) in zip(seqs, batch)]
        width = max(len(s) for s in seqs) - 1
        x = torch.full((len(seqs), width), tok.stop_id, dtype=torch.long)
        y = torch.full((len(seqs), width), -100, dtype=torch.long)
        for r, (s, st) in enumerate(zip(seqs, starts)):
            x[r, : len(s) - 1] = torch.tensor(s[:-1])
            y[r, st : len(s) - 1] = torch.tensor(s[st + 1 :])
        logits, _ = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), ignore_index=-100)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    model.eval()
    return loss.item()


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    started = time.time()
    tok = chat.load_tokenizer()
    model = load_model("base_model.pth")
    judge = judge_mod.load()
    prompts = [line.strip() for line in open("train_prompts.txt") if line.strip()]
    for rnd in range(ROUNDS):
        _, texts = chat.generate(model, tok, prompts, n=SAMPLES, temperature=TEMPERATURE, seed=rnd, batch_size=512)
        greedy = chat.respond(model, tok, prompts, batch_size=512)
        examples = []
        for prompt, answers, current in zip(prompts, texts, greedy):
            best = best_of(judge, prompt, answers + [current])
            examples.append((chat.prompt_ids(tok, prompt), chat.answer_ids(tok, best)))
        loss = finetune(model, tok, examples, STEPS, seed=rnd)
        points = None
        if hasattr(judge, "points"):
            now = chat.respond(model, tok, prompts)
            points = sum(judge.points(p, a) for p, a in zip(prompts, now)) / len(prompts)
        print(f"round {rnd}: loss {loss:.3f}, greedy points {points}, {judge.calls} judge calls, {time.time() - started:.0f} s", flush=True)
    save_model(model, "final_model.pth")
    print("wrote final_model.pth")


if __name__ == "__main__":
    sys.exit(main())
