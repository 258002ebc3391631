"""Official scorer for prefix-sum (hidden from the participant).

Generates fresh random int32 inputs, runs the participant's
`prefix_sum` from <workspace>/solution.py, checks every output exactly and
reports the best time in milliseconds. Protocol: the LAST stdout line is one
JSON object {"raw": ms | null, "message": {...}, "details": {...}}; exit 0
whenever the outcome is known (wrong answers included).

Settings: workspace = argv[1], else $REBENCH_WORKSPACE, else the cwd;
$PREFIX_SUM_N (array length, default 1000000); $PREFIX_SUM_REPEATS
(timed runs, each on a new input, default 5).
"""

import contextlib
import importlib.util
import json
import os
import random
import sys
import traceback
from array import array
from time import perf_counter  # bound before participant code can patch `time`

sys.dont_write_bytecode = True  # leave no __pycache__ in the workspace

DEFAULT_N = 1_000_000
DEFAULT_REPEATS = 5


def expected_prefix_sum(xs):
    """The plain definition; int64 storage is exact for any n < 2**32."""
    out = array("q", bytes(8 * len(xs)))
    total = 0
    odd = False
    for i, x in enumerate(xs):
        if odd:
            total += x
        out[i] = total
        if x > 0:
            odd = not odd
    return out


def random_int32s(rng, n):
    values = array("i")
    values.frombytes(rng.randbytes(4 * n))
    return values


def first_mismatch(expected, got):
    for i, (e, g) in enumerate(zip(expected, got)):
        if e != g:
            return f"wrong answer at index {i}: expected {e}, got {g!r}"
    return None


def check(expected, got):
    """An error message, or None when `got` is exactly right."""
    if type(got) is not list:
        return f"wrong answer: prefix_sum must return a list, got {type(got).__name__}"
    if len(got) != len(expected):
        return f"wrong answer: expected {len(expected)} values, got {len(got)}"
    bad_type = next((v for v in got if type(v) is not int), None)
    if bad_type is not None:
        return f"wrong answer: values must be int, got {type(bad_type).__name__}"
    if got != expected.tolist():
        return first_mismatch(expected, got) or "wrong answer"
    return None


def env_int(name, default, minimum):
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    value = int(text)
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def load_solution(workspace):
    path = os.path.join(workspace, "solution.py")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no solution.py in {workspace}")
    sys.path.insert(0, workspace)  # let solution.py import its own helpers
    spec = importlib.util.spec_from_file_location("solution", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn = getattr(module, "prefix_sum", None)
    if not callable(fn):
        raise AttributeError("solution.py does not define prefix_sum(xs)")
    return fn


def score(workspace, n, repeats):
    seed = int.from_bytes(os.urandom(8), "little")
    rng = random.Random(seed)
    # Inputs and answers exist before any participant code runs.
    inputs = [random_int32s(rng, n) for _ in range(repeats)]
    answers = [expected_prefix_sum(xs) for xs in inputs]
    details = {"n": n, "repeats": repeats, "seed": seed, "workspace": workspace}

    def failure(message):
        return {"raw": None, "message": {"error": message}, "details": details}

    try:
        # Participant prints go to stderr so they cannot forge our last line.
        with contextlib.redirect_stdout(sys.stderr):
            prefix_sum = load_solution(workspace)
    except Exception as e:
        details["traceback"] = traceback.format_exc()
        return failure(f"could not load solution.py: {type(e).__name__}: {e}")

    times_ms = []
    for run, (xs, answer) in enumerate(zip(inputs, answers)):
        argument = xs.tolist()
        try:
            with contextlib.redirect_stdout(sys.stderr):
                start = perf_counter()
                got = prefix_sum(argument)
                elapsed = perf_counter() - start
        except Exception as e:
            details["traceback"] = traceback.format_exc()
            return failure(f"prefix_sum raised {type(e).__name__}: {e}")
        problem = check(answer, got)
        if problem is not None:
            details["failed_run"] = run
            return failure(problem)
        times_ms.append(elapsed * 1000.0)

    best = min(times_ms)
    details["times_ms"] = times_ms
    return {"raw": best, "message": {"ms": round(best, 3), "n": n}, "details": details}


def main():
    if len(sys.argv) > 1:
        workspace = sys.argv[1]
    else:
        workspace = os.environ.get("REBENCH_WORKSPACE") or os.getcwd()
    workspace = os.path.abspath(workspace)
    try:
        n = env_int("PREFIX_SUM_N", DEFAULT_N, 1)
        repeats = env_int("PREFIX_SUM_REPEATS", DEFAULT_REPEATS, 1)
    except ValueError as e:
        result = {"raw": None, "message": {"error": f"bad scorer settings: {e}"}, "details": {}}
    else:
        result = score(workspace, n, repeats)
    print(json.dumps(result), flush=True)
    sys.stderr.flush()
    # Skip atexit hooks and lingering threads the solution may have started,
    # so nothing can be printed after our result line.
    os._exit(0)


if __name__ == "__main__":
    main()
