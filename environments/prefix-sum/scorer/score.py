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
over its stdin/stdout pipes.

Measurement (see docs/timing.md in the rebench repository):
  * A timed call sends only a fresh 8-byte seed. The worker expands it into
    the input (SHAKE-128, so the input exists nowhere before the clock
    starts), calls prefix_sum, and sends back the SHA-256 of the answer as
    int64 bytes; the clock stops when that digest is back, and the digest
    must equal the one this scorer computed from the same seed. After a
    mismatch the worker is asked (untimed) for the answer itself, to say
    where it is wrong. Nothing crosses a pipe in bulk while the clock runs.
  * Each worker process's first quartile of its timed calls is its
    undisturbed time; the raw score is the median of those over
    $PREFIX_SUM_PROCESSES fresh processes.
  * No yardstick is timed in the same run to subtract or divide out: the
    participant's code knows when it runs, so it could slow any yardstick
    selectively (a process of theirs spinning whenever their call is not
    running) and make itself look faster. Noise can only add time here.
    Machine speed is cancelled by calibration instead (`rebench env
    prepare` measures starting and reference on the machine).
  * Warm-up calls come first (checked, not timed); the garbage collector
    is off during the calls; the scorer and its workers share one CPU, so
    that no call waits on a process woken on another core.
  * The message shows the median, the interquartile range and the number
    of timed calls; details keep every call's times.

Settings: workspace = argv[1], else $REBENCH_WORKSPACE, else the cwd;
$PREFIX_SUM_N (array length, default 1000000); $PREFIX_SUM_REPEATS
(timed calls, each on a new input, default 5); $PREFIX_SUM_WARMUP (untimed
calls first, default 2); $PREFIX_SUM_PROCESSES (fresh worker processes,
default 3).
"""

import hashlib
import json
import os
import statistics
import struct
import subprocess
import sys
from array import array
from time import perf_counter

sys.dont_write_bytecode = True  # leave no __pycache__ in the workspace

DEFAULT_N = 1_000_000
DEFAULT_REPEATS = 5
DEFAULT_WARMUP = 2
DEFAULT_PROCESSES = 3


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


def input_for(seed, n):
    """The n int32 values a seed stands for (the worker expands it alike)."""
    values = array("i")
    values.frombytes(hashlib.shake_128(seed).digest(4 * n))
    return values


def digest_of(answer):
    """SHA-256 of an answer as little-endian int64s."""
    if sys.byteorder != "little":
        answer = array("q", answer)
        answer.byteswap()
    return hashlib.sha256(answer).digest()


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


# The worker: argv = [workspace, n, cpu]. fd 1 becomes the participant's
# stderr and the protocol goes to a private copy of the original stdout.
# Replies: b"R" once loaded. Requests: b"S" + an 8-byte seed (a call: the
# input is expanded from the seed; reply b"O" + the answer's 32-byte
# SHA-256 as int64 bytes), b"L" (reply b"O" + the last answer as n int64,
# to show a mismatch). b"E" + 4-byte length + a JSON error, after which it
# exits.
WORKER = r"""
import gc, hashlib, json, importlib.util, os, struct, sys, traceback
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
workspace, n, cpu = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
try:
    os.sched_setaffinity(0, {cpu})  # the scorer's CPU (a container may not have it)
except (AttributeError, OSError, ValueError):
    pass
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
gc.collect()
gc.disable()
proto_out.write(b"R")
last = array("q")
while True:
    kind = read_exactly(1)
    if kind == b"L":
        proto_out.write(b"O" + last.tobytes())
        continue
    seed = read_exactly(8)
    xs = array("i")
    xs.frombytes(hashlib.shake_128(seed).digest(4 * n))
    xs = xs.tolist()
    try:
        got = fn(xs)
    except Exception as e:
        fail(f"prefix_sum raised {type(e).__name__}: {e}", traceback=traceback.format_exc())
    if type(got) is not list:
        fail(f"wrong answer: prefix_sum must return a list, got {type(got).__name__}")
    try:
        last = array("q", got)
    except (TypeError, OverflowError) as e:
        fail(f"wrong answer: values must be int64 integers ({e})")
    if sys.byteorder != "little":
        last.byteswap()
    proto_out.write(b"O" + hashlib.sha256(last).digest())
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


def start_worker(folder, prefix, n, cpu):
    """The worker serving `folder`/solution.py, started through `prefix`."""
    # None of rebench's variables (the jail's launcher drops them anyway).
    env = {k: v for k, v in os.environ.items() if not k.startswith("REBENCH_")}
    worker = subprocess.Popen(
        prefix + [session_python(prefix), "-B", "-c", WORKER, folder, str(n), str(cpu)],
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


def timed_call(worker, seed):
    """(ms, digest): timed here, from the seed sent to the digest received."""
    request = b"S" + seed
    start = perf_counter()
    worker.stdin.write(request)
    worker.stdin.flush()
    if read_reply(worker.stdout) != b"O":
        raise WorkerFailed("the solution's process broke the protocol")
    digest = read_exactly(worker.stdout, 32)
    return (perf_counter() - start) * 1000.0, digest


def last_answer(worker, n):
    """The worker's last answer (untimed), to say where it is wrong."""
    worker.stdin.write(b"L")
    worker.stdin.flush()
    if read_reply(worker.stdout) != b"O":
        raise WorkerFailed("the solution's process broke the protocol")
    got = array("q")
    got.frombytes(read_exactly(worker.stdout, 8 * n))
    if sys.byteorder != "little":
        got.byteswap()
    return got


def scorer_cpu():
    """One CPU of those this process may use (the last: the first tends to
    take interrupts); the scorer and its workers run there."""
    try:
        cpu = max(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpu})
        return cpu
    except (AttributeError, OSError):
        return -1


def quartiles(values):
    """(first quartile, median, third quartile)."""
    if len(values) == 1:
        return values[0], values[0], values[0]
    q1, median, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, median, q3


def measure_in_one_process(workspace, prefix, n, cpu, seeds, digests, warmup):
    """One worker, started fresh: its calls' times (ms), the warm-up calls
    left out. Raises WorkerFailed for a wrong answer or a broken worker."""
    worker = start_worker(workspace, prefix, n, cpu)
    try:
        times_ms = []
        for call, (seed, digest) in enumerate(zip(seeds, digests)):
            took, got = timed_call(worker, seed)
            if got != digest:
                expected = expected_prefix_sum(input_for(seed, n))
                answer = last_answer(worker, n)
                raise WorkerFailed(first_mismatch(expected, answer) or "wrong answer", {"failed_seed": seed.hex()})
            # The first calls warm allocators and caches: checked, not timed.
            if call >= warmup:
                times_ms.append(took)
        return times_ms
    except BrokenPipeError:
        raise WorkerFailed("the solution's process exited before answering")
    finally:
        worker.kill()
        worker.wait()


def score(workspace, n, repeats, warmup, processes):
    calls = warmup + repeats
    seeds = [os.urandom(8) for _ in range(processes * calls)]
    # Answers exist before any participant code runs.
    digests = [digest_of(expected_prefix_sum(input_for(seed, n))) for seed in seeds]
    details = {"n": n, "repeats": repeats, "warmup": warmup, "processes": processes, "workspace": workspace}
    prefix = json.loads(os.environ["REBENCH_JAIL"]) if os.environ.get("REBENCH_JAIL") else []
    details["runner"] = "REBENCH_JAIL" if prefix else "direct"
    cpu = scorer_cpu()
    details["cpu"] = cpu
    per_process = []
    try:
        for p in range(processes):
            part = slice(p * calls, (p + 1) * calls)
            per_process.append(measure_in_one_process(workspace, prefix, n, cpu, seeds[part], digests[part], warmup))
    except WorkerFailed as e:
        details.update(e.details)
        return {"raw": None, "message": {"error": str(e)}, "details": details}
    # Noise only ever adds time, and it comes in stretches (another
    # process, another virtual machine on the host) that can cover half a
    # process's calls: the first quartile of a process's calls is its
    # undisturbed time. A whole process can be slow (where its memory
    # landed), so several are measured and the median of theirs is the
    # score. Nothing measured in this run is taken off or divided out (see
    # the module's doc): machine speed is what per-machine calibration is for.
    firsts = [quartiles(times)[0] for times in per_process]
    best = statistics.median(firsts)
    every = [t for times in per_process for t in times]
    q1, median, q3 = quartiles(every)
    details.update(times_ms=per_process, process_ms=firsts)
    message = {
        "ms": round(best, 3),
        "median_ms": round(median, 3),
        "iqr_ms": [round(q1, 3), round(q3, 3)],
        "calls": processes * repeats,
        "processes": processes,
        "n": n,
    }
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
        warmup = env_int("PREFIX_SUM_WARMUP", DEFAULT_WARMUP, 0)
        processes = env_int("PREFIX_SUM_PROCESSES", DEFAULT_PROCESSES, 1)
    except ValueError as e:
        result = {"raw": None, "message": {"error": f"bad scorer settings: {e}"}, "details": {}}
    else:
        result = score(workspace, n, repeats, warmup, processes)
    print(json.dumps(result), flush=True)
    sys.stderr.flush()
    # Skip atexit hooks and lingering threads the solution may have started,
    # so nothing can be printed after our result line.
    os._exit(0)


if __name__ == "__main__":
    main()
