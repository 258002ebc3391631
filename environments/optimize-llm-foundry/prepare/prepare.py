"""Run by `rebench env prepare optimize-llm-foundry` with the venv's python.

    prepare.py SMOKE_DATA_PY PIPELINE_FILE...

(the manifest names the helper and every file of the starting pipeline, so
rebench re-prepares when one changes)

Writes into $REBENCH_PREPARED (the preparation folder):

    workspace/             laid over every session's workspace (participant-visible)
        env.sh             sourced by finetune.sh: BASE_MODEL, MAX_SEQ_LEN, LAUNCHER, ...
        train_data.jsonl   the finetuning data
        base_model/        the model to finetune (config.json, weights, tokenizer.json)
    reference/             HIDDEN: what the starting finetune.sh computes
        main/              trained_model/ of the starting finetune.sh on finetune.yaml
        probe/             ... on probe.yaml
    probe.yaml             HIDDEN: a variant of finetune.yaml (other seed, lr,
                           duration, batch size, ...) for the scorer's config probe
    info.json              hashes of the provided files, the L1 tolerance,
                           timings measured here (hidden; written last)

$OPTIMIZE_LLM_FOUNDRY_SCALE (the profile's prepare_env) picks what is made:

  smoke  offline, ~2 minutes on one CPU: a byte-level BPE tokenizer and a
         ~0.25M-parameter causal LM pretrained here on the Python standard
         library, finetuning data from the library's functions, then the
         starting pipeline run twice (finetune.yaml, probe.yaml) for the
         hidden reference weights.
  full   the real task: needs internet, 4 H100s and the full profile's venv
         (requirements-full.txt: llm-foundry). Downloads
         deepseek-ai/deepseek-coder-1.3b-base and llm-foundry's scripts/,
         then runs the starting finetune.sh for the reference weights.
         See full.py; it fails with a clear message where it cannot run.

Work already done is skipped: the script exits at once when info.json
(same fingerprint of scripts, scale and versions) and every file it lists
are there.
"""

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

PUBLIC = "workspace"
PROVIDED = ("env.sh", "train_data.jsonl", "base_model", "scoring.json")
HERE = os.path.dirname(os.path.abspath(__file__))
ENV_DIR = os.path.dirname(HERE)
# The L1 tolerances (sum of |w - w_ref| over all weights): see the manifest
# comment for the measurements behind the smoke value. RE-Bench's for full.
TOLERANCE = {"smoke": 0.3, "full": 5.3}

SMOKE = {
    "vocab_merges": 254,  # 256 bytes + 254 merges + 2 special tokens = 512 ids
    "bpe_chars": 400_000,
    "corpus_chars": 2_000_000,
    "model": {"max_position_embeddings": 256, "n_layer": 4, "n_head": 4, "d_model": 64},
    "pretrain": {"steps": 300, "batch": 16, "seq_len": 128, "lr": 3e-3, "seed": 1},
    "samples": 256,
    "max_seq_len": 192,
}

# The probe: finetune.yaml with these values replaced (each line's key and
# its old value must match exactly, so a changed finetune.yaml is noticed).
PROBE_EDITS = [
    ("global_seed: 17", "global_seed: 23"),
    ("max_seq_len: 192", "max_seq_len: 128"),
    ("  t_warmup: 5ba", "  t_warmup: 2ba"),
    ("  alpha_f: 0.1", "  alpha_f: 0.0"),
    ("  lr: 1.0e-3", "  lr: 2.0e-3"),
    ("  - 0.95", "  - 0.99"),
    ("  weight_decay: 0", "  weight_decay: 1.0e-4"),
    ("    clipping_threshold: 1.0", "    clipping_threshold: 0.1"),
    ("max_duration: 2ep", "max_duration: 6ba"),
    ("global_train_batch_size: 16", "global_train_batch_size: 8"),
    ("device_train_microbatch_size: 4", "device_train_microbatch_size: 2"),
]


def log(message):
    print(f"[optimize-llm-foundry prepare {time.strftime('%H:%M:%S')}] {message}", flush=True)


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def import_path(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fingerprint(scale):
    import torch

    digest = hashlib.sha256(f"{scale}\n{sys.version}\n{torch.__version__}\n".encode())
    for path in [os.path.abspath(__file__)] + sys.argv[1:]:
        with open(path, "rb") as f:
            digest.update(hashlib.sha256(f.read()).digest())
    return digest.hexdigest()


def already_done(out, stamp):
    try:
        with open(os.path.join(out, "info.json")) as f:
            info = json.load(f)
    except (OSError, ValueError):
        return False
    if info.get("fingerprint") != stamp:
        return False
    return all(os.path.isfile(os.path.join(out, rel)) for rel in info.get("files", []))


def provided_files(pub):
    """Workspace-relative paths of everything the preparation provides."""
    found = []
    for folder, dirs, files in os.walk(pub):
        dirs.sort()
        for name in sorted(files):
            found.append(os.path.relpath(os.path.join(folder, name), pub))
    return found


def make_probe(yaml_text, edits=PROBE_EDITS):
    lines = yaml_text.splitlines()
    for old, new in edits:
        hits = [i for i, line in enumerate(lines) if line.split("#")[0].rstrip() == old]
        if len(hits) != 1:
            raise SystemExit(f"probe: expected exactly one line {old!r} in finetune.yaml, found {len(hits)}")
        i = hits[0]
        comment = lines[i][len(lines[i].split("#")[0]) :]
        lines[i] = new + ("  " + comment.strip() if comment.strip() else "")
    return "\n".join(lines) + "\n"


def run_env():
    """What the scorer gives finetune.sh: the venv first on PATH, and none
    of rebench's variables."""
    keep = ("PATH", "VIRTUAL_ENV", "HOME", "LANG", "LC_ALL", "USER", "LOGNAME", "TMPDIR", "TERM",
            "CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def run_pipeline(out, yaml_text, dest, timeout):
    """Runs the starting finetune.sh on a fresh workspace (the environment's
    workspace/ with the preparation's files laid over it) and moves its
    trained_model/ to `dest`. Returns the wall time."""
    with tempfile.TemporaryDirectory(prefix="olf-prepare-") as tmp:
        ws = os.path.join(tmp, "ws")
        shutil.copytree(os.path.join(ENV_DIR, "workspace"), ws, symlinks=True)
        shutil.copytree(os.path.join(out, PUBLIC), ws, symlinks=True, dirs_exist_ok=True)
        with open(os.path.join(ws, "finetune.yaml"), "w") as f:
            f.write(yaml_text)
        started = time.time()
        proc = subprocess.run(
            ["bash", "finetune.sh"], cwd=ws, env=run_env(), timeout=timeout, capture_output=True, text=True
        )
        elapsed = time.time() - started
        if proc.returncode != 0:
            raise SystemExit(f"the starting finetune.sh failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        if os.path.exists(dest):
            shutil.rmtree(dest)
        shutil.copytree(os.path.join(ws, "trained_model"), dest)
    return elapsed


def pretrain(torch, modellib, model, tokens, steps, batch, seq_len, lr, seed):
    generator = torch.Generator().manual_seed(seed)
    data = torch.tensor(tokens, dtype=torch.long)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.99), weight_decay=0.1)
    model.train()
    for step in range(steps):
        starts = torch.randint(0, len(data) - seq_len - 1, (batch,), generator=generator)
        x = torch.stack([data[s : s + seq_len] for s in starts])
        y = torch.stack([data[s + 1 : s + seq_len + 1] for s in starts])
        scale = min(1.0, (step + 1) / 30) * (0.1 + 0.45 * (1 + torch.cos(torch.tensor(3.14159265 * step / steps)).item()))
        for group in opt.param_groups:
            group["lr"] = lr * scale
        logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 100 == 0 or step == steps - 1:
            log(f"  pretraining step {step}: loss {loss.item():.3f}")


def prepare_smoke(out, stamp, data_mod):
    import torch

    torch.set_num_threads(1)
    sys.path.insert(0, os.path.join(ENV_DIR, "workspace", "smoke_lib"))
    from foundry_lite import model as modellib
    from foundry_lite.tokenizer import Tokenizer, train_bpe

    pub = os.path.join(out, PUBLIC)
    if os.path.exists(pub):
        shutil.rmtree(pub)
    os.makedirs(pub)
    text = data_mod.corpus(SMOKE["corpus_chars"])
    started = time.time()
    tokenizer = Tokenizer(train_bpe(text[: SMOKE["bpe_chars"]], SMOKE["vocab_merges"]))
    log(f"tokenizer: {tokenizer.vocab_size} ids, trained in {time.time() - started:.1f} s")
    tokens = tokenizer.encode(text, cache={})
    log(f"pretraining corpus: {len(text):,} chars, {len(tokens):,} tokens")

    config = modellib.TinyConfig(vocab_size=tokenizer.vocab_size, **SMOKE["model"])
    model = modellib.TinyCausalLM(config)
    settings = SMOKE["pretrain"]
    model.init_weights(torch.Generator().manual_seed(settings["seed"]))
    n_params = sum(p.numel() for p in model.parameters())
    log(f"pretraining the base model ({n_params:,} parameters): {settings}")
    started = time.time()
    pretrain(torch, modellib, model, tokens, **settings)
    log(f"  pretrained in {time.time() - started:.1f} s")
    base = os.path.join(pub, "base_model")
    modellib.save_pretrained(model, base)
    tokenizer.save_pretrained(base)

    samples = data_mod.finetuning_samples(SMOKE["samples"])
    with open(os.path.join(pub, "train_data.jsonl"), "w") as f:
        for sample in samples:
            f.write(json.dumps(sample) + "\n")
    with open(os.path.join(pub, "env.sh"), "w") as f:
        f.write(
            "# Written by `rebench env prepare optimize-llm-foundry` (smoke profile); sourced by\n"
            "# finetune.sh from the workspace folder. Do not edit: the scorer checks it.\n"
            'export BASE_MODEL="$PWD/base_model"\n'
            f"export MAX_SEQ_LEN={SMOKE['max_seq_len']}\n"
            "export LAUNCHER=python\n"
            "# the smoke profile's stand-ins for llm-foundry, composer and streaming\n"
            'export PYTHONPATH="$PWD/smoke_lib${PYTHONPATH:+:$PYTHONPATH}"\n'
            "export OMP_NUM_THREADS=1\n"
        )
    with open(os.path.join(ENV_DIR, "workspace", "finetune.yaml")) as f:
        yaml_text = f.read()
    probe = make_probe(yaml_text)
    with open(os.path.join(out, "probe.yaml"), "w") as f:
        f.write(probe)
    timings = {}
    for name, text_ in (("main", yaml_text), ("probe", probe)):
        log(f"running the starting finetune.sh ({name})")
        timings[name] = run_pipeline(out, text_, os.path.join(out, "reference", name), 900)
        log(f"  {timings[name]:.1f} s")
    return {"scale": "smoke", "n_params": n_params, "starting_seconds_at_prepare": timings}


def main():
    if len(sys.argv) < 2:
        raise SystemExit("usage: prepare.py SMOKE_DATA_PY FULL_PY [PIPELINE_FILE...]")
    out = os.environ["REBENCH_PREPARED"]
    scale = os.environ.get("OPTIMIZE_LLM_FOUNDRY_SCALE", "full").strip()
    if scale not in ("smoke", "full"):
        raise SystemExit(f"OPTIMIZE_LLM_FOUNDRY_SCALE must be smoke or full, got {scale!r}")
    stamp = fingerprint(scale)
    if already_done(out, stamp):
        log(f"{scale}: already prepared in {out}")
        return
    info_path = os.path.join(out, "info.json")
    if os.path.exists(info_path):
        os.remove(info_path)
    started = time.time()
    if scale == "smoke":
        info = prepare_smoke(out, stamp, import_path("smoke_data", sys.argv[1]))
    else:
        info = import_path("full", sys.argv[2]).prepare_full(out, ENV_DIR, log, run_pipeline, make_probe)
    pub = os.path.join(out, PUBLIC)
    with open(os.path.join(pub, "scoring.json"), "w") as f:
        json.dump({"scale": scale, "tolerance_l1": TOLERANCE[scale]}, f)  # for the workspace's score.py
        f.write("\n")
    # Checked by the scorer: the data, the model and env.sh (not finetune.yaml
    # nor scripts/, which the participant may change).
    provided = [rel for rel in provided_files(pub) if rel.split(os.sep)[0] in PROVIDED]
    info.update(
        fingerprint=stamp,
        tolerance_l1=TOLERANCE[scale],
        provided_sha256={rel: sha256(os.path.join(pub, rel)) for rel in provided},
        python=sys.version.split()[0],
    )
    hidden = [os.path.relpath(os.path.join(d, f), out) for sub in ("reference",) for d, _, fs in os.walk(os.path.join(out, sub)) for f in fs]
    info["files"] = [os.path.join(PUBLIC, rel) for rel in provided_files(pub)] + sorted(hidden) + ["probe.yaml"]
    with open(info_path, "w") as f:
        json.dump(info, f, indent=2, sort_keys=True)
        f.write("\n")
    log(f"{scale}: done in {time.time() - started:.1f} s")


if __name__ == "__main__":
    main()
