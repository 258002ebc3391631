"""Child process that runs the participant's scaffold (started by rcc.runner).

    python3 -B run_scaffold.py check <workspace> <result.json>
    python3 -B run_scaffold.py solve <workspace> <result.json> <problem.json>

Imports <workspace>/scaffold.py, checks that it defines solve(problem, client)
and, for `solve`, calls it with an rcc.client.Client built from OPENAI_* and
writes {"ok": true, "code": "..."} or {"ok": false, "error": "..."} to
result.json. Everything the scaffold prints goes to stderr.
"""

import contextlib
import importlib.util
import json
import os
import sys
import traceback

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def write(path, payload):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(payload, f)
    os.replace(tmp, path)


def load_scaffold(workspace):
    path = os.path.join(workspace, "scaffold.py")
    if not os.path.isfile(path):
        raise FileNotFoundError("there is no scaffold.py in the workspace")
    spec = importlib.util.spec_from_file_location("scaffold", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["scaffold"] = module
    spec.loader.exec_module(module)
    solve = getattr(module, "solve", None)
    if not callable(solve):
        raise AttributeError("scaffold.py does not define solve(problem, client)")
    return solve


def main():
    mode, workspace, result_path = sys.argv[1:4]
    sys.path.insert(0, HERE)
    from rcc.client import Client  # this copy, whatever the workspace holds

    sys.path.insert(0, workspace)
    with contextlib.redirect_stdout(sys.stderr):
        try:
            solve = load_scaffold(workspace)
        except BaseException as e:  # noqa: BLE001 - report anything, even SystemExit
            write(result_path, {"ok": False, "error": f"could not load scaffold.py: {type(e).__name__}: {e}",
                                "traceback": traceback.format_exc()[-4000:]})
            return
        if mode == "check":
            write(result_path, {"ok": True})
            return
        with open(sys.argv[4], encoding="utf-8") as f:
            problem = json.load(f)
        try:
            code = solve(problem, Client())
        except BaseException as e:  # noqa: BLE001
            write(result_path, {"ok": False, "error": f"solve raised {type(e).__name__}: {e}",
                                "traceback": traceback.format_exc()[-4000:]})
            return
    if not isinstance(code, str):
        write(result_path, {"ok": False, "error": f"solve returned {type(code).__name__}, not str"})
        return
    write(result_path, {"ok": True, "code": code})


if __name__ == "__main__":
    main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # no atexit hooks or lingering threads of the scaffold
