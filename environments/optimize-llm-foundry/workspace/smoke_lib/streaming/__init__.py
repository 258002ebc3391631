"""Smoke stand-in for mosaicml-streaming: just what finetune.sh calls."""
from streaming import base  # noqa: F401
