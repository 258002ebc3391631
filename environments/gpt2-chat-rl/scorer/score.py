"""Official scorer for gpt2-chat-rl (hidden from the participant).

Loads <workspace>/final_model.pth with torch.load(weights_only=True) into
the environment's own, unchanged model class (its pristine workspace/model.py,
not the participant's copy) with the base model's exact config, answers
every held-out prompt in $REBENCH_PREPARED/heldout.json greedily with the
pristine workspace/chat.py and tokenizer, and has a judge compare each
answer with both fixed baselines' answers (judge.win_rate: both orders, so
1, 0.75, 0.5, 0.25 or 0 per pair; identical answers tie without a call).
raw = the mean win rate over prompts and both baselines (identity transform).
No participant code runs.

Protocol: the LAST stdout line is one JSON object
{"raw": win rate | null, "message": {...}, "details": {...}}; exit 0
whenever the outcome is known (invalid submissions included).

Settings (environment variables; the profiles set them):
  GPT2_CHAT_RL_DEVICE           "cuda" (default) or "cpu"
  GPT2_CHAT_RL_THREADS          torch CPU threads (default: torch's choice)
  GPT2_CHAT_RL_JUDGE            "rules" (smoke: judge.RulesJudge) or "endpoint"
  GPT2_CHAT_RL_MAX_JUDGE_CALLS  the most judge calls (HTTP requests, retries
                                included) one scoring run may make. A run
                                whose answers need more, or that reaches the
                                limit while judging, is INVALID (no score),
                                with a message naming the limit.
  endpoint judge, from the rebench server's environment (the operator's):
  REBENCH_JUDGE_URL             OpenAI-compatible base URL ending in /v1
  REBENCH_JUDGE_KEY             its API key (never shown to the participant)
  REBENCH_JUDGE_MODEL           the endpoint's model name (else
                                GPT2_CHAT_RL_JUDGE_MODEL from the profile)
The workspace is argv[1], else $REBENCH_WORKSPACE, else the cwd.
"""

import importlib.util
import json
import math
import os
import sys
import time
import traceback
import zipfile

sys.dont_write_bytecode = True

SUBMISSION = "final_model.pth"
LIMIT_VAR = "GPT2_CHAT_RL_MAX_JUDGE_CALLS"


class Invalid(Exception):
    """An attempt that gets no score; the message is shown to the participant."""


def import_path(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def load_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise RuntimeError(f"cannot read {path} ({e}); is the environment prepared?")


def short_reason(error, limit=240):
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    telling = [line for line in lines if line.startswith("WeightsUnpickler error:")]
    text = (telling or lines or [""])[0]
    if telling:
        text = text.split(". ")[0]
    return text if len(text) <= limit else text[: limit - 1] + "…"


def state_dict_of(torch, blob, expected_config):
    if not isinstance(blob, dict):
        raise Invalid(f"{SUBMISSION} must hold a dict (use model.save_model), got {type(blob).__name__}")
    if "model" in blob and isinstance(blob["model"], dict):
        config = blob.get("config")
        if config is not None and config != expected_config:
            diffs = [
                f"{k} {config.get(k)!r} (expected {v!r})" for k, v in expected_config.items() if config.get(k) != v
            ] + [f"unknown field {k!r}" for k in config if k not in expected_config]
            raise Invalid(f"architecture changed: config differs from the base model's: {', '.join(diffs)}")
        blob = blob["model"]
    for key, value in blob.items():
        if not isinstance(value, torch.Tensor):
            raise Invalid(f"{SUBMISSION}: entry {key!r} is a {type(value).__name__}, not a tensor")
    return blob


def check_state(torch, state, model):
    expected = model.state_dict()
    missing = [k for k in expected if k not in state]
    unexpected = [k for k in state if k not in expected]
    if missing or unexpected:
        parts = []
        if missing:
            parts.append(f"missing {', '.join(missing[:5])}" + (f" and {len(missing) - 5} more" if len(missing) > 5 else ""))
        if unexpected:
            parts.append(
                f"unexpected {', '.join(unexpected[:5])}" + (f" and {len(unexpected) - 5} more" if len(unexpected) > 5 else "")
            )
        raise Invalid(f"parameter names do not match the model class: {'; '.join(parts)}")
    for key, want in expected.items():
        got = state[key]
        if tuple(got.shape) != tuple(want.shape):
            raise Invalid(f"shape mismatch for {key}: got {tuple(got.shape)}, expected {tuple(want.shape)}")
        if not got.is_floating_point():
            raise Invalid(f"{key} has dtype {got.dtype}, expected a floating-point tensor")
        if not bool(torch.isfinite(got).all()):
            raise Invalid(f"{key} contains NaN or infinite values")


def make_judge(judge_mod, kind, prepared, max_calls):
    if kind == "rules":
        return judge_mod.RulesJudge(load_json(os.path.join(prepared, "workspace", "topics.json")), max_calls=max_calls)
    if kind == "endpoint":
        url = os.environ.get("REBENCH_JUDGE_URL", "").strip()
        if not url:
            raise Invalid(
                "the judge endpoint is not configured: the operator must set REBENCH_JUDGE_URL "
                "(and REBENCH_JUDGE_KEY, REBENCH_JUDGE_MODEL) in the rebench server's environment"
            )
        model = os.environ.get("REBENCH_JUDGE_MODEL", "").strip() or os.environ.get("GPT2_CHAT_RL_JUDGE_MODEL", "")
        prompts = import_path("gpt2_chat_rl_judge_prompts", os.path.join(os.path.dirname(os.path.abspath(__file__)), "judge_prompts.py"))
        return judge_mod.EndpointJudge(
            url, os.environ.get("REBENCH_JUDGE_KEY", ""), model, template=prompts.TEMPLATE, system=prompts.SYSTEM, max_calls=max_calls
        )
    raise Invalid(f"bad scorer settings: GPT2_CHAT_RL_JUDGE must be rules or endpoint, got {kind!r}")


def score(workspace, details):
    prepared = os.environ.get("REBENCH_PREPARED", "")
    env_dir = os.environ.get("REBENCH_ENV_DIR") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if not prepared:
        raise RuntimeError("REBENCH_PREPARED is not set; the scorer needs the preparation folder")
    device_name = os.environ.get("GPT2_CHAT_RL_DEVICE", "cuda").strip() or "cuda"
    if device_name not in ("cuda", "cpu"):
        raise Invalid(f"bad scorer settings: GPT2_CHAT_RL_DEVICE must be cuda or cpu, got {device_name!r}")
    kind = os.environ.get("GPT2_CHAT_RL_JUDGE", "endpoint").strip()
    try:
        max_calls = int(os.environ.get(LIMIT_VAR, ""))
    except ValueError:
        raise Invalid(f"bad scorer settings: {LIMIT_VAR} must be a whole number")
    info = load_json(os.path.join(prepared, "info.json"))
    heldout = load_json(os.path.join(prepared, "heldout.json"))
    details.update(scale=info.get("scale"), device=device_name, judge=kind, max_judge_calls=max_calls)

    try:
        import torch
    except ImportError as e:
        raise Invalid(f"torch not importable by {sys.executable} ({e}); is the environment prepared?")
    details["torch"] = torch.__version__
    threads = os.environ.get("GPT2_CHAT_RL_THREADS", "").strip()
    if threads:
        torch.set_num_threads(int(threads))
    if device_name == "cuda" and not torch.cuda.is_available():
        raise Invalid(f"this profile scores on a CUDA GPU, but torch {torch.__version__} sees none")

    path = os.path.join(workspace, SUBMISSION)
    if not os.path.isfile(path):
        raise Invalid(f"no {SUBMISSION} in the workspace: write one (the starting `python3 train.py` does)")
    mod = import_path("gpt2_chat_rl_model", os.path.join(env_dir, "workspace", "model.py"))
    chat = import_path("gpt2_chat_rl_chat", os.path.join(env_dir, "workspace", "chat.py"))
    judge_mod = import_path("gpt2_chat_rl_judge", os.path.join(env_dir, "workspace", "judge.py"))
    expected_config = info["config"]
    model = mod.GPT(mod.GPTConfig(**expected_config))
    try:
        blob = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:
        hint = "" if zipfile.is_zipfile(path) else " (it is not a file written by torch.save)"
        raise Invalid(
            f"could not load {SUBMISSION} with torch.load(weights_only=True): {type(e).__name__}: {short_reason(e)}{hint}"
        )
    state = state_dict_of(torch, blob, expected_config)
    check_state(torch, state, model)
    model.load_state_dict({k: v.float() for k, v in state.items()}, strict=True)
    model.eval().to(device_name)

    tok = chat.load_tokenizer(os.path.join(prepared, "workspace", "tokenizer.json"))
    prompts = [row["prompt"] for row in heldout]
    started = time.time()
    answers = chat.respond(model, tok, prompts)
    details["generate_s"] = round(time.time() - started, 2)
    baselines = sorted(info["baselines"])
    needed = 2 * sum(1 for row, a in zip(heldout, answers) for b in baselines if a != row[b])
    details["judge_calls_needed"] = needed
    if needed > max_calls:
        raise Invalid(
            f"judge call limit reached: judging these answers takes {needed} calls, more than the "
            f"limit of {max_calls} per scoring run ({LIMIT_VAR}); nothing was judged"
        )
    judge = make_judge(judge_mod, kind, prepared, max_calls)
    per_baseline = {b: [] for b in baselines}
    outcomes = []
    started = time.time()
    try:
        for row, answer in zip(heldout, answers):
            entry = {"prompt": row["prompt"], "answer": answer}
            for b in baselines:
                w = judge_mod.win_rate(judge, row["prompt"], answer, row[b])
                per_baseline[b].append(w)
                entry[b] = w
            outcomes.append(entry)
    except judge_mod.JudgeLimitReached:
        details.update(judge_calls=judge.calls, outcomes=outcomes)
        raise Invalid(
            f"judge call limit reached: {max_calls} calls per scoring run ({LIMIT_VAR}) used up after "
            f"{len(outcomes)} of {len(heldout)} prompts (judge retries count too)"
        )
    except judge_mod.JudgeError as e:
        details.update(judge_calls=judge.calls, outcomes=outcomes)
        raise Invalid(f"the judge failed, so this run has no score: {e}")
    details["judge_s"] = round(time.time() - started, 2)
    rates = {b: sum(v) / len(v) for b, v in per_baseline.items()}
    raw = sum(rates.values()) / len(rates)
    if not math.isfinite(raw):
        raise Invalid(f"win rate is not finite ({raw})")
    details.update(judge_calls=judge.calls, unparsed_verdicts=getattr(judge, "unparsed", 0), outcomes=outcomes)
    message = {"win_rate": round(raw, 4)}
    message.update({f"vs_{b.replace('-', '_')}": round(r, 4) for b, r in rates.items()})
    message.update(prompts=len(heldout), judge_calls=judge.calls, max_judge_calls=max_calls)
    return {"raw": raw, "message": message, "details": details}


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
        result = {"raw": None, "message": {"error": str(e)}, "details": details}
    except Exception as e:
        details["traceback"] = traceback.format_exc()
        result = {"raw": None, "message": {"error": f"scorer error: {type(e).__name__}: {e}"}, "details": details}
    print(json.dumps(result), flush=True)
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
