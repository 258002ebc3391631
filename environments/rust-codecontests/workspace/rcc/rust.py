"""Compile a Rust program and run it against tests, contest-judge style.

    from rcc import rust
    result = rust.judge(source, tests, time_limit_s=1.0, memory_limit_mb=256)
    result["verdict"]  # "accepted", "compile_error", "wrong_answer", "time_limit",
                       # "memory_limit", "runtime_error", "output_limit"

Compilation: `rustc -O --edition 2021` in a throwaway directory (deleted
afterwards). Each test runs the binary in that directory with stdin from a
file and these limits (set with setrlimit in the child before exec):
RLIMIT_CPU (the time limit, whole seconds rounded up, plus 1 s as the hard
kill), RLIMIT_AS (the memory limit), RLIMIT_FSIZE (64 MiB of output),
RLIMIT_CORE 0; plus a wall-clock timeout of 2 x the time limit + 1 s. A run
is over the time limit when its measured CPU time (user + system, from
wait4) exceeds the limit, or it was killed by the CPU limit or the wall
timeout. Output matches when the expected and actual outputs are equal after
removing trailing whitespace from every line and trailing empty lines.
A problem is solved only when every test passes; judging stops at the first
failing test unless `stop_at_first_failure=False`.
"""

import os
import resource
import shutil
import signal
import subprocess
import tempfile
import time

RUSTC_ARGS = ["-O", "--edition", "2021", "-C", "debuginfo=0", "--crate-name", "main"]
COMPILE_TIMEOUT_S = 60.0
OUTPUT_LIMIT_BYTES = 64 * 1024 * 1024
MAX_ERROR_CHARS = 4000
MAX_SHOWN_CHARS = 1000


def rustc_path():
    """The rustc to use: $RUSTC, else rustc on PATH; None when there is none."""
    explicit = os.environ.get("RUSTC")
    if explicit:
        return explicit if os.path.exists(explicit) else shutil.which(explicit)
    return shutil.which("rustc")


def normalize_output(text):
    """Lines with trailing whitespace removed, without trailing empty lines."""
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def outputs_match(expected, got):
    return normalize_output(expected) == normalize_output(got)


def _shorten(text, limit=MAX_SHOWN_CHARS):
    return text if len(text) <= limit else text[:limit] + f"... [{len(text) - limit} more characters]"


def compile_rust(source, workdir, timeout_s=COMPILE_TIMEOUT_S):
    """Compiles `source` into `workdir`/main. Returns (binary path or None, compiler messages)."""
    rustc = rustc_path()
    if rustc is None:
        raise FileNotFoundError("rustc not found (set $RUSTC or put rustc on PATH)")
    src = os.path.join(workdir, "main.rs")
    binary = os.path.join(workdir, "main")
    with open(src, "w", encoding="utf-8") as f:
        f.write(source)
    try:
        proc = subprocess.run(
            [rustc, *RUSTC_ARGS, "-o", binary, src],
            cwd=workdir,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout_s,
            start_new_session=True,
        )
    except subprocess.TimeoutExpired:
        return None, f"compilation timed out after {timeout_s:g} s"
    messages = proc.stderr.replace(src, "main.rs")
    if proc.returncode != 0 or not os.path.isfile(binary):
        return None, _shorten(messages, MAX_ERROR_CHARS) or f"rustc exited with status {proc.returncode}"
    return binary, messages


def _limits(time_limit_s, memory_limit_mb):
    cpu = max(1, int(-(-time_limit_s // 1)))  # ceil
    memory = int(memory_limit_mb * 1024 * 1024)

    def apply():  # runs in the child between fork and exec: setrlimit calls only
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        resource.setrlimit(resource.RLIMIT_FSIZE, (OUTPUT_LIMIT_BYTES, OUTPUT_LIMIT_BYTES))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return apply


def run_binary(binary, input_text, time_limit_s=1.0, memory_limit_mb=256, workdir=None):
    """Runs `binary` once on `input_text` under the limits.

    Returns {"status": "ok"|"time_limit"|"memory_limit"|"runtime_error"|"output_limit",
    "stdout", "stderr", "cpu_s", "wall_s", "exit"}."""
    workdir = workdir or os.path.dirname(binary)
    with tempfile.TemporaryFile(dir=workdir) as fin, \
            tempfile.TemporaryFile(dir=workdir) as fout, \
            tempfile.TemporaryFile(dir=workdir) as ferr:
        fin.write(input_text.encode("utf-8"))
        fin.seek(0)
        wall_limit = 2 * time_limit_s + 1
        start = time.monotonic()
        proc = subprocess.Popen(
            [binary],
            cwd=workdir,
            stdin=fin,
            stdout=fout,
            stderr=ferr,
            env={"PATH": "/usr/bin:/bin", "RUST_BACKTRACE": "0"},
            preexec_fn=_limits(time_limit_s, memory_limit_mb),
            start_new_session=True,
        )
        killed_by_wall = False
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - start > wall_limit:
                killed_by_wall = True
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.005)
        proc.returncode = os.waitstatus_to_exitcode(status)  # keep Popen from waiting again
        wall = time.monotonic() - start
        cpu = usage.ru_utime + usage.ru_stime
        fout.seek(0)
        ferr.seek(0)
        stdout = fout.read().decode("utf-8", errors="replace")
        stderr = ferr.read(MAX_ERROR_CHARS * 4).decode("utf-8", errors="replace")
    code = proc.returncode
    result = {"stdout": stdout, "stderr": _shorten(stderr, MAX_ERROR_CHARS), "cpu_s": round(cpu, 3),
              "wall_s": round(wall, 3), "exit": code}
    signaled = code < 0
    sig = -code if signaled else None
    if killed_by_wall or cpu > time_limit_s or sig in (signal.SIGXCPU, signal.SIGKILL):
        result["status"] = "time_limit"
    elif sig == signal.SIGXFSZ:
        result["status"] = "output_limit"
    elif code != 0 and ("memory allocation of" in stderr or "out of memory" in stderr.lower()
                        or "Cannot allocate memory" in stderr):
        result["status"] = "memory_limit"
    elif code != 0:
        result["status"] = "runtime_error"
    else:
        result["status"] = "ok"
    return result


def judge(source, tests, time_limit_s=1.0, memory_limit_mb=256, stop_at_first_failure=True,
          compile_timeout_s=COMPILE_TIMEOUT_S):
    """Compiles `source` and runs it on `tests` ([{"input", "output"}, ...]).

    Returns {"verdict", "passed", "total", "compile_error"?, "failure"?} where
    failure = {"test", "status", "input", "expected", "got", "stderr"} (shortened)
    for the first failing test."""
    total = len(tests)
    workdir = tempfile.mkdtemp(prefix="rcc-judge-")
    try:
        binary, messages = compile_rust(source, workdir, compile_timeout_s)
        if binary is None:
            return {"verdict": "compile_error", "passed": 0, "total": total, "compile_error": messages}
        passed = 0
        verdict = "accepted"
        failure = None
        for index, test in enumerate(tests):
            run = run_binary(binary, test["input"], time_limit_s, memory_limit_mb, workdir)
            status = run["status"]
            if status == "ok" and not outputs_match(test["output"], run["stdout"]):
                status = "wrong_answer"
            if status == "ok":
                passed += 1
                continue
            if failure is None:
                verdict = status
                failure = {
                    "test": index,
                    "status": status,
                    "input": _shorten(test["input"]),
                    "expected": _shorten(test["output"]),
                    "got": _shorten(run["stdout"]),
                    "stderr": _shorten(run["stderr"]),
                    "cpu_s": run["cpu_s"],
                }
            if stop_at_first_failure:
                break
        result = {"verdict": verdict, "passed": passed, "total": total}
        if failure is not None:
            result["failure"] = failure
        return result
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def extract_code(reply):
    """The last ```rust (or plain ```) fenced block of a model reply, else the whole reply."""
    blocks = []
    lines = reply.split("\n")
    inside = None
    for line in lines:
        stripped = line.strip()
        if inside is None and stripped.startswith("```"):
            inside = (stripped[3:].strip().lower(), [])
        elif inside is not None and stripped.startswith("```"):
            blocks.append(inside)
            inside = None
        elif inside is not None:
            inside[1].append(line)
    rust = [body for lang, body in blocks if lang in ("rust", "rs")]
    chosen = rust or [body for lang, body in blocks if lang == ""]
    if chosen:
        return "\n".join(chosen[-1]) + "\n"
    return reply
