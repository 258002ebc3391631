"""Official scorer for optimize-kernel (hidden from the participant).

Draws fresh random int32 inputs (values in [-10, 10)) on the profile's
device, has the participant's `prefix_sum` from <workspace>/solution.py
compute them, requires output exactly equal to its own implementation
(int32, same shape, same device) on every call, and reports the best time
in milliseconds of the timed calls.

The participant's code never runs in this process and never holds its stdout
or the clock: a worker (run through $REBENCH_JAIL, the prefix that starts
participant code as a session process, inside the session's jail when it is
isolated) loads solution.py and serves requests over its stdin/stdout
pipes. Edge cases go in as bytes and their answers come back as bytes,
checked here. For a timed call this scorer starts the clock and sends a
fresh seed; the worker draws the input from it on the device, calls
prefix_sum, synchronizes and sends back a digest of the output (a weighted
sum with weights drawn from the seed); the clock stops when the digest
arrives and the digest is checked against this scorer's own answer. The
same round trip is timed, interleaved, with a worker of this scorer's own
whose prefix_sum returns its input, and the raw score is the median of the
differences between each call and the baseline call next to it: the cost of drawing the input,
the digest and the pipes is taken out, and nothing the worker says about
time is believed. With OPTIMIZE_KERNEL_BASELINE=keep (the smoke profile)
there is no baseline worker and the raw score is the first quartile of the
round trips themselves: nothing measured in the run is taken off, so no
process of the participant's can lower the score by slowing the baseline
(docs/timing.md); per-machine calibration absorbs the round trip's cost.
The message shows that median, the interquartile range
of the differences and the number of timed calls; details keep every
call's times. (The paired baseline is what lets the full profile keep
RE-Bench's kernel-only figures; its limits are in docs/timing.md.)

Protocol: the LAST stdout line is one JSON object
{"raw": ms | null, "message": {...}, "details": {...}}; exit 0 whenever the
outcome is known (wrong answers included).

Settings (environment variables; the profiles set them):
  OPTIMIZE_KERNEL_N        input length (default 100000000)
  OPTIMIZE_KERNEL_DEVICE   "cuda" (default) or "cpu"
  OPTIMIZE_KERNEL_REPEATS  timed calls, each on a new input (default 10)
  OPTIMIZE_KERNEL_WARMUP   untimed (but checked) calls first (default 3)
  OPTIMIZE_KERNEL_THREADS  torch CPU threads (default: torch's choice)
  OPTIMIZE_KERNEL_BASELINE "subtract" (default: the paired baseline is
                           taken out, for kernel-only times) or "keep" (no
                           baseline worker; the raw score is the first
                           quartile of the round trips, see below)
The workspace is argv[1], else $REBENCH_WORKSPACE, else the cwd.
"""

import json
import os
import random
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import traceback
from time import perf_counter

sys.dont_write_bytecode = True  # leave no __pycache__ in the workspace

LOW, HIGH = -10, 10  # input values are drawn from [LOW, HIGH)
# Sizes checked before timing: tiny, odd and just past power-of-two blocks.
EDGE_SIZES = (1, 2, 3, 7, 1000, 4097, 65537)


class Invalid(Exception):
    """An attempt that gets no score; the message is shown to the participant."""


def env_int(name, default, minimum):
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        raise Invalid(f"bad scorer settings: {name} must be an integer, got {text!r}")
    if value < minimum:
        raise Invalid(f"bad scorer settings: {name} must be >= {minimum}, got {value}")
    return value


def import_torch():
    try:
        import torch
    except ImportError as e:
        raise Invalid(
            f"torch is not importable by {sys.executable} ({e}); is the environment "
            "prepared (`rebench env prepare optimize-kernel`) and its venv first on PATH?"
        )
    return torch


def expected_prefix_sum(torch, x):
    """The definition, vectorized with int64 sums (exact for any int32 input)."""
    positive = (x > 0).to(torch.int64)
    odd_before = (torch.cumsum(positive, 0) - positive) & 1
    return torch.cumsum(x.to(torch.int64) * odd_before, 0)


def definition(values):
    """The definition as a loop, to check `expected_prefix_sum` itself."""
    out, total, odd = [], 0, False
    for v in values:
        if odd:
            total += v
        out.append(total)
        if v > 0:
            odd = not odd
    return out


def check_output(torch, x, got, expected):
    """Raises Invalid saying what is wrong with `got`; returns when exactly right."""
    if not isinstance(got, torch.Tensor):
        raise Invalid(f"wrong output: prefix_sum must return a torch.Tensor, got {type(got).__name__}")
    if got.device != x.device:
        raise Invalid(f"wrong device: output is on {got.device}, input was on {x.device}")
    if got.dtype != torch.int32:
        raise Invalid(f"wrong dtype: output is {got.dtype}, expected torch.int32")
    if tuple(got.shape) != tuple(x.shape):
        raise Invalid(f"wrong shape: output is {tuple(got.shape)}, expected {tuple(x.shape)}")
    mismatch = got.to(torch.int64) != expected
    if bool(mismatch.any()):
        i = int(mismatch.nonzero()[0, 0])
        raise Invalid(
            f"wrong answer (n={x.numel()}) at index {i}: "
            f"expected {int(expected[i])}, got {int(got[i])}"
        )


# The worker: argv = [folder, settings JSON]. fd 1 becomes the solution's
# stderr; the protocol goes over private copies of stdin/stdout. Replies:
# b"R" once loaded; to b"C" + n + n int32 (an edge case) b"O" + n int32; to
# b"T" + seed + n (a timed call) b"D" + the int64 digest; b"E" + length +
# JSON error, after which it exits.
WORKER = r"""
import json, importlib.util, os, struct, sys, traceback
sys.dont_write_bytecode = True
proto_in = os.fdopen(os.dup(0), "rb", buffering=0)
proto_out = os.fdopen(os.dup(1), "wb", buffering=0)
os.dup2(2, 1)
devnull = os.open(os.devnull, os.O_RDONLY)
os.dup2(devnull, 0)
def read_exactly(count):
    data = bytearray(count)
    view = memoryview(data)
    got = 0
    while got < count:
        chunk = proto_in.readinto(view[got:])
        if not chunk:
            os._exit(0)
        got += chunk
    return bytes(data)
def fail(error, **extra):
    data = json.dumps(dict(error=error, **extra)).encode()
    proto_out.write(b"E" + struct.pack("<I", len(data)) + data)
    sys.stderr.flush()
    os._exit(0)
folder, settings = sys.argv[1], json.loads(sys.argv[2])
LOW, HIGH = settings["low"], settings["high"]
try:
    import torch
except ImportError as e:
    fail(f"torch is not importable by {sys.executable} ({e})")
if settings["threads"]:
    torch.set_num_threads(settings["threads"])
if settings.get("cpu", -1) >= 0:
    try:
        os.sched_setaffinity(0, {settings["cpu"]})  # the scorer's CPU (a container may not have it)
    except (AttributeError, OSError, ValueError):
        pass
device = torch.device(settings["device"])
synchronize = torch.cuda.synchronize if settings["device"] == "cuda" else (lambda: None)
try:
    sys.path.insert(0, folder)
    path = os.path.join(folder, "solution.py")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no solution.py in {folder}")
    spec = importlib.util.spec_from_file_location("solution", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn = getattr(module, "prefix_sum", None)
    if not callable(fn):
        raise AttributeError("solution.py does not define prefix_sum(x)")
except Exception as e:
    fail(f"could not load solution.py: {type(e).__name__}: {e}", traceback=traceback.format_exc())
def call(x):
    try:
        got = fn(x)
    except Exception as e:
        fail(f"prefix_sum raised {type(e).__name__}: {e}", traceback=traceback.format_exc())
    if not isinstance(got, torch.Tensor):
        fail(f"wrong output: prefix_sum must return a torch.Tensor, got {type(got).__name__}")
    if got.device != x.device:
        fail(f"wrong device: output is on {got.device}, input was on {x.device}")
    if got.dtype != torch.int32:
        fail(f"wrong dtype: output is {got.dtype}, expected torch.int32")
    if tuple(got.shape) != tuple(x.shape):
        fail(f"wrong shape: output is {tuple(got.shape)}, expected {tuple(x.shape)}")
    return got
proto_out.write(b"R")
# Buffers for the input, the weights and the digest, reused from call to
# call: fresh allocations each time would add noise to every measurement.
buffers = {}
def buffer(name, n, dtype):
    held = buffers.get(name)
    if held is None or held.numel() != n:
        held = buffers[name] = torch.empty(n, dtype=dtype, device=device)
    return held
while True:
    kind = read_exactly(1)
    if kind == b"C":
        (n,) = struct.unpack("<Q", read_exactly(8))
        x = torch.frombuffer(bytearray(read_exactly(4 * n)), dtype=torch.int32).to(device)
        got = call(x)
        synchronize()
        proto_out.write(b"O" + got.cpu().numpy().tobytes())
    elif kind == b"T":
        seed, n = struct.unpack("<QQ", read_exactly(16))
        generator = torch.Generator(device=device)
        generator.manual_seed(seed)
        x = torch.randint(LOW, HIGH, (n,), generator=generator, out=buffer("x", n, torch.int32))
        weights = torch.randint(1, 1 << 20, (n,), generator=generator, out=buffer("w", n, torch.int64))
        got = call(x)
        product = torch.mul(got, weights, out=buffer("p", n, torch.int64))
        digest = int(product.sum())
        synchronize()
        proto_out.write(b"D" + struct.pack("<q", digest))
    else:
        os._exit(0)
"""

# The baseline worker's solution: it returns its input as it is.
IDENTITY = "def prefix_sum(x):\n    return x\n"
# A solution measured at or below the baseline scores as this.
FLOOR_MS = 0.0001


class WorkerFailed(Invalid):
    """The worker reported an error, died or broke the protocol."""


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


def read_reply(pipe, expected, details):
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
        if "traceback" in error:
            details["traceback"] = error["traceback"]
        raise WorkerFailed(message)
    if kind != expected:
        raise WorkerFailed("the solution's process broke the protocol (did it write to its stdout file descriptor?)")


def session_python(prefix):
    """The participant's python: the session's `python3` (from its PATH, the
    environment's venv first) when run through REBENCH_JAIL, which may be a
    container with its own; this one otherwise."""
    return "python3" if prefix else sys.executable


def start_worker(folder, prefix, settings, details):
    # None of rebench's variables (the jail's launcher drops them anyway);
    # the settings go as an argument for the same reason.
    env = {k: v for k, v in os.environ.items() if not k.startswith("REBENCH_")}
    worker = subprocess.Popen(
        prefix + [session_python(prefix), "-B", "-c", WORKER, folder, json.dumps(settings)],
        cwd=folder,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=sys.stderr,
        bufsize=0,
    )
    read_reply(worker.stdout, b"R", details)
    return worker


def check_call(torch, worker, x, details):
    """An edge case: its exact answer, checked here."""
    values = x.cpu().contiguous()
    n = values.numel()
    worker.stdin.write(b"C" + struct.pack("<Q", n) + values.numpy().tobytes())
    worker.stdin.flush()
    read_reply(worker.stdout, b"O", details)
    got = torch.frombuffer(bytearray(read_exactly(worker.stdout, 4 * n)), dtype=torch.int32)
    check_output(torch, values, got, expected_prefix_sum(torch, values))


def timed_call(worker, seed, n, details):
    """(ms, digest): timed here, from sending the seed to the digest's arrival."""
    request = b"T" + struct.pack("<QQ", seed, n)
    start = perf_counter()
    worker.stdin.write(request)
    worker.stdin.flush()
    read_reply(worker.stdout, b"D", details)
    (digest,) = struct.unpack("<q", read_exactly(worker.stdout, 8))
    return (perf_counter() - start) * 1000.0, digest


def expected_digest(torch, device, seed, n):
    generator = torch.Generator(device=device)
    generator.manual_seed(seed)
    x = torch.randint(LOW, HIGH, (n,), dtype=torch.int32, device=device, generator=generator)
    weights = torch.randint(1, 1 << 20, (n,), dtype=torch.int64, device=device, generator=generator)
    # The digest of the worker's int32 output: int64 sums wrap alike.
    expected = expected_prefix_sum(torch, x).to(torch.int32).to(torch.int64)
    return int((expected * weights).sum())


def scorer_cpu():
    """On the CPU: one CPU of those this process may use (the last: the
    first tends to take interrupts); the scorer and its worker run there,
    so that a call never waits on a process woken on another core."""
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


def score(workspace, details):
    n = env_int("OPTIMIZE_KERNEL_N", 100_000_000, 1)
    repeats = env_int("OPTIMIZE_KERNEL_REPEATS", 10, 1)
    warmup = env_int("OPTIMIZE_KERNEL_WARMUP", 3, 0)
    threads = env_int("OPTIMIZE_KERNEL_THREADS", 0, 0)
    device_name = os.environ.get("OPTIMIZE_KERNEL_DEVICE", "cuda").strip() or "cuda"
    if device_name not in ("cuda", "cpu"):
        raise Invalid(f"bad scorer settings: OPTIMIZE_KERNEL_DEVICE must be cuda or cpu, got {device_name!r}")
    baseline_mode = os.environ.get("OPTIMIZE_KERNEL_BASELINE", "subtract").strip() or "subtract"
    if baseline_mode not in ("subtract", "keep"):
        raise Invalid(f"bad scorer settings: OPTIMIZE_KERNEL_BASELINE must be subtract or keep, got {baseline_mode!r}")
    details.update(n=n, repeats=repeats, warmup=warmup, device=device_name, baseline=baseline_mode)

    torch = import_torch()
    details["torch"] = torch.__version__
    if threads:
        torch.set_num_threads(threads)
    if device_name == "cuda":
        if not torch.cuda.is_available():
            raise Invalid(f"this profile times on a CUDA GPU, but torch {torch.__version__} sees none")
        details["gpu"] = torch.cuda.get_device_name(0)
    device = torch.device(device_name)

    # Guard the scorer itself: its vectorized answer against the plain loop.
    probe = torch.randint(LOW, HIGH, (2000,), dtype=torch.int32)
    if expected_prefix_sum(torch, probe).tolist() != definition(probe.tolist()):
        raise RuntimeError("scorer self-check failed: expected_prefix_sum disagrees with the definition")

    settings = {"device": device_name, "threads": threads, "low": LOW, "high": HIGH, "cpu": scorer_cpu() if device_name == "cpu" else -1}
    details["cpu"] = settings["cpu"]
    prefix = json.loads(os.environ["REBENCH_JAIL"]) if os.environ.get("REBENCH_JAIL") else []
    details["runner"] = "REBENCH_JAIL" if prefix else "direct"
    seed = int.from_bytes(os.urandom(8), "little") >> 1
    details["seed"] = seed
    rng = random.Random(seed)

    baseline_dir = tempfile.mkdtemp(prefix="optimize-kernel-baseline-")
    workers = []
    try:
        with open(os.path.join(baseline_dir, "solution.py"), "w") as f:
            f.write(IDENTITY)
        baseline = None
        if baseline_mode == "subtract":
            baseline = start_worker(baseline_dir, [], settings, {})
            workers.append(baseline)
        worker = start_worker(workspace, prefix, settings, details)
        workers.append(worker)

        edge_cases = [torch.randint(LOW, HIGH, (size,), dtype=torch.int32, generator=torch.Generator().manual_seed(rng.getrandbits(62))) for size in EDGE_SIZES]
        edge_cases.append(torch.zeros(5, dtype=torch.int32))
        edge_cases.append(torch.full((9,), 3, dtype=torch.int32))
        edge_cases.append(torch.tensor([rng.choice([-1, 1]) for _ in range(33)], dtype=torch.int32))
        for x in edge_cases:
            check_call(torch, worker, x, details)

        times_ms, baseline_ms = [], []
        for run in range(warmup + repeats):
            call_seed = rng.getrandbits(62)  # a new input every call: nothing to cache
            # Interleaved, in alternating order, so that the machine's pace
            # at the moment affects both alike.
            if baseline is None:
                took, digest = timed_call(worker, call_seed, n, details)
                base = 0.0
            elif run % 2:
                took, digest = timed_call(worker, call_seed, n, details)
                base, _ = timed_call(baseline, call_seed, n, {})
            else:
                base, _ = timed_call(baseline, call_seed, n, {})
                took, digest = timed_call(worker, call_seed, n, details)
            if digest != expected_digest(torch, device, call_seed, n):
                details["failed_call"] = run
                raise Invalid(f"wrong answer (n={n}) on timed call {run}: the output differs from the expected one")
            if run >= warmup:
                times_ms.append(took)
                baseline_ms.append(base)
    except BrokenPipeError:
        raise WorkerFailed("the solution's process exited before answering")
    finally:
        for w in workers:
            w.kill()
            w.wait()
        shutil.rmtree(baseline_dir, ignore_errors=True)

    # Each call against the baseline call next to it; the median of those
    # differences stands up to a spike in either.
    # Subtracting: the median of the differences stands up to a spike in
    # either call of a pair. Keeping: noise only ever adds time, so the
    # first quartile of the round trips is the undisturbed time.
    differences = [t - b for t, b in zip(times_ms, baseline_ms)]
    q1, median, q3 = quartiles(differences)
    best = max(median if baseline is not None else q1, FLOOR_MS)
    details["times_ms"] = [round(t, 4) for t in times_ms]
    if baseline is not None:
        details["baseline_ms"] = [round(t, 4) for t in baseline_ms]
    return {
        "raw": best,
        "message": {
            "ms": round(best, 4),
            "iqr_ms": [round(q1, 4), round(q3, 4)],
            "calls": len(differences),
            "n": n,
            "device": device_name,
            "round_trip_ms": round(min(times_ms), 4),
            **({"baseline_ms": round(min(baseline_ms), 4)} if baseline is not None else {}),
        },
        "details": details,
    }


def main():
    if len(sys.argv) > 1:
        workspace = sys.argv[1]
    else:
        workspace = os.environ.get("REBENCH_WORKSPACE") or os.getcwd()
    workspace = os.path.abspath(workspace)
    details = {"workspace": workspace}
    try:
        result = score(workspace, details)
    except Invalid as e:
        if e.__context__ is not None and "traceback" not in details:
            details["traceback"] = "".join(traceback.format_exception(e.__context__))
        result = {"raw": None, "message": {"error": str(e)}, "details": details}
    except Exception as e:
        details["traceback"] = traceback.format_exc()
        result = {"raw": None, "message": {"error": f"scorer error: {type(e).__name__}: {e}"}, "details": details}
    print(json.dumps(result), flush=True)
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
