"""Conditional prefix sum: the hidden reference solution (standard library only).

Same result as the starting solution, with no per-element bytecode:
  * the "is positive" flags come from the sign bytes of an int32 array,
  * the exclusive running parity is a prefix-XOR done on one big integer,
  * only the kept values are summed (compress + accumulate), and the sums
    are spread back to every position with map(list.__getitem__, counts).
"""

import sys
from array import array
from itertools import accumulate, compress

# Sign byte < 0x80 means x >= 0.
_SIGN_TO_NONNEGATIVE = bytes.maketrans(bytes(range(256)), b"1" * 128 + b"0" * 128)
_CHAR_TO_FLAG = bytes.maketrans(b"01", b"\x00\x01")


def _odd_before(xs: list[int]) -> bytes:
    """Byte j is 1 when an odd number of positive values come before j."""
    n = len(xs)
    raw = array("i", xs).tobytes()
    sign_bytes = raw[3::4] if sys.byteorder == "little" else raw[0::4]
    positive = bytearray(sign_bytes.translate(_SIGN_TO_NONNEGATIVE))
    # Zero is non-negative but not positive; zeros are rare, fix them one by one.
    if 0 in xs:
        for j, x in enumerate(xs):
            if x == 0:
                positive[j] = ord("0")
    # Bit j of `bits` = positive[j]; shift by one so bit j describes j-1, then
    # prefix-XOR with doubling shifts: bit j becomes the parity of positives < j.
    bits = int(positive[::-1], 2) << 1
    shift = 1
    while shift < n:
        bits ^= bits << shift
        shift <<= 1
    text = format(bits & ((1 << n) - 1), f"0{n}b")[::-1]
    return text.encode().translate(_CHAR_TO_FLAG)


def prefix_sum(xs: list[int]) -> list[int]:
    if not xs:
        return []
    odd = _odd_before(xs)
    sums = list(accumulate(compress(xs, odd), initial=0))
    return list(map(sums.__getitem__, accumulate(odd)))
