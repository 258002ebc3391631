"""foundry_lite: the smoke profile's small stand-in for LLM Foundry.

Plain PyTorch implementations of what the real task uses from llm-foundry,
composer and streaming: a YAML config with command-line overrides
(config.py), a byte-level BPE tokenizer (tokenizer.py), a tiny causal
language model with a Hugging Face-like on-disk format (model.py) and
MDS-like token shards (shards.py).
"""
