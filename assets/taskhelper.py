"""rebench's bridge into a METR Task Standard family.

Run as `python3 taskhelper.py OPERATION FAMILY_DIR FAMILY`, with a JSON
object on stdin: {"separator": line, "task": name, "env": {required
variables}, "submission": text, "score_log": [entries]}. It imports FAMILY
from FAMILY_DIR, calls the operation and prints its result as one JSON
object between two separator lines, last: whatever the family (or code it
runs) prints comes before it and cannot be taken for the result, since
only stdin (never the command line, which any user may read) carried the
separator. A failure prints {"error": {"step": ..., "traceback": ...}} the
same way and exits 2.
"""

import importlib
import json
import math
import os
import sys
import traceback


def finite(value):
    """JSON without NaN or infinities: those become their names as strings."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {str(k): finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def score_value(value):
    """A family's score as (number or None, why it is not one)."""
    if value is None:
        return None, "none"
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None, "not a number: " + repr(value)[:80]
    if math.isnan(number):
        return None, "nan"
    if not math.isfinite(number):
        return None, "infinite"
    return number, None


def logged(entry):
    """A stored score-log entry as the standard passes it to aggregate_scores:
    an invalid attempt's score is NaN."""
    score = entry.get("score")
    entry = dict(entry)
    entry["score"] = float("nan") if score is None else float(score)
    return entry


def describe(family, tasks, request):
    out = {
        "standard_version": getattr(family, "standard_version", None),
        "required_environment_variables": list(
            getattr(family, "required_environment_variables", [])
        ),
        "tasks": sorted(tasks),
        "has_install": hasattr(family, "install"),
        "has_start": hasattr(family, "start"),
        "has_score": hasattr(family, "score"),
        "has_intermediate_score": hasattr(family, "intermediate_score"),
        "has_aggregate_scores": hasattr(family, "aggregate_scores"),
        "has_teardown": hasattr(family, "teardown"),
    }
    name = request.get("task")
    if name:
        task = tasks[name]
        out["instructions"] = family.get_instructions(task)
        out["permissions"] = (
            list(family.get_permissions(task)) if hasattr(family, "get_permissions") else []
        )
        spec = family.get_aux_vm_spec(task) if hasattr(family, "get_aux_vm_spec") else None
        out["aux_vm"] = spec is not None
    return out


def intermediate(family, task):
    result = family.intermediate_score(task)
    if result is None:
        return {"score": None, "why": "none", "message": None, "details": None}
    number, why = score_value(result.get("score"))
    return {
        "score": number,
        "why": why,
        "message": result.get("message"),
        "details": result.get("details"),
    }


def run(operation, family, request):
    tasks = family.get_tasks()
    if operation == "describe":
        return describe(family, tasks, request)
    if operation == "install":
        if hasattr(family, "install"):
            family.install()
        return {}
    name = request["task"]
    if name not in tasks:
        raise KeyError("the family has no task %r (it has: %s)" % (name, ", ".join(sorted(tasks))))
    task = tasks[name]
    if operation == "start":
        if hasattr(family, "start"):
            family.start(task)
        instructions = family.get_instructions(task)
        if request.get("scoring_instructions"):
            instructions = instructions.rstrip() + "\n\n" + request["scoring_instructions"].strip()
        with open("/home/agent/instructions.txt", "w") as out:
            out.write(instructions + "\n")
        return {"instructions": instructions}
    if operation == "intermediate_score":
        return intermediate(family, task)
    if operation == "score":
        number, why = score_value(family.score(task, request.get("submission") or ""))
        return {"score": number, "why": why, "message": None, "details": None}
    if operation == "final":
        # The last intermediate score joins the log, then the family's own
        # aggregate over all of it is the final score.
        last = intermediate(family, task)
        log = [logged(e) for e in request.get("score_log", [])]
        log.append(logged(dict(last, scoredAt=request.get("now"), elapsedTime=request.get("elapsed_ms"))))
        number, why = score_value(family.aggregate_scores(task, log))
        return {
            "score": number,
            "why": why,
            "message": last.get("message"),
            "details": {"last_intermediate": last, "aggregate": number},
        }
    if operation == "teardown":
        if hasattr(family, "teardown"):
            family.teardown(task)
        return {}
    raise ValueError("unknown operation " + operation)


def main():
    operation, family_dir, family_name = sys.argv[1:4]
    request = json.loads(sys.stdin.read() or "{}")
    separator = request.pop("separator")
    step = "reading the request"
    try:
        # Only what the family declared it needs, as the standard's driver gives it.
        os.environ.update(request.get("env", {}))
        os.chdir(family_dir)
        sys.path.insert(0, family_dir)
        step = "importing " + family_name
        family = importlib.import_module(family_name).TaskFamily
        step = operation
        result = run(operation, family, request)
        code = 0
    except BaseException:  # noqa: BLE001 - a family may raise anything, SystemExit included
        result = {"error": {"step": step, "traceback": traceback.format_exc()}}
        code = 2
    sys.stdout.flush()
    print("\n" + separator)
    print(json.dumps(finite(result), allow_nan=False))
    print(separator, flush=True)
    sys.exit(code)


if __name__ == "__main__":
    main()
