"""The smoke profile's base model: a tiny GPT-style causal language model
(pre-LayerNorm blocks, learned positions, GELU MLP, causal attention, output
layer tied to the token embedding, no dropout) with a Hugging Face-like
folder format:

    <folder>/config.json         the TinyConfig fields
    <folder>/pytorch_model.bin   torch.save(state_dict), any float dtype
    <folder>/tokenizer.json      see tokenizer.py
"""

import dataclasses
import json
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

WEIGHTS = "pytorch_model.bin"
CONFIG = "config.json"


@dataclasses.dataclass
class TinyConfig:
    vocab_size: int
    max_position_embeddings: int
    n_layer: int
    n_head: int
    d_model: int
    model_type: str = "tiny_gpt"


class Attention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.n_head = config.n_head
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model)
        self.proj = nn.Linear(config.d_model, config.d_model)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.d_model)
        self.attn = Attention(config)
        self.ln_2 = nn.LayerNorm(config.d_model)
        self.fc = nn.Linear(config.d_model, 4 * config.d_model)
        self.out = nn.Linear(4 * config.d_model, config.d_model)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.out(F.gelu(self.fc(self.ln_2(x)), approximate="tanh"))


class TinyCausalLM(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.d_model)
        self.wpe = nn.Embedding(config.max_position_embeddings, config.d_model)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.d_model)
        self.gradient_checkpointing = False

    def init_weights(self, generator):
        for name, p in self.named_parameters():
            with torch.no_grad():
                if name.endswith(".bias"):
                    p.zero_()
                elif "ln" in name:
                    p.fill_(1.0)
                else:
                    p.normal_(0.0, 0.02, generator=generator)

    def forward(self, input_ids):
        t = input_ids.shape[1]
        x = self.wte(input_ids) + self.wpe(torch.arange(t, device=input_ids.device))
        for block in self.blocks:
            if self.gradient_checkpointing and self.training:
                x = checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
        return self.ln_f(x) @ self.wte.weight.T  # tied output layer


def load_config(folder):
    with open(os.path.join(folder, CONFIG)) as f:
        return TinyConfig(**json.load(f))


def from_pretrained(folder, dtype=torch.float32):
    model = TinyCausalLM(load_config(folder))
    state = torch.load(os.path.join(folder, WEIGHTS), map_location="cpu", weights_only=True)
    model.load_state_dict({k: v.to(dtype) for k, v in state.items()}, strict=True)
    return model.to(dtype)


def save_pretrained(model, folder, dtype=None):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, CONFIG), "w") as f:
        json.dump(dataclasses.asdict(model.config), f, indent=2)
        f.write("\n")
    state = {k: (v.detach().to(dtype) if dtype is not None else v.detach()).contiguous() for k, v in model.state_dict().items()}
    torch.save(state, os.path.join(folder, WEIGHTS))
