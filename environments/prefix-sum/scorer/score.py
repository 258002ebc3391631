"""Official scorer for prefix-sum (hidden from the participant).

Generates fresh random int32 inputs, has the participant's `prefix_sum`
from <workspace>/solution.py compute them, checks every output exactly and
reports the best time in milliseconds. Protocol: the LAST stdout line is one
JSON object {"raw": ms | null, "message": {...}, "details": {...}}; exit 0
whenever the outcome is known (wrong answers included).

The participant's code never runs in this process and never holds its
stdout or the clock: a worker process (run through $REBENCH_JAIL, the
prefix that starts participant code as a session process, inside the
session's jail when it is isolated) loads solution.py and serves requests
over its stdin/stdout pipes. For each timed run this scorer starts the
clock, sends a fresh input, and stops the clock when the last byte of the
answer is back; the answer is checked here. Nothing the worker says about
time is believed, and nothing it writes can be taken for our result line.
Moving a list in and out of a process costs about as much as the function
itself, so the same round trip is timed, interleaved, with a worker of
this scorer's own that returns its input, and the raw score is the best
round trip minus the best baseline round trip.

Settings: workspace = argv[1], else $REBENCH_WORKSPACE, else the cwd;
$PREFIX_SUM_N (array length, default 1000000); $PREFIX_SUM_REPEATS
(timed runs, each on a new input, default 5).
"""

import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
from array import array
from time import perf_counter

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


def env_int(name, default, minimum):
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    value = int(text)
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


# The worker: argv = [workspace]. fd 1 becomes the participant's stderr and
# the protocol goes to a private copy of the original stdout. Replies: b"R"
# once loaded; per request (8-byte n, then n int32) b"O" + n int64, or
# b"E" + 4-byte length + a JSON error, after which it exits.
WORKER = r"""
import json, importlib.util, os, struct, sys, traceback
from array import array
sys.dont_write_bytecode = True
proto_in = os.fdopen(os.dup(0), "rb", buffering=0)
proto_out = os.fdopen(os.dup(1), "wb", buffering=0)
os.dup2(2, 1)
devnull = os.open(os.devnull, os.O_RDONLY)
os.dup2(devnull, 0)
def read_exactly(count):
    chunks = []
    while count:
        chunk = proto_in.read(count)
        if not chunk:
            os._exit(0)
        chunks.append(chunk)
        count -= len(chunk)
    return b"".join(chunks)
def fail(error, **extra):
    data = json.dumps(dict(error=error, **extra)).encode()
    proto_out.write(b"E" + struct.pack("<I", len(data)) + data)
    sys.stderr.flush()
    os._exit(0)
workspace = sys.argv[1]
try:
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
    fail(f"could not load solution.py: {type(e).__name__}: {e}", traceback=traceback.format_exc())
proto_out.write(b"R")
while True:
    (n,) = struct.unpack("<Q", read_exactly(8))
    xs = array("i")
    xs.frombytes(read_exactly(4 * n))
    try:
        got = fn(xs.tolist())
    except Exception as e:
        fail(f"prefix_sum raised {type(e).__name__}: {e}", traceback=traceback.format_exc())
    if type(got) is not list:
        fail(f"wrong answer: prefix_sum must return a list, got {type(got).__name__}")
    try:
        out = array("q", got)
    except (TypeError, OverflowError) as e:
        fail(f"wrong answer: values must be int64 integers ({e})")
    proto_out.write(b"O" + out.tobytes())
"""


class WorkerFailed(Exception):
    """The worker reported an error, died or broke the protocol."""

    def __init__(self, message, details=None):
        super().__init__(message)
        self.details = details or {}


def read_exactly(pipe, count):
    data = bytearray(count)
    view = memoryview(data)
    got = 0
    while got < count:
        chunk = pipe.readinto(view[got:])
        if not chunk:
            raise WorkerFailed("the solution's process exited before answering")
        got += chunk
    return bytes(data)


def read_reply(pipe):
    """b"O" (an answer follows) or raises WorkerFailed for b"E" and anything else."""
    kind = read_exactly(pipe, 1)
    if kind == b"E":
        (length,) = struct.unpack("<I", read_exactly(pipe, 4))
        if length > 1 << 20:
            raise WorkerFailed("the solution's process broke the protocol")
        try:
            error = json.loads(read_exactly(pipe, length))
            message = str(error["error"])
        except (ValueError, KeyError, TypeError):
            raise WorkerFailed("the solution's process broke the protocol")
        extra = {"traceback": error["traceback"]} if "traceback" in error else {}
        raise WorkerFailed(message, extra)
    if kind not in (b"O", b"R"):
        raise WorkerFailed("the solution's process broke the protocol (did it write to its stdout file descriptor?)")
    return kind


def session_python(prefix):
    """The participant's python: the session's `python3` (from its PATH, the
    environment's venv first) when run through REBENCH_JAIL, which may be a
    container with its own; this one otherwise."""
    return "python3" if prefix else sys.executable


def start_worker(folder, prefix):
    """The worker serving `folder`/solution.py, started through `prefix`."""
    # None of rebench's variables (the jail's launcher drops them anyway).
    env = {k: v for k, v in os.environ.items() if not k.startswith("REBENCH_")}
    worker = subprocess.Popen(
        prefix + [session_python(prefix), "-B", "-c", WORKER, folder],
        cwd=folder,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=sys.stderr,
        bufsize=0,
    )
    if read_reply(worker.stdout) != b"R":
        raise WorkerFailed("the solution's process broke the protocol")
    return worker


def round_trip(worker, xs):
    """(ms, answer): timed here, from the first byte of the input sent to
    the last byte of the answer received."""
    request = struct.pack("<Q", len(xs)) + xs.tobytes()
    start = perf_counter()
    worker.stdin.write(request)
    worker.stdin.flush()
    if read_reply(worker.stdout) != b"O":
        raise WorkerFailed("the solution's process broke the protocol")
    data = read_exactly(worker.stdout, 8 * len(xs))
    elapsed = perf_counter() - start
    got = array("q")
    got.frombytes(data)
    return elapsed * 1000.0, got


# The baseline: the same worker serving a solution that returns its input,
# run by this scorer itself (not through REBENCH_JAIL: nothing of the
# participant's can reach or see it). Its round trip is the cost of moving
# the data in and out of a worker, which the participant cannot change.
IDENTITY = "def prefix_sum(xs):\n    return xs\n"
# A solution measured at or below the baseline scores as this (a log
# transform needs a positive time).
FLOOR_MS = 0.001


def score(workspace, n, repeats):
    seed = int.from_bytes(os.urandom(8), "little")
    rng = random.Random(seed)
    # Inputs and answers exist before any participant code runs.
    inputs = [random_int32s(rng, n) for _ in range(repeats)]
    answers = [expected_prefix_sum(xs) for xs in inputs]
    details = {"n": n, "repeats": repeats, "seed": seed, "workspace": workspace}
    prefix = json.loads(os.environ["REBENCH_JAIL"]) if os.environ.get("REBENCH_JAIL") else []
    details["runner"] = "REBENCH_JAIL" if prefix else "direct"

    baseline_dir = tempfile.mkdtemp(prefix="prefix-sum-baseline-")
    workers = []
    try:
        with open(os.path.join(baseline_dir, "solution.py"), "w") as f:
            f.write(IDENTITY)
        baseline = start_worker(baseline_dir, [])
        workers.append(baseline)
        worker = start_worker(workspace, prefix)
        workers.append(worker)
        times_ms, baseline_ms = [], []
        for run, (xs, answer) in enumerate(zip(inputs, answers)):
            # Interleaved, in alternating order, so that the machine's pace
            # at the moment affects both alike.
            if run % 2:
                took, got = round_trip(worker, xs)
                base, _ = round_trip(baseline, xs)
            else:
                base, _ = round_trip(baseline, xs)
                took, got = round_trip(worker, xs)
            if got != answer:
                details["failed_run"] = run
                raise WorkerFailed(first_mismatch(answer, got) or "wrong answer")
            times_ms.append(took)
            baseline_ms.append(base)
    except (WorkerFailed, BrokenPipeError) as e:
        details.update(getattr(e, "details", {}))
        message = str(e) if isinstance(e, WorkerFailed) else "the solution's process exited before answering"
        return {"raw": None, "message": {"error": message}, "details": details}
    finally:
        for w in workers:
            w.kill()
            w.wait()
        shutil.rmtree(baseline_dir, ignore_errors=True)
    best = max(min(times_ms) - min(baseline_ms), FLOOR_MS)
    details.update(times_ms=times_ms, baseline_ms=baseline_ms)
    message = {"ms": round(best, 3), "n": n, "round_trip_ms": round(min(times_ms), 3), "transfer_ms": round(min(baseline_ms), 3)}
    return {"raw": best, "message": message, "details": details}


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
