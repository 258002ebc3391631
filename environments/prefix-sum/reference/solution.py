"""Conditional prefix sum: the hidden reference solution.

Same result as the starting solution, but every pass runs inside C-level
iterators (map / accumulate) instead of the bytecode loop.
"""

from itertools import accumulate
from operator import add, gt, mul, xor


def prefix_sum(xs: list[int]) -> list[int]:
    n = len(xs)
    if n == 0:
        return []
    # Running XOR of "is positive" gives the parity *including* each element;
    # shifting by one (initial=0, drop the last) makes it "strictly before".
    is_positive = map(gt, xs, [0] * n)
    parity = accumulate(is_positive, xor, initial=False)
    return list(accumulate(map(mul, xs, parity), add))
