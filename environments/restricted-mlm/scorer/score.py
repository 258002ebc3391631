"""Official scorer for restricted-mlm (hidden from the participant).

The participant's code never runs in this process and never sees the
held-out data, this process's stdout or its clock. A worker process (run
through $REBENCH_JAIL, the prefix that starts participant code as a session
process would, inside the session's jail when it is isolated) imports
<workspace>/model.py, calls get_trained_model() (training there is allowed,
within RESTRICTED_MLM_TRAIN_LIMIT seconds, timed and enforced here by
killing the worker), checks one forward pass on a random example batch with
rules.py (an early, friendly error that names the function called) and
captures the forward as a graph of ATen operators (graph.py). The graph and
its tensors come back over the worker's stdout pipe; this scorer checks
every operator against the environment's own rules.py and runs the graph
itself on fixed held-out sequences with round(mask_fraction * seq_len)
positions per sequence replaced by the mask id, inside the operation
tracer. Any disallowed operator makes the attempt invalid, naming it. The
raw score is the mean cross-entropy (nats) of the true tokens at the masked
positions, computed here in float32 (plus RESTRICTED_MLM_RAW_OFFSET).

The held-out sequences and masks are the same on every run (fixed seed), so
the metric is deterministic for a deterministic model.

Protocol: the LAST stdout line is one JSON object
{"raw": loss | null, "message": {...}, "details": {...}}; exit 0 whenever the
outcome is known (invalid models included).

Settings (environment variables; the profiles set them):
  RESTRICTED_MLM_CORPUS         "openwebtext" (default) or "stdlib"; must match the preparation
  RESTRICTED_MLM_DEVICE         "cuda" (default) or "cpu"
  RESTRICTED_MLM_THREADS        torch CPU threads, here and in the worker (default: torch's choice)
  RESTRICTED_MLM_EVAL_SEQS      held-out sequences scored (default 4096)
  RESTRICTED_MLM_BATCH          sequences per forward call (default 32)
  RESTRICTED_MLM_TRAIN_LIMIT    seconds get_trained_model() may take, from the worker's start (default 1200)
  RESTRICTED_MLM_CAPTURE_LIMIT  seconds from then until the graph is here (default 300): the
                                most a worker that claims to be done early can add to training
  RESTRICTED_MLM_MAX_TENSORS_GB the largest graph tensors accepted (default 64)
  RESTRICTED_MLM_RAW_OFFSET     added to the loss to make `raw` (default 0; unused by the
                                bundled profiles: the smoke profile has its own transform,
                                log-minus:0.25)
The workspace is argv[1], else $REBENCH_WORKSPACE, else the cwd.
"""

import importlib.util
import json
import math
import os
import queue
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import traceback
from time import monotonic

sys.dont_write_bytecode = True  # leave no __pycache__ in the workspace

EVAL_SEED = 20240521  # fixes the masked positions
EXAMPLE_SEED = 7  # the random example batch the forward is captured on
ERROR_LIMIT = 1 << 20  # bytes of a worker's error report
GRAPH_LIMIT = 512 << 20  # bytes of a graph's JSON


class Invalid(Exception):
    """An attempt that gets no score; the message is shown to the participant."""

    def __init__(self, message, details=None):
        super().__init__(message)
        self.details = details or {}


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
    sys.modules[name] = module  # graph.py's `import rules` finds this one
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


def mask(torch, targets, meta, generator):
    """(inputs, masked): round(mask_fraction * seq_len) random positions per row set to the mask id."""
    count, length = targets.shape
    order = torch.rand(count, length, generator=generator).argsort(dim=1)
    masked = torch.zeros(count, length, dtype=torch.bool)
    masked.scatter_(1, order[:, : round(meta["mask_fraction"] * length)], True)
    return targets.masked_fill(masked, meta["mask_id"]), masked


def eval_set(torch, np, meta, tokens, count):
    """(inputs, targets, masked) for `count` evenly spaced held-out windows."""
    length = meta["seq_len"]
    last = len(tokens) - length
    count = min(count, last + 1)
    starts = [round(i * last / max(1, count - 1)) for i in range(count)]
    targets = torch.from_numpy(np.stack([tokens[s : s + length].astype(np.int64) for s in starts]))
    inputs, masked = mask(torch, targets, meta, torch.Generator().manual_seed(EVAL_SEED))
    return inputs, targets, masked


# The worker: argv = [workspace, settings JSON]. Runs with python -I (no
# workspace module can shadow torch or json before model.py is imported);
# fd 1 becomes the participant's stderr and the protocol goes to a private
# copy of the original stdout. Messages: a kind byte, an 8-byte length and
# that many bytes: b"T" (get_trained_model() returned), b"G" (the graph's
# JSON), b"W" (its tensors, torch.save'd), or b"E" (a JSON error) and exit.
# Everything it sends is checked here: it is the participant's process.
WORKER = r"""
import importlib.util, io, json, os, struct, sys, traceback
sys.dont_write_bytecode = True
proto = os.fdopen(os.dup(1), "wb", buffering=0)
os.dup2(2, 1)
def send(kind, payload=b""):
    proto.write(kind + struct.pack("<Q", len(payload)))
    view = memoryview(payload)
    while view:
        view = view[proto.write(view):]
def fail(error, exc=None):
    report = {"error": error}
    if exc is not None:
        report["traceback"] = "".join(traceback.format_exception(exc))
    send(b"E", json.dumps(report).encode())
    sys.stderr.flush()
    os._exit(0)
workspace, settings = sys.argv[1], json.loads(sys.argv[2])
# The scorer's variables do not cross REBENCH_JAIL; get_data.ensure() reads
# the corpus from this one (as the instructions say the scorer sets it).
os.environ["RESTRICTED_MLM_CORPUS"] = settings["corpus"]
import torch
if settings["threads"]:
    torch.set_num_threads(settings["threads"])
sys.path.insert(0, workspace)
def load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(workspace, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
rules, graph = load("rules"), load("graph")
if not os.path.isfile(os.path.join(workspace, "model.py")):
    fail(f"no model.py in {workspace}")
try:
    model = load("model")
    get = getattr(model, "get_trained_model", None)
    if not callable(get):
        fail("model.py does not define get_trained_model()")
    model = get()
except Exception as e:
    fail(f"get_trained_model() raised {type(e).__name__}: {e}", e)
send(b"T")
device = torch.device(settings["device"])
if isinstance(model, torch.nn.Module):
    model = model.to(device).eval()
elif not callable(model):
    fail(f"get_trained_model() must return a torch.nn.Module or a callable, got {type(model).__name__}")
generator = torch.Generator().manual_seed(settings["seed"])
shape = (settings["batch"], settings["seq_len"])
example = torch.randint(0, settings["vocab_size"], shape, generator=generator)
example[torch.rand(shape, generator=generator) < settings["mask_fraction"]] = settings["mask_id"]
example = example.to(device)
tracer = rules.ForwardRules()
try:
    with torch.no_grad(), tracer:
        logits = model(example)
except Exception as e:
    fail(tracer.violation or f"the model's forward raised {type(e).__name__}: {e}", e)
if tracer.violation:
    fail(tracer.violation)
want = shape + (settings["vocab_size"],)
if type(logits) is not torch.Tensor:
    fail(f"the model must return a torch.Tensor of logits, got {type(logits).__name__}")
if tuple(logits.shape) != want or not logits.dtype.is_floating_point:
    fail(f"the model returned logits {logits.dtype} {tuple(logits.shape)}; expected floating point {want}")
del logits
try:
    spec, tensors = graph.capture(model, example)
except Exception as e:
    fail(f"the forward could not be captured as a graph of operators ({type(e).__name__}: {e})", e)
send(b"G", json.dumps(spec).encode())
buffer = io.BytesIO()
torch.save(tensors, buffer)
send(b"W", buffer.getbuffer())
sys.stderr.flush()
os._exit(0)
"""


def session_python(prefix):
    """The participant's python: the session's `python3` (from its PATH, the
    environment's venv first) when run through REBENCH_JAIL, which may be a
    container with its own; this one otherwise."""
    return "python3" if prefix else sys.executable


class Worker:
    """The participant's process and a thread that reads its messages:
    small ones into a queue, the tensors straight to a file."""

    def __init__(self, prefix, workspace, settings, folder, tensors_limit):
        # None of rebench's variables (the jail's launcher drops them anyway).
        env = {k: v for k, v in os.environ.items() if not k.startswith("REBENCH_")}
        self.tensors_path = os.path.join(folder, "tensors.pt")
        self.tensors_limit = tensors_limit
        self.messages = queue.Queue()
        self.process = subprocess.Popen(
            prefix + [session_python(prefix), "-I", "-B", "-c", WORKER, workspace, json.dumps(settings)],
            cwd=workspace,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=sys.stderr,
            bufsize=0,
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        pipe = self.process.stdout
        try:
            while True:
                header = read_exactly(pipe, 9)
                kind, length = header[:1], struct.unpack("<Q", header[1:])[0]
                if kind == b"W":
                    if length > self.tensors_limit:
                        raise ProtocolError(f"the graph's tensors are {length / 1e9:.1f} GB, over the {self.tensors_limit / 1e9:.0f} GB limit")
                    with open(self.tensors_path, "wb") as out:
                        copy_exactly(pipe, out, length)
                    self.messages.put((kind, None))
                elif kind in (b"T", b"G", b"E"):
                    if length > (GRAPH_LIMIT if kind == b"G" else ERROR_LIMIT):
                        raise ProtocolError(f"the model's process sent {length} bytes of {kind.decode()}, over the limit")
                    self.messages.put((kind, read_exactly(pipe, length)))
                else:
                    raise ProtocolError("the model's process broke the protocol (did it write to its stdout file descriptor?)")
        except ProtocolError as e:
            self.messages.put((b"!", str(e)))
        except EOFError:
            self.messages.put((b"!", None))
        except OSError as e:
            self.messages.put((b"!", f"reading the model's process failed: {e}"))

    def next(self, deadline, late):
        """The next (kind, payload); Invalid(late) when `deadline` passes first."""
        try:
            kind, payload = self.messages.get(timeout=max(0.0, deadline - monotonic()))
        except queue.Empty:
            self.kill()
            raise Invalid(late)
        if kind == b"!":
            self.kill()
            if payload is None:
                code = self.process.wait()
                raise Invalid(f"the model's process exited ({describe_exit(code)}) before it was done")
            raise Invalid(payload)
        if kind == b"E":
            try:
                report = json.loads(payload)
                error, extra = str(report["error"]), {"traceback": str(report.get("traceback", ""))}
            except (ValueError, KeyError, TypeError):
                error, extra = "the model's process broke the protocol", {}
            self.kill()
            raise Invalid(error[:4000], extra)
        return kind, payload

    def kill(self):
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


class ProtocolError(Exception):
    pass


def read_exactly(pipe, count):
    chunks = []
    while count:
        chunk = pipe.read(min(count, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        count -= len(chunk)
    return b"".join(chunks)


def copy_exactly(pipe, out, count):
    while count:
        chunk = pipe.read(min(count, 1 << 22))
        if not chunk:
            raise EOFError
        out.write(chunk)
        count -= len(chunk)


def describe_exit(code):
    return f"killed by signal {-code}" if code < 0 else f"exit code {code}"


def trained_graph(torch, graph, prefix, workspace, settings, limits, details):
    """The participant's trained forward, as a checked graph.Graph."""
    folder = tempfile.mkdtemp(prefix="restricted-mlm-")
    try:
        started = monotonic()
        worker = Worker(prefix, workspace, settings, folder, limits["tensors"])
        try:
            kind, _ = worker.next(started + limits["train"], f"get_trained_model() took longer than the {limits['train']} s limit")
            if kind != b"T":
                raise Invalid("the model's process broke the protocol")
            trained = monotonic()
            details["train_seconds"] = round(trained - started, 2)
            late = f"capturing the forward took longer than the {limits['capture']} s limit"
            kind, spec_bytes = worker.next(trained + limits["capture"], late)
            if kind != b"G":
                raise Invalid("the model's process broke the protocol")
            kind, _ = worker.next(trained + limits["capture"], late)
            if kind != b"W":
                raise Invalid("the model's process broke the protocol")
            details["capture_seconds"] = round(monotonic() - trained, 2)
        finally:
            worker.kill()
        try:
            spec = json.loads(spec_bytes)
            tensors = torch.load(worker.tensors_path, map_location=settings["device"], weights_only=True)
        except Exception as e:
            raise Invalid(f"the captured forward could not be read ({type(e).__name__}: {e})")
        try:
            return graph.Graph(spec, tensors)
        except graph.GraphError as e:
            raise Invalid(str(e))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def score(workspace, details):
    corpus = os.environ.get("RESTRICTED_MLM_CORPUS", "").strip() or "openwebtext"
    device_name = os.environ.get("RESTRICTED_MLM_DEVICE", "").strip() or "cuda"
    if device_name not in ("cuda", "cpu"):
        raise Invalid(f"bad scorer settings: RESTRICTED_MLM_DEVICE must be cuda or cpu, got {device_name!r}")
    threads = env_int("RESTRICTED_MLM_THREADS", 0, 0)
    sequences = env_int("RESTRICTED_MLM_EVAL_SEQS", 4096, 1)
    batch = env_int("RESTRICTED_MLM_BATCH", 32, 1)
    limits = {
        "train": env_int("RESTRICTED_MLM_TRAIN_LIMIT", 1200, 1),
        "capture": env_int("RESTRICTED_MLM_CAPTURE_LIMIT", 300, 1),
        "tensors": env_int("RESTRICTED_MLM_MAX_TENSORS_GB", 64, 1) * 10**9,
    }
    offset_text = os.environ.get("RESTRICTED_MLM_RAW_OFFSET", "").strip() or "0"
    try:
        offset = float(offset_text)
    except ValueError:
        raise Invalid(f"bad scorer settings: RESTRICTED_MLM_RAW_OFFSET must be a number, got {offset_text!r}")
    details.update(corpus=corpus, device=device_name, batch=batch, train_limit_s=limits["train"])
    if not os.path.isfile(os.path.join(workspace, "model.py")):
        raise Invalid(f"no model.py in {workspace}")

    torch = import_torch()
    import numpy as np
    import torch.nn.functional as F

    details["torch"] = torch.__version__
    if threads:
        torch.set_num_threads(threads)
    if device_name == "cuda" and not torch.cuda.is_available():
        raise Invalid(f"this profile scores on a CUDA GPU, but torch {torch.__version__} sees none")
    device = torch.device(device_name)

    # The environment's own copies (the workspace's are the same, protected).
    own = os.path.join(os.environ["REBENCH_ENV_DIR"], "workspace")
    rules = load_module("rules", os.path.join(own, "rules.py"))
    rules.self_check()
    graph = load_module("graph", os.path.join(own, "graph.py"))

    meta, tokens = load_heldout(np, corpus)
    inputs, targets, masked = eval_set(torch, np, meta, tokens, sequences)
    del tokens
    details.update(sequences=len(inputs), masked_tokens=int(masked.sum()), heldout_sha256=meta["sha256"])

    prefix = json.loads(os.environ["REBENCH_JAIL"]) if os.environ.get("REBENCH_JAIL") else []
    details["runner"] = "REBENCH_JAIL" if prefix else "direct"
    settings = {
        "device": device_name,
        "threads": threads,
        "batch": batch,
        "seed": EXAMPLE_SEED,
        "corpus": corpus,
        **{k: meta[k] for k in ("seq_len", "vocab_size", "mask_id", "mask_fraction")},
    }
    forward = trained_graph(torch, graph, prefix, workspace, settings, limits, details)

    want = (batch, meta["seq_len"], meta["vocab_size"])
    total, started = 0.0, monotonic()
    for at in range(0, len(inputs), batch):
        count = min(batch, len(inputs) - at)
        x = inputs[at : at + batch]
        if count < batch:  # the graph was captured for full batches: pad, then ignore the padding
            x = torch.cat([x, x[:1].expand(batch - count, -1)])
        x = x.clone().to(device)  # its own storage: no view of the other batches
        tracer = rules.ForwardRules()
        try:
            with torch.no_grad(), tracer:
                logits = forward(x)
        except Exception as e:
            if tracer.violation:
                raise Invalid(tracer.violation)
            raise Invalid(f"the model's forward raised {type(e).__name__}: {e}")
        if tracer.violation:
            raise Invalid(tracer.violation)
        if type(logits) is not torch.Tensor:
            raise Invalid(f"the model must return a torch.Tensor of logits, got {type(logits).__name__}")
        if tuple(logits.shape) != want or not logits.dtype.is_floating_point:
            raise Invalid(f"the model returned logits {logits.dtype} {tuple(logits.shape)}; expected floating point {want}")
        logits = logits[:count]
        m = masked[at : at + batch].to(logits.device)
        y = targets[at : at + batch].to(logits.device)
        total += float(F.cross_entropy(logits[m].float(), y[m], reduction="sum"))
        del logits, y
    loss = total / int(masked.sum())
    details["eval_seconds"] = round(monotonic() - started, 2)
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
        details.update(e.details)
        result = {"raw": None, "message": {"error": str(e)}, "details": details}
    except Exception as e:
        details["traceback"] = traceback.format_exc()
        result = {"raw": None, "message": {"error": f"scorer error: {type(e).__name__}: {e}"}, "details": details}
    print(json.dumps(result), flush=True)
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
