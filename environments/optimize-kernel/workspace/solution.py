"""Conditional prefix sum: the starting solution (correct, plain PyTorch).

    Y[i] = sum of x[j] for j <= i such that the number of positive values
           among x[0], ..., x[j-1] is odd

`x` is a 1-D int32 tensor (on the GPU in the full profile); return a 1-D
int32 tensor of the same length on the same device. Make it faster; keep
the function name and signature.
"""

import torch


def prefix_sum(x: torch.Tensor) -> torch.Tensor:
    is_positive = x > 0
    # Positives up to and including each position (int64).
    positive_count = is_positive.cumsum(0)
    odd_through = (positive_count % 2).bool()
    # Shift by one: the parity of the positives strictly before each position.
    odd_before = torch.zeros_like(odd_through)
    odd_before[1:] = odd_through[:-1]
    kept = torch.where(odd_before, x, torch.zeros_like(x))
    return kept.cumsum(0).to(torch.int32)
