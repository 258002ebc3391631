"""Official scorer for optimize-kernel (hidden from the participant).

Draws fresh random int32 inputs (values in [-10, 10)) on the profile's
device, runs the participant's `prefix_sum` from <workspace>/solution.py,
requires output exactly equal to its own implementation (int32, same shape,
same device) on every call, and reports the best time in milliseconds of
the timed calls, each measured with the device synchronized before and after.

Protocol: the LAST stdout line is one JSON object
{"raw": ms | null, "message": {...}, "details": {...}}; exit 0 whenever the
outcome is known (wrong answers included).

Settings (environment variables; the profiles set them):
  OPTIMIZE_KERNEL_N        input length (default 100000000)
  OPTIMIZE_KERNEL_DEVICE   "cuda" (default) or "cpu"
  OPTIMIZE_KERNEL_REPEATS  timed calls, each on a new input (default 10)
  OPTIMIZE_KERNEL_WARMUP   untimed (but checked) calls first (default 3)
  OPTIMIZE_KERNEL_THREADS  torch CPU threads (default: torch's choice)
The workspace is argv[1], else $REBENCH_WORKSPACE, else the cwd.

In an isolated session (rebench sets $REBENCH_JAIL, the argv prefix that
runs a command inside the session's jail) this scorer runs itself inside the
jail, from its source text (its file is hidden there), and passes on the
result line: the solution then runs where no hidden file exists. It needs
no hidden data, so the whole check can run there.
"""

import contextlib
import importlib.util
import json
import os
import random
import subprocess
import sys
import traceback
from time import perf_counter  # bound before participant code can patch `time`

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


def load_solution(workspace):
    path = os.path.join(workspace, "solution.py")
    if not os.path.isfile(path):
        raise Invalid(f"no solution.py in {workspace}")
    sys.path.insert(0, workspace)  # let solution.py import its own helpers
    try:
        spec = importlib.util.spec_from_file_location("solution", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except Exception as e:
        raise Invalid(f"could not load solution.py: {type(e).__name__}: {e}")
    fn = getattr(module, "prefix_sum", None)
    if not callable(fn):
        raise Invalid("solution.py does not define prefix_sum(x)")
    return fn


def call(fn, x):
    try:
        # Participant prints go to stderr so they cannot forge our last line.
        with contextlib.redirect_stdout(sys.stderr):
            return fn(x)
    except Exception as e:
        raise Invalid(f"prefix_sum raised {type(e).__name__}: {e}")


def score(workspace, details):
    n = env_int("OPTIMIZE_KERNEL_N", 100_000_000, 1)
    repeats = env_int("OPTIMIZE_KERNEL_REPEATS", 10, 1)
    warmup = env_int("OPTIMIZE_KERNEL_WARMUP", 3, 0)
    threads = env_int("OPTIMIZE_KERNEL_THREADS", 0, 0)
    device_name = os.environ.get("OPTIMIZE_KERNEL_DEVICE", "cuda").strip() or "cuda"
    if device_name not in ("cuda", "cpu"):
        raise Invalid(f"bad scorer settings: OPTIMIZE_KERNEL_DEVICE must be cuda or cpu, got {device_name!r}")
    details.update(n=n, repeats=repeats, warmup=warmup, device=device_name)

    torch = import_torch()
    details["torch"] = torch.__version__
    if threads:
        torch.set_num_threads(threads)
    if device_name == "cuda":
        if not torch.cuda.is_available():
            raise Invalid(f"this profile times on a CUDA GPU, but torch {torch.__version__} sees none")
        details["gpu"] = torch.cuda.get_device_name(0)
    device = torch.device(device_name)
    # Bound now, before participant code could replace them.
    synchronize = torch.cuda.synchronize if device_name == "cuda" else (lambda: None)
    randint = torch.randint

    seed = int.from_bytes(os.urandom(8), "little") >> 1
    details["seed"] = seed
    generator = torch.Generator(device=device)
    generator.manual_seed(seed)

    def fresh(size):
        return randint(LOW, HIGH, (size,), dtype=torch.int32, device=device, generator=generator)

    # Guard the scorer itself: its vectorized answer against the plain loop.
    probe = fresh(2000)
    if expected_prefix_sum(torch, probe).tolist() != definition(probe.tolist()):
        raise RuntimeError("scorer self-check failed: expected_prefix_sum disagrees with the definition")

    fn = load_solution(workspace)

    rng = random.Random(seed)
    edge_cases = [fresh(size) for size in EDGE_SIZES]
    edge_cases.append(torch.zeros(5, dtype=torch.int32, device=device))
    edge_cases.append(torch.full((9,), 3, dtype=torch.int32, device=device))
    edge_cases.append(torch.tensor([rng.choice([-1, 1]) for _ in range(33)], dtype=torch.int32, device=device))
    for x in edge_cases:
        check_output(torch, x, call(fn, x.clone()), expected_prefix_sum(torch, x))

    times_ms = []
    for run in range(warmup + repeats):
        x = fresh(n)  # a new input every call: nothing to cache between calls
        expected = expected_prefix_sum(torch, x)
        argument = x.clone()
        synchronize()
        start = perf_counter()
        got = call(fn, argument)
        synchronize()
        elapsed = perf_counter() - start
        try:
            check_output(torch, x, got, expected)
        except Invalid:
            details["failed_call"] = run
            raise
        if run >= warmup:
            times_ms.append(elapsed * 1000.0)
        del x, expected, argument, got  # free device memory before the next input

    best = min(times_ms)
    details["times_ms"] = [round(t, 4) for t in times_ms]
    details["median_ms"] = round(sorted(times_ms)[len(times_ms) // 2], 4)
    return {"raw": best, "message": {"ms": round(best, 4), "n": n, "device": device_name}, "details": details}


def score_in_jail(workspace, jail, details):
    """This scorer run inside the session's jail; its result line passed on."""
    with open(os.path.abspath(__file__), encoding="utf-8") as f:
        source = f.read()
    # None of rebench's variables inside (no REBENCH_JAIL: no recursion).
    env = {k: v for k, v in os.environ.items() if not k.startswith("REBENCH_")}
    # The jail's launcher scrubs the environment: the settings go as an argument.
    settings = {k: v for k, v in os.environ.items() if k.startswith("OPTIMIZE_KERNEL_")}
    proc = subprocess.run(
        jail + [sys.executable, "-B", "-c", source, workspace, json.dumps(settings)],
        cwd=workspace, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
    )
    lines = [line for line in proc.stdout.decode("utf-8", errors="replace").splitlines() if line.strip()]
    try:
        result = json.loads(lines[-1])
        if not isinstance(result, dict):
            raise ValueError("not an object")
    except (IndexError, ValueError):
        raise Invalid(f"the scorer's run inside the jail gave no result (exit status {proc.returncode})")
    result.setdefault("details", {})["jailed"] = True
    return result


def main():
    if len(sys.argv) > 2:  # run inside the jail: the settings come as JSON
        for name, value in json.loads(sys.argv[2]).items():
            if name.startswith("OPTIMIZE_KERNEL_"):
                os.environ[name] = str(value)
    if len(sys.argv) > 1:
        workspace = sys.argv[1]
    else:
        workspace = os.environ.get("REBENCH_WORKSPACE") or os.getcwd()
    workspace = os.path.abspath(workspace)
    details = {"workspace": workspace}
    try:
        jail = os.environ.get("REBENCH_JAIL")
        if jail:
            result = score_in_jail(workspace, json.loads(jail), details)
        else:
            result = score(workspace, details)
    except Invalid as e:
        if e.__context__ is not None:  # e.g. the participant's exception
            details["traceback"] = "".join(traceback.format_exception(e.__context__))
        result = {"raw": None, "message": {"error": str(e)}, "details": details}
    except Exception as e:
        details["traceback"] = traceback.format_exc()
        result = {"raw": None, "message": {"error": f"scorer error: {type(e).__name__}: {e}"}, "details": details}
    print(json.dumps(result), flush=True)
    sys.stderr.flush()
    # Skip atexit hooks and lingering threads the solution may have started,
    # so nothing can be printed after our result line.
    os._exit(0)


if __name__ == "__main__":
    main()
