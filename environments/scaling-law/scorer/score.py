"""Official scorer for scaling-law (hidden from the participant).

Reads <workspace>/answer.json = {"n_embd": int, "max_iters": int,
"loss_prediction": number} and scores it against the hidden ground-truth
table $REBENCH_PREPARED/ground_truth.json (made by `rebench env prepare`):

  L(answer) = the test loss of a run with the answer's n_embd and max_iters,
              interpolated from the table (see `answer_loss`)
  L_opt     = the best loss on the table's grid at exactly the target budget
  raw       = 1 - [(L(answer) - L_opt) + |loss_prediction - L(answer)|]

An answer over 1.1x the target FLOPs, or a missing or malformed answer.json,
is invalid (raw null) with a message that says why. Only the standard
library is used; nothing is trained here, so scoring takes well under a second.

Only answer.json is read, the one file the instructions name. (The hidden
reference solution keeps one answer per profile, answer.<profile>.json;
calibration lays the profile's one over answer.json, see
docs/environment.md.)

Protocol: the LAST stdout line is one JSON object
{"raw": number | null, "message": {...}, "details": {...}}; exit 0 whenever
the outcome is known. The workspace is argv[1], else $REBENCH_WORKSPACE,
else the cwd.
"""

import json
import math
import os
import sys

TABLE_FORMAT = 1
KEYS = ("n_embd", "max_iters", "loss_prediction")


class Invalid(Exception):
    """An answer that gets no score; the message says why."""


def load_table():
    prepared = os.environ.get("REBENCH_PREPARED")
    if not prepared:
        raise RuntimeError("REBENCH_PREPARED is not set: is the environment prepared?")
    path = os.path.join(prepared, "ground_truth.json")
    with open(path) as f:
        table = json.load(f)
    if table.get("format") != TABLE_FORMAT:
        raise RuntimeError(f"{path} has format {table.get('format')}, expected {TABLE_FORMAT}")
    return table


def flops(table, n_embd, max_iters):
    """6 * params * tokens, exactly as the workspace's train.py counts them."""
    f = table["flops"]
    n_layer, vocab, block = f["n_layer"], f["vocab_size"], f["block_size"]
    params = 12 * n_layer * n_embd**2 + (2 * n_layer + 1 + 2 * vocab + block) * n_embd
    return 6 * params * block * f["batch_size"] * max_iters


def whole_number(name, value):
    """An int, or a float with an integral value (JSON writers differ)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Invalid(f"{name} must be an integer, got {json.dumps(value)}")
    if isinstance(value, float):
        if not math.isfinite(value) or value != int(value):
            raise Invalid(f"{name} must be an integer, got {value}")
        value = int(value)
    return value


def read_answer(workspace):
    path = os.path.join(workspace, "answer.json")
    if not os.path.isfile(path):
        raise Invalid(
            "answer.json not found in the workspace; write "
            '{"n_embd": ..., "max_iters": ..., "loss_prediction": ...}'
        )
    name = os.path.basename(path)
    try:
        with open(path, encoding="utf-8") as f:
            answer = json.load(f)
    except (ValueError, UnicodeDecodeError) as e:
        raise Invalid(f"{name} is not valid JSON: {e}")
    if not isinstance(answer, dict):
        raise Invalid(f"{name} must hold a JSON object with {', '.join(KEYS)}")
    missing = [k for k in KEYS if k not in answer]
    if missing:
        raise Invalid(f"{name} lacks {', '.join(missing)} (it needs {', '.join(KEYS)})")
    prediction = answer["loss_prediction"]
    if isinstance(prediction, bool) or not isinstance(prediction, (int, float)) or not math.isfinite(prediction):
        raise Invalid(f"loss_prediction must be a finite number, got {json.dumps(prediction)}")
    return name, whole_number("n_embd", answer["n_embd"]), whole_number("max_iters", answer["max_iters"]), float(prediction)


def loss_on_curve(points, log_fraction):
    """Loss of one grid run at a fraction of the target budget: piecewise
    linear in log(fraction) between its evaluations, clamped at both ends."""
    xs = [math.log(p["fraction"]) for p in points]
    ys = [p["loss"] for p in points]
    if log_fraction <= xs[0]:
        return ys[0]
    for x0, y0, x1, y1 in zip(xs, ys, xs[1:], ys[1:]):
        if log_fraction <= x1:
            return y1 if x1 <= x0 else y0 + (y1 - y0) * (log_fraction - x0) / (x1 - x0)
    return ys[-1]


def answer_loss(table, n_embd, fraction):
    """L(answer): at the answer's fraction of the target FLOPs, each grid run's
    loss, then linear in log(n_embd) between the two grid sizes around the
    answer's (clamped to the grid's smallest and largest n_embd)."""
    runs = sorted(table["runs"], key=lambda r: r["n_embd"])
    lf = math.log(fraction)
    notes = []
    if fraction < runs[0]["points"][0]["fraction"]:
        notes.append("fraction below the table's first evaluation: clamped")
    if n_embd <= runs[0]["n_embd"]:
        if n_embd < runs[0]["n_embd"]:
            notes.append(f"n_embd below the grid ({runs[0]['n_embd']}): clamped")
        return loss_on_curve(runs[0]["points"], lf), notes
    if n_embd >= runs[-1]["n_embd"]:
        if n_embd > runs[-1]["n_embd"]:
            notes.append(f"n_embd above the grid ({runs[-1]['n_embd']}): clamped")
        return loss_on_curve(runs[-1]["points"], lf), notes
    for low, high in zip(runs, runs[1:]):
        if n_embd <= high["n_embd"]:
            t = (math.log(n_embd) - math.log(low["n_embd"])) / (math.log(high["n_embd"]) - math.log(low["n_embd"]))
            a = loss_on_curve(low["points"], lf)
            b = loss_on_curve(high["points"], lf)
            return a + t * (b - a), notes
    raise AssertionError("unreachable")


def score(workspace):
    table = load_table()
    name, n_embd, max_iters, prediction = read_answer(workspace)
    head_dim = table["head_dim"]
    if n_embd < head_dim or n_embd % head_dim:
        raise Invalid(f"n_embd must be a positive multiple of {head_dim} (the head size), got {n_embd}")
    if max_iters < 1:
        raise Invalid(f"max_iters must be at least 1, got {max_iters}")
    target = table["target_flops"]
    used = flops(table, n_embd, max_iters)
    fraction = used / target
    if fraction > table["max_fraction"] * (1 + 1e-12):
        raise Invalid(
            f"n_embd={n_embd}, max_iters={max_iters} uses {used:.4g} FLOPs, {fraction:.3f}x the "
            f"target budget of {target:.4g}; at most {table['max_fraction']}x is allowed"
        )
    loss, notes = answer_loss(table, n_embd, fraction)
    best = min(table["runs"], key=lambda r: loss_on_curve(r["points"], 0.0))
    optimal = loss_on_curve(best["points"], 0.0)
    gap, error = loss - optimal, abs(prediction - loss)
    raw = 1.0 - (gap + error)
    message = {
        "n_embd": n_embd,
        "max_iters": max_iters,
        "loss_prediction": prediction,
        "flops": used,
        "fraction_of_budget": round(fraction, 4),
    }
    details = {
        "answer_file": name,
        "answer_loss": loss,
        "optimal_loss": optimal,
        "optimal_n_embd_on_grid": best["n_embd"],
        "loss_gap": gap,
        "prediction_error": error,
        "notes": notes,
    }
    return raw, message, details


def main():
    workspace = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("REBENCH_WORKSPACE") or os.getcwd()
    try:
        raw, message, details = score(workspace)
        result = {"raw": raw, "message": message, "details": details}
    except Invalid as e:
        result = {"raw": None, "message": {"error": str(e)}, "details": {}}
    except (OSError, ValueError, KeyError, RuntimeError) as e:
        # The scorer's own data is missing or broken: not the participant's fault.
        result = {"raw": None, "message": {"error": f"scorer problem: {e}"}, "details": {"exception": repr(e)}}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
