"""Official scorer for prefix-sum (hidden from the participant).

Generates fresh random int32 inputs, runs the participant's
`prefix_sum` from <workspace>/solution.py, checks every output exactly and
reports the best time in milliseconds. Protocol: the LAST stdout line is one
JSON object {"raw": ms | null, "message": {...}, "details": {...}}; exit 0
whenever the outcome is known (wrong answers included).

In an isolated session (rebench sets $REBENCH_JAIL, the argv prefix that
runs a command inside the session's jail) the solution runs in a worker
inside the jail, where this scorer and the reference solution do not exist:
the inputs go in and the outputs and times come back as files in a
.prefix-sum-run-* folder of the workspace, and the outputs are checked here.

Settings: workspace = argv[1], else $REBENCH_WORKSPACE, else the cwd;
$PREFIX_SUM_N (array length, default 1000000); $PREFIX_SUM_REPEATS
(timed runs, each on a new input, default 5).
"""

import contextlib
import importlib.util
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
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


RUN_PREFIX = ".prefix-sum-run-"

# Runs inside the jail: argv = [run_dir, repeats, workspace]. Reads in<k>.bin
# (int32), calls prefix_sum, writes out<k>.bin (int64) and result.json with
# the times or the first error; what the participant prints goes to stderr.
WORKER = r"""
import contextlib, importlib.util, json, os, sys, traceback
from array import array
from time import perf_counter
sys.dont_write_bytecode = True
run_dir, repeats, workspace = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def done(result):
    with open(os.path.join(run_dir, "result.json"), "w") as f:
        json.dump(result, f)
    sys.stderr.flush()
    os._exit(0)
try:
    with contextlib.redirect_stdout(sys.stderr):
        sys.path.insert(0, workspace)
        path = os.path.join(workspace, "solution.py")
        if not os.path.isfile(path):
            raise FileNotFoundError(f"no solution.py in {workspace}")
        spec = importlib.util.spec_from_file_location("solution", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        fn = getattr(module, "prefix_sum", None)
        if not callable(fn):
            raise AttributeError("solution.py does not define prefix_sum(xs)")
except Exception as e:
    done({"error": f"could not load solution.py: {type(e).__name__}: {e}", "traceback": traceback.format_exc()})
times = []
for k in range(repeats):
    xs = array("i")
    with open(os.path.join(run_dir, f"in{k}.bin"), "rb") as f:
        xs.frombytes(f.read())
    argument = xs.tolist()
    try:
        with contextlib.redirect_stdout(sys.stderr):
            start = perf_counter()
            got = fn(argument)
            elapsed = perf_counter() - start
    except Exception as e:
        done({"error": f"prefix_sum raised {type(e).__name__}: {e}", "traceback": traceback.format_exc()})
    if type(got) is not list:
        done({"error": f"wrong answer: prefix_sum must return a list, got {type(got).__name__}", "run": k})
    bad = next((v for v in got if type(v) is not int), None)
    if bad is not None:
        done({"error": f"wrong answer: values must be int, got {type(bad).__name__}", "run": k})
    try:
        out = array("q", got)
    except OverflowError:
        done({"error": "wrong answer: a value does not fit in int64", "run": k})
    with open(os.path.join(run_dir, f"out{k}.bin"), "wb") as f:
        f.write(out.tobytes())
    times.append(elapsed * 1000.0)
done({"times_ms": times})
"""


def score_in_jail(workspace, jail, inputs, answers, details):
    """The solution run by WORKER inside the session's jail; checked here."""

    def failure(message):
        return {"raw": None, "message": {"error": message}, "details": details}

    run_dir = tempfile.mkdtemp(prefix=RUN_PREFIX, dir=workspace)
    try:
        for k, xs in enumerate(inputs):
            with open(os.path.join(run_dir, f"in{k}.bin"), "wb") as f:
                f.write(xs.tobytes())
        # None of rebench's variables (the hidden preparation, the jail) inside.
        env = {k: v for k, v in os.environ.items() if not k.startswith("REBENCH_")}
        argv = jail + [sys.executable, "-B", "-c", WORKER, run_dir, str(len(inputs)), workspace]
        proc = subprocess.run(argv, cwd=workspace, env=env, stdin=subprocess.DEVNULL, stdout=sys.stderr)
        try:
            with open(os.path.join(run_dir, "result.json")) as f:
                result = json.load(f)
        except (OSError, ValueError):
            return failure(f"the solution's process exited (status {proc.returncode}) without a result")
        if "error" in result:
            if "traceback" in result:
                details["traceback"] = result["traceback"]
            if "run" in result:
                details["failed_run"] = result["run"]
            return failure(result["error"])
        for run, answer in enumerate(answers):
            got = array("q")
            with open(os.path.join(run_dir, f"out{run}.bin"), "rb") as f:
                got.frombytes(f.read())
            if len(got) != len(answer):
                details["failed_run"] = run
                return failure(f"wrong answer: expected {len(answer)} values, got {len(got)}")
            if got != answer:
                details["failed_run"] = run
                return failure(first_mismatch(answer, got) or "wrong answer")
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    times_ms = result["times_ms"]
    best = min(times_ms)
    details.update(times_ms=times_ms, jailed=True)
    return {"raw": best, "message": {"ms": round(best, 3), "n": len(answers[0])}, "details": details}


def score(workspace, n, repeats):
    seed = int.from_bytes(os.urandom(8), "little")
    rng = random.Random(seed)
    # Inputs and answers exist before any participant code runs.
    inputs = [random_int32s(rng, n) for _ in range(repeats)]
    answers = [expected_prefix_sum(xs) for xs in inputs]
    details = {"n": n, "repeats": repeats, "seed": seed, "workspace": workspace}

    def failure(message):
        return {"raw": None, "message": {"error": message}, "details": details}

    jail = os.environ.get("REBENCH_JAIL")
    if jail:
        return score_in_jail(workspace, json.loads(jail), inputs, answers, details)

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
