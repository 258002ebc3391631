"""Official scorer for optimize-llm-foundry (hidden from the participant).

1. Checks that the provided files (env.sh, train_data.jsonl, base_model/)
   are the ones the preparation made.
2. Removes the workspace's outputs (trained_model/, ftout/,
   finetuning_tokens/) and runs `bash finetune.sh` there, timed (wall
   seconds; OPTIMIZE_LLM_FOUNDRY_RUNS times, each checked as in 3, and the
   fastest is the raw score: noise only ever adds time), with a clean environment: the venv first on PATH and none
   of rebench's variables (REBENCH_PREPARED, the hidden folder, least of all);
   in an isolated session inside the session's jail (REBENCH_JAIL), where
   the hidden files do not exist at all.
3. Loads trained_model/ without running any of its code (torch.load with
   weights_only=True, or safetensors) and requires the L1 distance
   sum |w - w_ref| to the hidden reference weights (what the starting
   finetune.sh computes) to be at most the preparation's tolerance.
4. The config probe: runs finetune.sh again, untimed, on a copy of the
   workspace (in a .olf-probe-* folder inside it, reachable from the jail) whose finetune.yaml is a hidden variant of the original one
   (other seed, learning rate, duration, batch size, ...), and requires its
   trained_model/ to be within the same tolerance of the reference weights
   for that variant: a script that ignores the config's options fails here.

Protocol: the LAST stdout line is one JSON object
{"raw": seconds | null, "message": {...}, "details": {...}}; exit 0 whenever
the outcome is known (invalid attempts included).

Settings (environment variables; the profiles set them):
  OPTIMIZE_LLM_FOUNDRY_RUNS           timed runs (default 1; the message shows
                                      each and their spread when more)
  OPTIMIZE_LLM_FOUNDRY_RUN_TIMEOUT    seconds for each timed run (default 1800)
  OPTIMIZE_LLM_FOUNDRY_PROBE_TIMEOUT  seconds for the probe run (default 1800)
  OPTIMIZE_LLM_FOUNDRY_PROBE          "0" skips the probe (default "1")
The workspace is argv[1], else $REBENCH_WORKSPACE, else the cwd.
"""

import hashlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import traceback
from time import perf_counter

sys.dont_write_bytecode = True

OUTPUTS = ("trained_model", "ftout", "finetuning_tokens")
SESSION_VARS = (
    "PATH", "VIRTUAL_ENV", "HOME", "LANG", "LC_ALL", "USER", "LOGNAME", "TMPDIR", "TERM",
    "CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH",
)
HERE = os.path.dirname(os.path.abspath(__file__))


class Invalid(Exception):
    """An attempt that gets no score; the message is shown to the participant."""


def env_number(name, default):
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        return float(text)
    except ValueError:
        raise Invalid(f"bad scorer settings: {name} must be a number, got {text!r}")


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def import_weights():
    spec = importlib.util.spec_from_file_location("olf_weights", os.path.join(HERE, "weights.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check_provided(workspace, info):
    for rel, digest in sorted(info["provided_sha256"].items()):
        path = os.path.join(workspace, rel)
        if not os.path.isfile(path):
            raise Invalid(f"protected file missing: {rel} (the provided files must stay in the workspace)")
        if sha256(path) != digest:
            raise Invalid(f"protected file changed: {rel} (the provided data, model and env.sh must stay as they are)")


def clean_env():
    """finetune.sh's environment: what a session shell has, nothing of rebench's."""
    env = {k: os.environ[k] for k in SESSION_VARS if k in os.environ}
    env.setdefault("PATH", "/usr/bin:/bin")
    return env


def tail(text, lines=15, chars=2500):
    text = "\n".join(text.rstrip().splitlines()[-lines:])
    return text[-chars:]


def finetune_argv(folder):
    """`bash finetune.sh` in `folder`; in an isolated session inside the
    session's jail (REBENCH_JAIL, see rebench's docs/scorer-protocol.md),
    where none of the hidden files (reference weights, probe config) exist."""
    jail = os.environ.get("REBENCH_JAIL")
    if not jail:
        return ["bash", "finetune.sh"]
    return json.loads(jail) + ["bash", "-c", 'cd "$1" && exec bash finetune.sh', "bash", folder]


def run_finetune(folder, timeout, what):
    """Runs `bash finetune.sh` in `folder`: (wall seconds, output)."""
    if not os.path.isfile(os.path.join(folder, "finetune.sh")):
        raise Invalid("no finetune.sh in the workspace")
    for name in OUTPUTS:
        path = os.path.join(folder, name)
        if os.path.islink(path) or os.path.isfile(path):
            os.remove(path)
        elif os.path.isdir(path):
            shutil.rmtree(path)
    log_path = os.path.join(tempfile.gettempdir(), f"olf-{os.getpid()}-{what}.log")
    with open(log_path, "w+b") as log:
        started = perf_counter()
        proc = subprocess.Popen(
            finetune_argv(folder),
            cwd=folder,
            env=clean_env(),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            code = None
        seconds = perf_counter() - started
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # whatever it left running
        except ProcessLookupError:
            pass
        proc.wait()
        log.seek(0)
        output = log.read().decode("utf-8", errors="replace")
    os.remove(log_path)
    if code is None:
        raise Invalid(f"{what}: finetune.sh ran past the limit of {timeout:.0f} s and was stopped")
    if code != 0:
        raise Invalid(f"{what}: finetune.sh failed (exit {code}); its last output:\n{tail(output)}")
    return seconds, output


def distance(torch, weights, folder, reference_dir, what):
    try:
        state = weights.load_folder(torch, os.path.join(folder, "trained_model"))
    except weights.WeightsError as e:
        raise Invalid(f"{what}: finetune.sh left no usable trained_model/: {e}")
    reference = weights.load_folder(torch, reference_dir)
    try:
        return weights.l1_distance(torch, state, reference)
    except weights.WeightsError as e:
        raise Invalid(f"{what}: trained_model/: {e}")


PROBE_PREFIX = ".olf-probe-"


def copy_for_probe(workspace, dest):
    def ignore(folder, names):
        if os.path.abspath(folder) == os.path.abspath(workspace):
            return [n for n in names if n in OUTPUTS or n == "__pycache__" or n.startswith(PROBE_PREFIX)]
        return [n for n in names if n == "__pycache__"]

    shutil.copytree(workspace, dest, symlinks=True, ignore=ignore)


def score(workspace, details):
    prepared = os.environ.pop("REBENCH_PREPARED", "")
    if not prepared:
        raise RuntimeError("REBENCH_PREPARED is not set; the scorer needs the preparation folder")
    try:
        with open(os.path.join(prepared, "info.json")) as f:
            info = json.load(f)
    except (OSError, ValueError) as e:
        raise RuntimeError(f"cannot read {prepared}/info.json ({e}); is the environment prepared?")
    try:
        import torch
    except ImportError as e:
        raise Invalid(f"torch is not importable by {sys.executable} ({e}); is the environment prepared?")
    weights = import_weights()
    tolerance = float(info["tolerance_l1"])
    details.update(scale=info.get("scale"), tolerance_l1=tolerance)

    check_provided(workspace, info)
    runs = int(env_number("OPTIMIZE_LLM_FOUNDRY_RUNS", 1))
    if runs < 1:
        raise Invalid("bad scorer settings: OPTIMIZE_LLM_FOUNDRY_RUNS must be at least 1")
    # Every timed run is checked; noise only ever adds time, so the fastest
    # run is the score.
    times, l1s = [], []
    for run in range(runs):
        what = "timed run" if runs == 1 else f"timed run {run + 1} of {runs}"
        took, output = run_finetune(workspace, env_number("OPTIMIZE_LLM_FOUNDRY_RUN_TIMEOUT", 1800), what)
        times.append(took)
        details.update(times_s=times, output_tail=tail(output, 40, 6000))
        l1 = distance(torch, weights, workspace, os.path.join(prepared, "reference", "main"), what)
        l1s.append(l1)
        details["l1s"] = l1s
        if l1 > tolerance:
            which = f"{what}: " if runs > 1 else ""
            raise Invalid(
                f"{which}trained weights differ from the reference: L1 {l1:.4g} > tolerance {tolerance:g} "
                "(finetune.sh must compute what the starting one computes)"
            )
    seconds, l1 = min(times), max(l1s)
    details.update(seconds=seconds, l1=l1)

    probe_l1 = None
    if os.environ.get("OPTIMIZE_LLM_FOUNDRY_PROBE", "1").strip() != "0":
        # Inside the workspace, so that a jailed finetune.sh can reach it;
        # a copy left by a killed run goes first.
        for name in os.listdir(workspace):
            if name.startswith(PROBE_PREFIX):
                shutil.rmtree(os.path.join(workspace, name), ignore_errors=True)
        with tempfile.TemporaryDirectory(prefix=PROBE_PREFIX, dir=workspace) as tmp:
            copy = os.path.join(tmp, "workspace")
            copy_for_probe(workspace, copy)
            shutil.copyfile(os.path.join(prepared, "probe.yaml"), os.path.join(copy, "finetune.yaml"))
            probe_seconds, _ = run_finetune(
                copy, env_number("OPTIMIZE_LLM_FOUNDRY_PROBE_TIMEOUT", 1800), "config probe (a variant of finetune.yaml)"
            )
            probe_l1 = distance(torch, weights, copy, os.path.join(prepared, "reference", "probe"), "config probe")
        details.update(probe_seconds=probe_seconds, probe_l1=probe_l1)
        if probe_l1 > tolerance:
            raise Invalid(
                "config probe: with a variant of finetune.yaml (other seed, learning rate, duration, batch size, "
                f"...) the trained weights differ from the reference's: L1 {probe_l1:.4g} > tolerance {tolerance:g}; "
                "finetune.sh must keep honouring finetune.yaml's options (nothing hard-coded)"
            )
    message = {"seconds": round(seconds, 3), "l1": round(l1, 6), "tolerance_l1": tolerance}
    if runs > 1:
        message.update(runs_s=[round(t, 3) for t in times], spread_s=round(max(times) - min(times), 3))
    if probe_l1 is not None:
        message["probe_l1"] = round(probe_l1, 6)
    return {"raw": seconds, "message": message, "details": details}


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
