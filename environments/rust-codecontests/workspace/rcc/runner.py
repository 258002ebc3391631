"""Runs a scaffold on problems and grades its programs (used by score.py and the official scorer).

For each problem, in a fresh Python process (cwd = the workspace, its own
process group, killed after `solve_timeout_s`), `solve(problem, client)` is
called with the problem's public view: name, description, public_tests
([{"input", "output"}]), time_limit_s and memory_limit_mb. The returned Rust
source is judged by rcc.rust.judge on the problem's full tests. Model traffic
goes through rcc.proxy, which enforces the run's request and token limits;
once they are reached, problems not yet started are not attempted (unsolved).
"""

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from . import rust
from .proxy import Proxy

HERE = os.path.dirname(os.path.abspath(__file__))
CHILD = os.path.join(HERE, "run_scaffold.py")
# Never handed to the scaffold's process.
PRIVATE_VARS = ("REBENCH_PREPARED", "REBENCH_ENV_DIR", "REBENCH_MODEL_URL", "REBENCH_MODEL_KEY",
                "REBENCH_MODEL_NAME", "REBENCH_JAIL")
# Folders inside the workspace for each scaffold run's files when jailed.
RUN_PREFIX = ".rcc-run-"


def _jail():
    """The argv prefix that runs a command inside the session's jail
    (REBENCH_JAIL, set by rebench for the scorer of an isolated session), or
    None. Inside, nothing of the environment folder or the preparation (the
    held-out problems and their tests) exists."""
    text = os.environ.get("REBENCH_JAIL")
    return json.loads(text) if text else None


def _run_dir(prefix, workspace):
    """A fresh folder for one scaffold run's files: inside the workspace when
    jailed (the jail's only shared folder), else a temporary one."""
    if _jail() is not None:
        return tempfile.mkdtemp(prefix=RUN_PREFIX, dir=workspace)
    return tempfile.mkdtemp(prefix=prefix)


class ScaffoldUnusable(Exception):
    """scaffold.py is missing or cannot be imported: no score."""


def load_problems(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def public_view(problem):
    return {
        "name": problem["name"],
        "description": problem["description"],
        "public_tests": problem.get("public_tests", []),
        "time_limit_s": problem.get("time_limit_s", 2.0),
        "memory_limit_mb": problem.get("memory_limit_mb", 256),
    }


def _run_child(args, workspace, env, timeout_s, tmpdir):
    result_path = os.path.join(tmpdir, "result.json")
    started = time.monotonic()
    jail = _jail()
    # Jailed, the workspace's copy of run_scaffold.py (protected: checked
    # unchanged before scoring) stands in for ours, which the jail hides.
    child = os.path.join(workspace, "rcc", "run_scaffold.py") if jail else CHILD
    argv = [sys.executable, "-B", child, args[0], workspace, result_path, *args[1:]]
    if jail:
        # The jail's launcher starts from a scrubbed environment: the
        # scaffold's own variables (the proxy's URL and token) go explicitly.
        argv = ["env"] + [f"{k}={env[k]}" for k in SCAFFOLD_VARS if k in env] + argv
    with open(os.path.join(tmpdir, "log.txt"), "wb") as log:
        proc = subprocess.Popen(
            (jail or []) + argv,
            cwd=workspace,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            proc.wait(timeout=timeout_s)
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # the scaffold's stray children too
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait()
    seconds = round(time.monotonic() - started, 2)
    with open(os.path.join(tmpdir, "log.txt"), "rb") as f:
        data = f.read()
    tail = data[-2000:].decode("utf-8", errors="replace")
    if timed_out:
        return {"ok": False, "timeout": True, "error": f"solve took longer than {timeout_s:g} s",
                "seconds": seconds, "log_tail": tail}
    try:
        with open(result_path, encoding="utf-8") as f:
            result = json.load(f)
    except (OSError, ValueError):
        result = {"ok": False, "error": f"the scaffold's process exited (status {proc.returncode}) "
                                        "without a result"}
    result["seconds"] = seconds
    if not result.get("ok"):
        result["log_tail"] = tail
    return result


# What child_env sets for the scaffold on top of a session's environment.
SCAFFOLD_VARS = ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL", "PYTHONDONTWRITEBYTECODE")


def child_env(base_url, token, model):
    env = {k: v for k, v in os.environ.items() if k not in PRIVATE_VARS}
    env.update({
        "OPENAI_BASE_URL": base_url,
        "OPENAI_API_KEY": token,
        "OPENAI_MODEL": model,
        "PYTHONDONTWRITEBYTECODE": "1",
    })
    return env


def check_scaffold(workspace, env, timeout_s):
    """None when scaffold.py imports and defines solve; else the reason."""
    tmp = _run_dir("rcc-check-", workspace)
    try:
        result = _run_child(["check"], workspace, env, timeout_s, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return None if result.get("ok") else result.get("error", "scaffold.py could not be loaded")


def evaluate(workspace, problems, *, upstream, upstream_key, model, max_requests, max_tokens,
             solve_timeout_s, workers=1, time_budget_s=None, log=None):
    """Runs and grades; returns (raw, message, details). Raises ScaffoldUnusable."""
    log = log or (lambda text: print(text, file=sys.stderr, flush=True))
    workspace = os.path.abspath(workspace)
    if rust.rustc_path() is None:
        raise RuntimeError("rustc not found on the scoring machine")
    started = time.monotonic()
    token = "rcc-" + secrets.token_hex(16)
    with Proxy(upstream, upstream_key, model, token, max_requests, max_tokens) as proxy:
        env = child_env(proxy.base_url, token, model)
        problem_error = check_scaffold(workspace, env, max(solve_timeout_s, 30))
        if problem_error is not None:
            raise ScaffoldUnusable(problem_error)
        lock = threading.Lock()
        outcomes = [None] * len(problems)

        def attempt(index):
            problem = problems[index]
            name = problem["name"]
            if proxy.meter.exhausted():
                outcomes[index] = {"name": name, "verdict": "not_attempted", "why": "spend limit reached"}
                return
            if time_budget_s is not None and time.monotonic() - started > time_budget_s:
                outcomes[index] = {"name": name, "verdict": "not_attempted", "why": "scorer time budget spent"}
                return
            tmp = _run_dir("rcc-solve-", workspace)
            try:
                path = os.path.join(tmp, "problem.json")
                with open(path, "w", encoding="utf-8") as f:
                    json.dump(public_view(problem), f)
                answer = _run_child(["solve", path], workspace, env, solve_timeout_s, tmp)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
            outcome = {"name": name, "solve_s": answer["seconds"]}
            if not answer.get("ok"):
                outcome["verdict"] = "scaffold_timeout" if answer.get("timeout") else "scaffold_error"
                outcome["error"] = answer.get("error", "")
                outcome["log_tail"] = answer.get("log_tail", "")[-1000:]
            else:
                judged_at = time.monotonic()
                verdict = rust.judge(answer["code"], problem["tests"], problem.get("time_limit_s", 2.0),
                                     problem.get("memory_limit_mb", 256))
                outcome.update(verdict)
                outcome["judge_s"] = round(time.monotonic() - judged_at, 2)
                for key in ("compile_error",):
                    if key in outcome:
                        outcome[key] = outcome[key][:1500]
            outcomes[index] = outcome
            with lock:
                log(f"[{sum(o is not None for o in outcomes)}/{len(problems)}] {name}: {outcome['verdict']}")

        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            list(pool.map(attempt, range(len(problems))))
        spend = proxy.meter.summary()

    solved = sum(o["verdict"] == "accepted" for o in outcomes)
    raw = solved / len(problems) if problems else 0.0
    verdicts = {}
    for o in outcomes:
        verdicts[o["verdict"]] = verdicts.get(o["verdict"], 0) + 1
    errors = [o for o in outcomes if o["verdict"] in ("scaffold_error", "scaffold_timeout")]
    message = {
        "solved": solved,
        "problems": len(problems),
        "fraction": round(raw, 4),
        "verdicts": verdicts,
        "requests": spend["requests"],
        "tokens": spend["tokens"],
        "spend_limit_hit": spend["limit_hit"],
    }
    if errors:
        message["scaffold_errors"] = len(errors)
        message["first_scaffold_error"] = errors[0]["error"][:300]
    details = {"problems": outcomes, "spend": spend, "model": model,
               "seconds": round(time.monotonic() - started, 1)}
    return raw, message, details
