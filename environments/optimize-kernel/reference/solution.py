"""Conditional prefix sum: the hidden reference solution.

On a CUDA tensor: two Triton kernels around a tiny scan over blocks.
  1. per block of BLOCK values: the parity of its positives and the two sums
     it would add, one for each parity it may be entered with;
  2. (torch, ~n/BLOCK values) the parity and the running total entering
     each block;
  3. per block again: the in-block scan, offset by what enters the block.
x is read twice and Y written once: three passes over memory, no int64.

On a CPU tensor (the smoke profile): the same idea in four vectorized torch
passes, all in int32.

Every sum is done in int32. For the scorer's inputs (values in [-10, 10),
n <= 2e8) |Y| <= 10 n < 2**31, so nothing overflows; outside that range the
result wraps like int32 arithmetic does.

With TRITON_INTERPRET=1 the Triton path also runs on CPU tensors (slowly),
which is how it is tested on machines without a GPU.
"""

import os

import torch

try:
    import triton
    import triton.language as tl
except ImportError:  # CPU-only installs: the torch path still works.
    triton = None

BLOCK = 4096
NUM_WARPS = 8
_INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"


def prefix_sum(x: torch.Tensor) -> torch.Tensor:
    if triton is not None and (x.is_cuda or _INTERPRET):
        return _prefix_sum_triton(x)
    return _prefix_sum_torch(x)


def _prefix_sum_torch(x: torch.Tensor) -> torch.Tensor:
    positive = (x > 0).to(torch.int32)
    # Inclusive count minus self = positives strictly before; keep its parity.
    odd_before = (torch.cumsum(positive, 0, dtype=torch.int32) - positive) & 1
    return torch.cumsum(x * odd_before, 0, dtype=torch.int32)


if triton is not None:

    @triton.jit
    def _block_summary(x_ptr, parity_ptr, sum_even_ptr, sum_odd_ptr, n, BLOCK: tl.constexpr):
        # int32 offsets: fine for n < 2**31.
        pid = tl.program_id(0)
        offsets = pid * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offsets, mask=offsets < n, other=0)
        positive = (x > 0).to(tl.int32)
        odd_local = (tl.cumsum(positive, axis=0) - positive) & 1
        tl.store(parity_ptr + pid, tl.sum(positive, axis=0) & 1)
        # Entered with even parity, x[j] counts where the local parity is odd;
        # entered with odd parity, where it is even.
        tl.store(sum_even_ptr + pid, tl.sum(x * odd_local, axis=0))
        tl.store(sum_odd_ptr + pid, tl.sum(x * (1 - odd_local), axis=0))

    @triton.jit
    def _block_scan(x_ptr, y_ptr, parity_in_ptr, total_in_ptr, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offsets = pid * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        x = tl.load(x_ptr + offsets, mask=mask, other=0)
        positive = (x > 0).to(tl.int32)
        before = tl.cumsum(positive, axis=0) - positive
        odd = (before + tl.load(parity_in_ptr + pid)) & 1
        y = tl.cumsum(x * odd, axis=0) + tl.load(total_in_ptr + pid)
        tl.store(y_ptr + offsets, y, mask=mask)


def _prefix_sum_triton(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    n = x.numel()
    y = torch.empty_like(x)
    if n == 0:
        return y
    blocks = triton.cdiv(n, BLOCK)
    parity = torch.empty(blocks, dtype=torch.int32, device=x.device)
    sum_even = torch.empty_like(parity)
    sum_odd = torch.empty_like(parity)
    _block_summary[(blocks,)](x, parity, sum_even, sum_odd, n, BLOCK=BLOCK, num_warps=NUM_WARPS)
    # Scan over blocks: small (n / BLOCK values), so plain torch is enough.
    parity_in = (torch.cumsum(parity, 0, dtype=torch.int32) - parity) & 1
    block_total = torch.where(parity_in.bool(), sum_odd, sum_even)
    total_in = torch.cumsum(block_total, 0, dtype=torch.int32) - block_total
    _block_scan[(blocks,)](x, y, parity_in, total_in, n, BLOCK=BLOCK, num_warps=NUM_WARPS)
    return y
