"""Smoke stand-in for streaming.base.util."""

import torch  # noqa: F401  (the real package imports torch as well)


def clean_stale_shared_memory():
    """The real one removes shared-memory segments that a crashed streaming
    dataset left behind; the smoke datasets use none."""
    return None
