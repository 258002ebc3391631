"""Conditional prefix sum: the starting solution.

Y[i] = sum of x[j] for j <= i where the number of positive values strictly
before position j is odd. Correct, but every element goes through the Python
interpreter three times. Make it faster; keep the function name and signature.
"""


def prefix_sum(xs: list[int]) -> list[int]:
    n = len(xs)

    # 1. How many positive values come strictly before each position.
    positives_before = [0] * n
    count = 0
    for j in range(n):
        positives_before[j] = count
        if xs[j] > 0:
            count += 1

    # 2. Keep x[j] only where that count is odd.
    kept = [0] * n
    for j in range(n):
        if positives_before[j] % 2 == 1:
            kept[j] = xs[j]

    # 3. Running sum.
    ys = [0] * n
    total = 0
    for i in range(n):
        total += kept[i]
        ys[i] = total
    return ys
