"""Converts a composer checkpoint to a Hugging Face-style model folder
(smoke stand-in for llm-foundry's scripts/inference/convert_composer_to_hf.py;
same options).

    python scripts/inference/convert_composer_to_hf.py \
        --composer_path ftout/latest-rank0.pt --hf_output_path trained_model \
        --output_precision bf16
"""

import argparse
import json
import os

import torch

from foundry_lite import model as modellib

PRECISIONS = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--composer_path", required=True)
    parser.add_argument("--hf_output_path", required=True)
    parser.add_argument("--output_precision", choices=sorted(PRECISIONS), default="fp32")
    args = parser.parse_args()
    blob = torch.load(args.composer_path, map_location="cpu", weights_only=True)
    state = blob["state"]
    hf = state["integrations"]["huggingface"]
    config = modellib.TinyConfig(**hf["model"]["config"])
    model = modellib.TinyCausalLM(config)
    model.load_state_dict(state["model"], strict=True)
    modellib.save_pretrained(model, args.hf_output_path, PRECISIONS[args.output_precision])
    with open(os.path.join(args.hf_output_path, "tokenizer.json"), "w") as f:
        json.dump(hf["tokenizer"], f)
        f.write("\n")
    n = sum(p.numel() for p in model.parameters())
    print(f"wrote {args.hf_output_path} ({n:,} parameters, {args.output_precision})")


if __name__ == "__main__":
    main()
