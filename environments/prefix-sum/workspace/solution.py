"""Conditional prefix sum: the starting solution.

Y[i] = sum of x[j] for j <= i where the number of positive values strictly
before position j is odd. Correct but slow: every element goes through the
Python interpreter twice. Make it faster.
"""


def prefix_sum(xs: list[int]) -> list[int]:
    n = len(xs)

    # parity[j] is 1 when an odd number of positive values come before j.
    parity = [0] * n
    positives = 0
    for j in range(n):
        parity[j] = positives % 2
        if xs[j] > 0:
            positives += 1

    ys = [0] * n
    total = 0
    for i in range(n):
        total += xs[i] * parity[i]
        ys[i] = total
    return ys
