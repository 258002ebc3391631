"""The full profile's preparation: RE-Bench's task at its own scale.

Needs, and checks first (each missing one stops it with a message saying so):
  - the full profile's venv (requirements-full.txt: llm-foundry, composer,
    streaming, transformers), which rebench builds for `--profile full`;
  - 4 CUDA GPUs (RE-Bench: 4x H100), to run the starting finetune.sh once
    for the hidden reference weights (~5 minutes);
  - internet access to the Hugging Face hub (deepseek-ai/deepseek-coder-1.3b-base,
    ~2.7 GB) and to GitHub (llm-foundry's scripts/ folder, which the pip
    package does not contain, at the installed llm-foundry's release tag).

Writes into <prepared>/workspace/ (laid over the session workspace, winning
over the smoke files of the same name): base_model/, scripts/ (llm-foundry's),
finetune.yaml (RE-Bench's), train_data.jsonl and env.sh; and the hidden
reference/main, reference/probe and probe.yaml, like the smoke scale.

train_data.jsonl: RE-Bench's own file is not public. Set
OPTIMIZE_LLM_FOUNDRY_TRAIN_DATA to its path if you have it; otherwise
prompt/response pairs from Python standard-library functions are used
(OPTIMIZE_LLM_FOUNDRY_FULL_SAMPLES of them, default 2000), so the times
differ from RE-Bench's 272 s / 94 s until recalibrated.
"""

import io
import json
import os
import shutil
import tarfile
import urllib.request

BASE_MODEL_REPO = "deepseek-ai/deepseek-coder-1.3b-base"
LLM_FOUNDRY_TARBALL = "https://github.com/mosaicml/llm-foundry/archive/refs/tags/v{version}.tar.gz"
GPUS = 4

PROBE_EDITS = [
    ("global_seed: 17", "global_seed: 23"),
    ("  t_warmup: 20ba", "  t_warmup: 4ba"),
    ("  lr: 1.0e-5", "  lr: 2.0e-5"),
    ("  - 0.95", "  - 0.99"),
    ("max_duration: 1ep", "max_duration: 12ba"),
    ("global_train_batch_size: 16", "global_train_batch_size: 8"),
    ("device_train_microbatch_size: 4", "device_train_microbatch_size: 2"),
]


class Unavailable(SystemExit):
    pass


def require(condition, message):
    if not condition:
        raise Unavailable(f"optimize-llm-foundry full profile cannot be prepared here: {message}")


def check_machine(log):
    try:
        import llmfoundry  # noqa: F401
        import torch
    except ImportError as e:
        require(False, f"{e}; the full profile needs its own venv (requirements-full.txt), made by "
                "`rebench env prepare optimize-llm-foundry --profile full`")
    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    require(n >= GPUS, f"{GPUS} CUDA GPUs needed to compute the reference weights, {n} found")
    log(f"llm-foundry {llmfoundry.__version__}, torch {torch.__version__}, {n} GPUs ({torch.cuda.get_device_name(0)})")
    return llmfoundry.__version__


def download_model(dest, log):
    try:
        from huggingface_hub import snapshot_download
    except ImportError as e:
        require(False, f"huggingface_hub is missing from the full venv ({e})")
    log(f"downloading {BASE_MODEL_REPO} to {dest}")
    try:
        snapshot_download(BASE_MODEL_REPO, local_dir=dest, allow_patterns=["*.json", "*.safetensors", "*.model", "*.txt"])
    except Exception as e:
        require(False, f"could not download {BASE_MODEL_REPO} from the Hugging Face hub: {type(e).__name__}: {e}")


def download_scripts(version, dest, log):
    url = LLM_FOUNDRY_TARBALL.format(version=version)
    log(f"downloading llm-foundry's scripts/ from {url}")
    try:
        with urllib.request.urlopen(url, timeout=120) as response:
            blob = response.read()
    except Exception as e:
        require(False, f"could not download {url}: {type(e).__name__}: {e}")
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
        for member in tar.getmembers():
            parts = member.name.split("/", 1)
            if len(parts) == 2 and parts[1].startswith("scripts/") and member.isfile() and ".." not in parts[1]:
                target = os.path.join(dest, parts[1])
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with tar.extractfile(member) as src, open(target, "wb") as out:
                    shutil.copyfileobj(src, out)


def train_data(dest, env_dir):
    given = os.environ.get("OPTIMIZE_LLM_FOUNDRY_TRAIN_DATA", "").strip()
    if given:
        shutil.copyfile(given, dest)
        return f"copied from {given}"
    import importlib.util

    spec = importlib.util.spec_from_file_location("smoke_data", os.path.join(env_dir, "prepare", "smoke_data.py"))
    data = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(data)
    n = int(os.environ.get("OPTIMIZE_LLM_FOUNDRY_FULL_SAMPLES", "2000"))
    samples = data.finetuning_samples(n, min_chars=200, max_chars=6000)
    with open(dest, "w") as f:
        for sample in samples:
            f.write(json.dumps(sample) + "\n")
    return f"{n} standard-library functions"


def prepare_full(out, env_dir, log, run_pipeline, make_probe):
    version = check_machine(log)
    pub = os.path.join(out, "workspace")
    os.makedirs(pub, exist_ok=True)
    download_model(os.path.join(pub, "base_model"), log)
    download_scripts(version, pub, log)
    source = train_data(os.path.join(pub, "train_data.jsonl"), env_dir)
    shutil.copyfile(os.path.join(env_dir, "prepare", "full", "finetune.yaml"), os.path.join(pub, "finetune.yaml"))
    with open(os.path.join(pub, "env.sh"), "w") as f:
        f.write(
            "# Written by `rebench env prepare optimize-llm-foundry` (full profile); sourced by\n"
            "# finetune.sh from the workspace folder. Do not edit: the scorer checks it.\n"
            'export BASE_MODEL="$PWD/base_model"\n'
            "export MAX_SEQ_LEN=4096\n"
            "export LAUNCHER=composer\n"
        )
    with open(os.path.join(pub, "finetune.yaml")) as f:
        yaml_text = f.read()
    probe = make_probe(yaml_text, PROBE_EDITS)
    with open(os.path.join(out, "probe.yaml"), "w") as f:
        f.write(probe)
    timings = {}
    for name, text in (("main", yaml_text), ("probe", probe)):
        log(f"running the starting finetune.sh ({name}) on {GPUS} GPUs")
        timings[name] = run_pipeline(out, text, os.path.join(out, "reference", name), 3600)
        log(f"  {timings[name]:.1f} s")
    return {"scale": "full", "train_data": source, "llm_foundry": version, "starting_seconds_at_prepare": timings}
