"""Official scorer for restricted-mlm (hidden from the participant).

Imports <workspace>/model.py, calls get_trained_model() (training there is
allowed, within RESTRICTED_MLM_TRAIN_LIMIT seconds), then runs the model's
forward pass on fixed held-out sequences with round(mask_fraction * seq_len)
positions per sequence replaced by the mask id, every forward inside the
operation tracer of rules.py (the environment's own copy). Any disallowed
operation makes the attempt invalid, naming it. The raw score is the mean
cross-entropy (nats) of the true tokens at the masked positions, computed
here, outside the traced forward, in float32 (plus RESTRICTED_MLM_RAW_OFFSET).

The held-out sequences and masks are the same on every run (fixed seed), so
the metric is deterministic for a deterministic model.

Protocol: the LAST stdout line is one JSON object
{"raw": loss | null, "message": {...}, "details": {...}}; exit 0 whenever the
outcome is known (invalid models included).

Settings (environment variables; the profiles set them):
  RESTRICTED_MLM_CORPUS       "openwebtext" (default) or "stdlib"; must match the preparation
  RESTRICTED_MLM_DEVICE       "cuda" (default) or "cpu"
  RESTRICTED_MLM_THREADS      torch CPU threads (default: torch's choice)
  RESTRICTED_MLM_EVAL_SEQS    held-out sequences scored (default 4096)
  RESTRICTED_MLM_BATCH        sequences per forward call (default 32)
  RESTRICTED_MLM_TRAIN_LIMIT  seconds get_trained_model() may take (default 1200)
  RESTRICTED_MLM_RAW_OFFSET   added to the loss to make `raw` (default 0; unused by the
                              bundled profiles: the smoke profile has its own transform,
                              log-minus:0.25)
The workspace is argv[1], else $REBENCH_WORKSPACE, else the cwd.
"""

import contextlib
import importlib.util
import json
import math
import os
import signal
import sys
import traceback
from time import perf_counter  # bound before participant code can patch `time`

sys.dont_write_bytecode = True  # leave no __pycache__ in the workspace

EVAL_SEED = 20240521  # fixes the masked positions


class Invalid(Exception):
    """An attempt that gets no score; the message is shown to the participant."""


class TrainingTimeout(BaseException):
    """Raised in get_trained_model() at the time limit (BaseException: a bare
    `except Exception` in participant code does not swallow it)."""


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
            "prepared (`rebench env prepare restricted-mlm`) and its venv first on PATH?"
        )
    return torch


def load_module(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # so that `import model` elsewhere finds this one
    spec.loader.exec_module(module)
    return module


def load_heldout(np, corpus):
    """(meta, tokens) of the prepared held-out split."""
    prepared = os.environ.get("REBENCH_PREPARED", "")
    meta_path = os.path.join(prepared, "heldout.json")
    if not prepared or not os.path.isfile(meta_path):
        raise RuntimeError(f"no held-out data in REBENCH_PREPARED={prepared!r}; run `rebench env prepare restricted-mlm`")
    with open(meta_path) as f:
        meta = json.load(f)
    if meta["corpus"] != corpus:
        raise RuntimeError(f"the preparation holds {meta['corpus']} data but this profile scores {corpus}")
    tokens = np.fromfile(os.path.join(prepared, "heldout.bin"), dtype=np.uint16)
    if len(tokens) != meta["tokens"]:
        raise RuntimeError(f"heldout.bin has {len(tokens)} tokens, heldout.json says {meta['tokens']}")
    return meta, tokens


def eval_set(torch, np, meta, tokens, count):
    """(inputs, targets, masked) for `count` evenly spaced held-out windows."""
    length = meta["seq_len"]
    last = len(tokens) - length
    count = min(count, last + 1)
    starts = [round(i * last / max(1, count - 1)) for i in range(count)]
    targets = torch.from_numpy(np.stack([tokens[s : s + length].astype(np.int64) for s in starts]))
    generator = torch.Generator().manual_seed(EVAL_SEED)
    order = torch.rand(count, length, generator=generator).argsort(dim=1)
    masked = torch.zeros(count, length, dtype=torch.bool)
    masked.scatter_(1, order[:, : round(meta["mask_fraction"] * length)], True)
    inputs = targets.masked_fill(masked, meta["mask_id"])
    return inputs, targets, masked


def load_model(workspace, limit_s, details):
    path = os.path.join(workspace, "model.py")
    if not os.path.isfile(path):
        raise Invalid(f"no model.py in {workspace}")
    sys.path.insert(0, workspace)  # model.py imports its neighbours (get_data, train, ...)

    def on_alarm(signum, frame):
        raise TrainingTimeout()

    signal.signal(signal.SIGALRM, on_alarm)
    started = perf_counter()
    try:
        # Participant prints go to stderr so they cannot forge our last line.
        with contextlib.redirect_stdout(sys.stderr):
            signal.alarm(limit_s)
            try:
                module = load_module("model", path)
                get = getattr(module, "get_trained_model", None)
                if not callable(get):
                    raise Invalid("model.py does not define get_trained_model()")
                model = get()
            finally:
                signal.alarm(0)
    except TrainingTimeout:
        raise Invalid(f"get_trained_model() took longer than the {limit_s} s limit")
    except Invalid:
        raise
    except Exception as e:
        raise Invalid(f"get_trained_model() raised {type(e).__name__}: {e}")
    details["train_seconds"] = round(perf_counter() - started, 2)
    return model


def score(workspace, details):
    corpus = os.environ.get("RESTRICTED_MLM_CORPUS", "").strip() or "openwebtext"
    device_name = os.environ.get("RESTRICTED_MLM_DEVICE", "").strip() or "cuda"
    if device_name not in ("cuda", "cpu"):
        raise Invalid(f"bad scorer settings: RESTRICTED_MLM_DEVICE must be cuda or cpu, got {device_name!r}")
    threads = env_int("RESTRICTED_MLM_THREADS", 0, 0)
    sequences = env_int("RESTRICTED_MLM_EVAL_SEQS", 4096, 1)
    batch = env_int("RESTRICTED_MLM_BATCH", 32, 1)
    limit_s = env_int("RESTRICTED_MLM_TRAIN_LIMIT", 1200, 1)
    offset_text = os.environ.get("RESTRICTED_MLM_RAW_OFFSET", "").strip() or "0"
    try:
        offset = float(offset_text)
    except ValueError:
        raise Invalid(f"bad scorer settings: RESTRICTED_MLM_RAW_OFFSET must be a number, got {offset_text!r}")
    details.update(corpus=corpus, device=device_name, batch=batch, train_limit_s=limit_s)

    torch = import_torch()
    import numpy as np
    import torch.nn.functional as F

    details["torch"] = torch.__version__
    if threads:
        torch.set_num_threads(threads)
    if device_name == "cuda" and not torch.cuda.is_available():
        raise Invalid(f"this profile scores on a CUDA GPU, but torch {torch.__version__} sees none")
    device = torch.device(device_name)

    # The environment's own copy of the rules (the workspace's is the same, protected).
    rules = load_module("_restricted_mlm_rules", os.path.join(os.environ["REBENCH_ENV_DIR"], "workspace", "rules.py"))
    rules.self_check()

    meta, tokens = load_heldout(np, corpus)
    inputs, targets, masked = eval_set(torch, np, meta, tokens, sequences)
    del tokens
    os.environ.pop("REBENCH_PREPARED", None)  # the model has no business there
    details.update(sequences=len(inputs), masked_tokens=int(masked.sum()), heldout_sha256=meta["sha256"])

    model = load_model(workspace, limit_s, details)
    if isinstance(model, torch.nn.Module):
        model = model.to(device).eval()
    elif not callable(model):
        raise Invalid(f"get_trained_model() must return a torch.nn.Module or a callable, got {type(model).__name__}")
    rules.self_check()  # still intact after the participant's code ran

    vocab = meta["vocab_size"]
    total, started = 0.0, perf_counter()
    for at in range(0, len(inputs), batch):
        x = inputs[at : at + batch].to(device)
        tracer = rules.ForwardRules()
        try:
            with torch.no_grad(), contextlib.redirect_stdout(sys.stderr), tracer:
                logits = model(x)
        except Exception as e:
            if tracer.violation:
                raise Invalid(tracer.violation)
            raise Invalid(f"the model's forward raised {type(e).__name__}: {e}")
        if tracer.violation:
            raise Invalid(tracer.violation)
        if type(logits) is not torch.Tensor:
            raise Invalid(f"the model must return a torch.Tensor of logits, got {type(logits).__name__}")
        want = (len(x), meta["seq_len"], vocab)
        if tuple(logits.shape) != want or not logits.dtype.is_floating_point:
            raise Invalid(f"the model returned logits {logits.dtype} {tuple(logits.shape)}; expected floating point {want}")
        m = masked[at : at + batch].to(logits.device)
        y = targets[at : at + batch].to(logits.device)
        total += float(F.cross_entropy(logits[m].float(), y[m], reduction="sum"))
        del logits
    loss = total / int(masked.sum())
    details["eval_seconds"] = round(perf_counter() - started, 2)
    if not math.isfinite(loss):
        raise Invalid(f"the masked-token loss is {loss}")
    message = {"loss": round(loss, 5), "masked_tokens": details["masked_tokens"], "corpus": corpus}
    if offset:
        message["raw_is_loss_plus"] = offset
    message["train_seconds"] = details["train_seconds"]
    return {"raw": loss + offset, "message": message, "details": details}


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
        if e.__context__ is not None:  # e.g. the participant's exception
            details["traceback"] = "".join(traceback.format_exception(e.__context__))
        result = {"raw": None, "message": {"error": str(e)}, "details": details}
    except Exception as e:
        details["traceback"] = traceback.format_exc()
        result = {"raw": None, "message": {"error": f"scorer error: {type(e).__name__}: {e}"}, "details": details}
    print(json.dumps(result), flush=True)
    sys.stderr.flush()
    # Skip atexit hooks and lingering threads the model may have started,
    # so nothing can be printed after our result line.
    os._exit(0)


if __name__ == "__main__":
    main()
