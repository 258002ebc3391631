"""Official scorer of rust-codecontests (hidden from the participant).

Runs <workspace>/scaffold.py's solve(problem, client) on every held-out problem
($REBENCH_PREPARED/heldout.jsonl, written by prepare/prepare.py), compiles each
returned program with rustc and counts a problem solved when every test passes.
raw = solved / problems. Prints one JSON line {"raw", "message", "details"} last
and exits 0 whenever the outcome is known.

Settings (the profile's env):
  RUST_CODECONTESTS_MODEL_SOURCE  standin (the local stand-in model, knowledge from the
                                  held-out file) or endpoint (the operator's model)
  RUST_CODECONTESTS_MODEL         the model name the scaffold is given and the endpoint asked for
  RUST_CODECONTESTS_MAX_REQUESTS  spend limit of one scoring run: model requests
  RUST_CODECONTESTS_MAX_TOKENS    spend limit of one scoring run: prompt + completion tokens
  RUST_CODECONTESTS_SOLVE_TIMEOUT seconds one solve() may take
  RUST_CODECONTESTS_WORKERS       problems solved and judged at once
  RUST_CODECONTESTS_TIME_BUDGET   seconds after which problems not yet started are skipped
Operator settings for `endpoint` (read from the rebench server's environment, never
given to the scaffold): REBENCH_MODEL_URL (an OpenAI-compatible base URL ending in /v1),
REBENCH_MODEL_KEY (its API key), REBENCH_MODEL_NAME (optional: the model name the
endpoint knows the fixed model by, if it differs from RUST_CODECONTESTS_MODEL).
"""

import json
import os
import sys

sys.dont_write_bytecode = True
ENV_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ENV_DIR, "workspace"))  # the pristine rcc package

from rcc import runner, standin  # noqa: E402


def setting(name, default, kind=int, minimum=1):
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    value = kind(text)
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {text}")
    return value


def score(workspace):
    details = {"workspace": workspace, "profile": os.environ.get("REBENCH_PROFILE", "")}

    def invalid(error):
        return {"raw": None, "message": {"error": error}, "details": details}

    try:
        source = os.environ.get("RUST_CODECONTESTS_MODEL_SOURCE", "standin")
        if source not in ("standin", "endpoint"):
            raise ValueError(f"RUST_CODECONTESTS_MODEL_SOURCE must be standin or endpoint, not {source!r}")
        model = os.environ.get("RUST_CODECONTESTS_MODEL", "standin")
        max_requests = setting("RUST_CODECONTESTS_MAX_REQUESTS", 400)
        max_tokens = setting("RUST_CODECONTESTS_MAX_TOKENS", 1_000_000)
        solve_timeout = setting("RUST_CODECONTESTS_SOLVE_TIMEOUT", 30.0, float)
        workers = setting("RUST_CODECONTESTS_WORKERS", 1)
        budget = setting("RUST_CODECONTESTS_TIME_BUDGET", None, float) if \
            os.environ.get("RUST_CODECONTESTS_TIME_BUDGET") else None
    except ValueError as e:
        return invalid(f"bad scorer settings: {e}")
    details.update(model_source=source, max_requests=max_requests, max_tokens=max_tokens,
                   solve_timeout_s=solve_timeout, workers=workers)

    if source == "endpoint":
        url = os.environ.get("REBENCH_MODEL_URL", "").strip()
        key = os.environ.get("REBENCH_MODEL_KEY", "").strip()
        if not url or not key:
            return invalid("the model endpoint is not configured: the operator must set REBENCH_MODEL_URL "
                           "and REBENCH_MODEL_KEY in the rebench server's environment")
        upstream_model = os.environ.get("REBENCH_MODEL_NAME", "").strip() or model
        details["model_url"] = url

    prepared = os.environ.get("REBENCH_PREPARED", "")
    heldout = os.path.join(prepared, "heldout.jsonl")
    if not prepared or not os.path.isfile(heldout):
        profile = os.environ.get("REBENCH_PROFILE") or "full"
        return invalid(f"held-out problems not found; run `rebench env prepare rust-codecontests "
                       f"--profile {profile}`")
    problems = runner.load_problems(heldout)
    if not problems:
        return invalid(f"{heldout} holds no problems")

    def run(upstream, key, name):
        raw, message, more = runner.evaluate(
            workspace, problems, upstream=upstream, upstream_key=key, model=name,
            max_requests=max_requests, max_tokens=max_tokens, solve_timeout_s=solve_timeout,
            workers=workers, time_budget_s=budget)
        details.update(more)
        return {"raw": raw, "message": message, "details": details}

    try:
        if source == "standin":
            with standin.Server(standin.load_knowledge(heldout)) as server:
                return run(server.base_url, "standin", model)
        return run(url, key, upstream_model)
    except runner.ScaffoldUnusable as e:
        return invalid(str(e))
    except (RuntimeError, OSError) as e:
        return invalid(f"scoring failed: {type(e).__name__}: {e}")


def main():
    workspace = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("REBENCH_WORKSPACE") or os.getcwd()
    result = score(os.path.abspath(workspace))
    print(json.dumps(result), flush=True)
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
