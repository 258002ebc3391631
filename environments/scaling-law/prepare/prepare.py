"""Run by `rebench env prepare scaling-law [--profile P]` with the venv's python,
cwd = $REBENCH_PREPARED. Builds, for the profile ($REBENCH_PROFILE):

  workspace/config.json     the profile's training settings (protected in sessions)
  workspace/answer.json     the starting (naive) answer for this profile's scale
  workspace/data/train.bin  bytes to train on   } copied into every session
  workspace/data/val.bin    bytes to validate on }
  hidden/test.bin           held-out bytes the ground truth is measured on
  data.json                 what the data were made from (to know when to remake them)
  ground_truth.json         the hidden table the scorer interpolates: for each
                            n_embd of a grid, the test loss of a training run
                            with the fixed code at fractions of the target
                            FLOPs up to 1.1x (a run's loss after k steps does
                            not depend on its max_iters: constant LR after warmup)

Smoke: synthetic text (prepare/synthetic.py, fixed seed), 5 tiny CPU runs,
2 at a time with one torch thread each: about a minute on 2 cores.
Full: byte-level C4 from Hugging Face (needs the internet; ~2.5 GB download,
~6.5 GB of bytes), then 7 GPU runs at 5.5e17 counted FLOPs each, one per GPU
at a time; see instructions.md for the cost. A prebuilt table can be shipped
as prepare/ground_truth_<profile>.json, which is then copied instead.
Every step skips work whose output is already there, so an interrupted
preparation resumes where it stopped (finished runs are kept in runs/).

The other arguments (the config files, workspace/train.py, model.py,
data.py) are named only so that rebench hashes them: editing any of them
makes the preparation outdated.

Internal use: `prepare.py --run-point N_EMBD OUT.json` trains one grid point.
"""

import concurrent.futures
import gzip
import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ENV_DIR = os.path.dirname(HERE)
WORKSPACE_SRC = os.path.join(ENV_DIR, "workspace")
sys.path.insert(0, HERE)
sys.path.insert(0, WORKSPACE_SRC)
sys.dont_write_bytecode = True  # leave no __pycache__ in the environment folder

TABLE_FORMAT = 1


def log(message):
    print(message, flush=True)


def profile_name():
    return os.environ.get("REBENCH_PROFILE") or "full"


def load_profile(name):
    path = os.path.join(HERE, f"{name}.json")
    if not os.path.exists(path):
        sys.exit(f"no settings for profile {name!r} ({path} missing)")
    with open(path) as f:
        return json.load(f)


def write_json(path, value):
    """Atomically (temp file + rename), so a killed run leaves no half file."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(value, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)


def write_bytes(path, data):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def file_hash(h, path):
    with open(path, "rb") as f:
        h.update(f.read())


def data_hash(settings):
    """What the data depend on: the data settings and the text generator."""
    h = hashlib.sha256(json.dumps(settings["data"], sort_keys=True).encode())
    file_hash(h, os.path.join(HERE, "synthetic.py"))
    return h.hexdigest()


def settings_hash(settings):
    """What the table depends on: the profile settings, the data, the
    training code and TABLE_FORMAT (bump it when this script's way of
    building the table changes; other edits of this script keep the table)."""
    h = hashlib.sha256(json.dumps(settings, sort_keys=True).encode())
    h.update(f"table format {TABLE_FORMAT}; data {data_hash(settings)}".encode())
    for name in ("train.py", "model.py", "data.py"):
        file_hash(h, os.path.join(WORKSPACE_SRC, name))
    return h.hexdigest()


# ---------------------------------------------------------------- data

def data_paths(prepared):
    return {
        "train": os.path.join(prepared, "workspace", "data", "train.bin"),
        "val": os.path.join(prepared, "workspace", "data", "val.bin"),
        "test": os.path.join(prepared, "hidden", "test.bin"),
    }


def make_synthetic(settings, paths):
    import synthetic

    spec = settings["data"]
    sizes = [spec["train_bytes"], spec["val_bytes"], spec["test_bytes"]]
    log(f"generating {sum(sizes):,} bytes of synthetic text (seed {spec['seed']})")
    # One stream, then split: the three splits share one language.
    text = synthetic.generate(sum(sizes), spec["seed"])
    start = 0
    for split, size in zip(("train", "val", "test"), sizes):
        write_bytes(paths[split], text[start : start + size])
        start += size


def c4_documents(url, downloads):
    """The texts of one C4 json.gz shard, downloading it once into `downloads`."""
    local = os.path.join(downloads, url.rsplit("/", 1)[1])
    if not os.path.exists(local):
        log(f"downloading {url}")
        for attempt in range(1, 4):
            try:
                with urllib.request.urlopen(url, timeout=120) as response, open(local + ".part", "wb") as out:
                    shutil.copyfileobj(response, out, length=1 << 20)
                os.replace(local + ".part", local)
                break
            except OSError as e:
                log(f"  attempt {attempt} failed: {e}")
                if attempt == 3:
                    sys.exit(f"could not download {url}: {e} (the full profile needs the internet)")
                time.sleep(10 * attempt)
    with gzip.open(local, "rt", encoding="utf-8") as f:
        for line in f:
            yield json.loads(line)["text"]


def make_c4(settings, paths, prepared):
    """Byte-level C4 (English): train from the first `train_shards` training
    shards, val and test from the first validation shard (disjoint halves)."""
    spec = settings["data"]
    downloads = os.path.join(prepared, "downloads")
    os.makedirs(downloads, exist_ok=True)
    base = spec["base_url"]
    val_url = f"{base}/c4-validation.00000-of-00008.json.gz"
    held_out = bytearray()
    for text in c4_documents(val_url, downloads):
        held_out += text.encode("utf-8") + b"\n\n"
        if len(held_out) >= spec["val_bytes"] + spec["test_bytes"]:
            break
    else:
        sys.exit("the C4 validation shard is smaller than val_bytes + test_bytes")
    write_bytes(paths["val"], bytes(held_out[: spec["val_bytes"]]))
    write_bytes(paths["test"], bytes(held_out[spec["val_bytes"] : spec["val_bytes"] + spec["test_bytes"]]))
    tmp = paths["train"] + ".tmp"
    os.makedirs(os.path.dirname(tmp), exist_ok=True)
    with open(tmp, "wb") as out:
        for i in range(spec["train_shards"]):
            url = f"{base}/c4-train.{i:05d}-of-01024.json.gz"
            for text in c4_documents(url, downloads):
                out.write(text.encode("utf-8") + b"\n\n")
            log(f"  train.bin: {out.tell():,} bytes after shard {i}")
    os.replace(tmp, paths["train"])
    shutil.rmtree(downloads)  # ~2.5 GB we no longer need


def ensure_data(settings, prepared):
    paths = data_paths(prepared)
    stamp = os.path.join(prepared, "data.json")
    wanted = data_hash(settings)
    try:
        with open(stamp) as f:
            made = json.load(f).get("data_hash") == wanted
    except (OSError, ValueError):
        made = False
    if made and all(os.path.exists(p) for p in paths.values()):
        log("data already there")
        return paths
    source = settings["data"]["source"]
    if source == "synthetic":
        make_synthetic(settings, paths)
    elif source == "c4":
        make_c4(settings, paths, prepared)
    else:
        sys.exit(f"unknown data source {source!r}")
    sizes = {split: os.path.getsize(path) for split, path in paths.items()}
    for split, size in sizes.items():
        log(f"{split}: {size:,} bytes")
    write_json(stamp, {"data_hash": wanted, "bytes": sizes})
    return paths


# ---------------------------------------------------------------- ground truth

def point_plan(settings, n_embd):
    """The run for one grid point: its max_iters (1.1x the target) and eval steps."""
    import train as train_lib

    config = settings["train"]
    target = config["target_flops"]
    per_iter = train_lib.flops(n_embd, 1, config)
    fractions = settings["ground_truth"]["fractions"]
    top = max(fractions)
    max_iters = int(top * target // per_iter)
    eval_at = sorted({max(1, int(f * target // per_iter)) for f in fractions if f < top} | {max_iters})
    return max_iters, eval_at


def run_point(n_embd, out_path):
    """Trains one grid point on the GPU/CPU this process was given."""
    import train as train_lib

    settings = load_profile(profile_name())
    prepared = os.environ["REBENCH_PREPARED"]
    config = dict(settings["train"], eval_batches=settings["ground_truth"]["eval_batches"])
    if settings["ground_truth"]["device"] == "cpu":
        config["device"] = "cpu"
    max_iters, eval_at = point_plan(settings, n_embd)
    paths = data_paths(prepared)
    result = train_lib.run(
        n_embd, max_iters, config, eval_at, "test",
        log=lambda m: log(f"[n_embd {n_embd}] {m}"),
        data_dir=os.path.dirname(paths["train"]),
        eval_dir=os.path.dirname(paths["test"]),
    )
    result["settings_hash"] = settings_hash(settings)
    write_json(out_path, result)


def worker_slots(settings):
    """Parallel runs: the profile's `workers`, or one per visible GPU (0 = auto)."""
    gt = settings["ground_truth"]
    if gt["device"] == "cpu":
        return [None] * max(1, min(gt["workers"] or 1, os.cpu_count() or 1))
    import torch

    count = torch.cuda.device_count()
    if count == 0:
        sys.exit(
            "building this profile's ground-truth table needs CUDA GPUs and torch sees none. "
            "Prepare on the GPU machine (see instructions.md for the cost), or ship a prebuilt "
            f"table as prepare/ground_truth_{profile_name()}.json."
        )
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = visible.split(",") if visible else [str(i) for i in range(count)]
    return ids[: gt["workers"] or count]


def build_table(settings, prepared):
    runs_dir = os.path.join(prepared, "runs")
    os.makedirs(runs_dir, exist_ok=True)
    wanted = settings_hash(settings)
    todo = []
    for n_embd in settings["ground_truth"]["n_embd"]:
        out = os.path.join(runs_dir, f"n_embd_{n_embd}.json")
        try:
            with open(out) as f:
                if json.load(f).get("settings_hash") == wanted:
                    log(f"n_embd {n_embd}: already trained")
                    continue
        except (OSError, ValueError):
            pass
        todo.append((n_embd, out))
    slots = worker_slots(settings)
    # Smallest n_embd first: on the iso-FLOP line they take the most steps
    # (and, being overhead-bound, the most time), so they should not start last.
    todo.sort(key=lambda item: item[0])
    free = list(slots)
    failures = []
    started = time.time()

    def launch(n_embd, out, slot):
        env = dict(os.environ)
        if slot is not None:
            env["CUDA_VISIBLE_DEVICES"] = slot
        max_iters, _ = point_plan(settings, n_embd)
        log(f"training n_embd {n_embd} for {max_iters} steps"
            + (f" on GPU {slot}" if slot is not None else ""))
        proc = subprocess.run(
            [sys.executable, os.path.abspath(__file__), "--run-point", str(n_embd), out],
            env=env, stdout=sys.stdout, stderr=sys.stderr,
        )
        return n_embd, slot, proc.returncode

    with concurrent.futures.ThreadPoolExecutor(max_workers=len(slots)) as pool:
        running = set()
        while todo or running:
            while todo and free:
                n_embd, out = todo.pop(0)
                running.add(pool.submit(launch, n_embd, out, free.pop(0)))
            done, running = concurrent.futures.wait(running, return_when=concurrent.futures.FIRST_COMPLETED)
            for future in done:
                n_embd, slot, code = future.result()
                free.append(slot)
                if code != 0:
                    failures.append(f"n_embd {n_embd} (exit {code})")
    if failures:
        sys.exit("ground-truth runs failed: " + ", ".join(failures))
    log(f"ground-truth runs done in {time.time() - started:.0f} s")
    return assemble_table(settings, runs_dir, wanted)


def assemble_table(settings, runs_dir, wanted):
    import torch

    config = settings["train"]
    target = config["target_flops"]
    import train as train_lib

    runs = []
    for n_embd in settings["ground_truth"]["n_embd"]:
        with open(os.path.join(runs_dir, f"n_embd_{n_embd}.json")) as f:
            result = json.load(f)
        per_iter = train_lib.flops(n_embd, 1, config)
        points = [
            {"iter": h["iter"], "fraction": h["iter"] * per_iter / target, "loss": h["test_loss"]}
            for h in result["history"]
        ]
        if not all(math.isfinite(p["loss"]) for p in points):
            sys.exit(f"n_embd {n_embd}: the training diverged (non-finite loss)")
        runs.append({"n_embd": n_embd, "seconds": result["seconds"], "points": points})
    table = {
        "format": TABLE_FORMAT,
        "profile": config["profile"],
        "target_flops": target,
        "max_fraction": max(settings["ground_truth"]["fractions"]),
        "flops": {k: config[k] for k in ("n_layer", "vocab_size", "block_size", "batch_size")},
        "head_dim": config["head_dim"],
        "runs": runs,
        "settings_hash": wanted,
        "built_with": {"torch": torch.__version__, "python": sys.version.split()[0]},
    }
    return table


def ensure_table(settings, prepared):
    path = os.path.join(prepared, "ground_truth.json")
    name = profile_name()
    shipped = os.path.join(HERE, f"ground_truth_{name}.json")
    wanted = settings_hash(settings)
    if os.path.exists(path):
        with open(path) as f:
            if json.load(f).get("settings_hash") == wanted:
                log("ground-truth table already there")
                return
    if os.path.exists(shipped):
        log(f"using the prebuilt table {shipped}")
        with open(shipped) as f:
            table = json.load(f)
        if table.get("settings_hash") != wanted:
            sys.exit(f"{shipped} was built from other settings or training code; rebuild it")
    else:
        table = build_table(settings, prepared)
    write_json(path, table)
    # The table's own optimum on the target line, for the log only.
    best = min(table["runs"], key=lambda r: loss_at(r["points"], 1.0))
    log(f"ground truth: best n_embd on the grid {best['n_embd']} "
        f"(test loss {loss_at(best['points'], 1.0):.4f} at the target budget)")


def loss_at(points, fraction):
    """Piecewise-linear in log(fraction), clamped at the ends (as the scorer does)."""
    xs = [math.log(p["fraction"]) for p in points]
    ys = [p["loss"] for p in points]
    x = math.log(fraction)
    if x <= xs[0]:
        return ys[0]
    for (x0, y0), (x1, y1) in zip(zip(xs, ys), zip(xs[1:], ys[1:])):
        if x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0) if x1 > x0 else y1
    return ys[-1]


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "--run-point":
        run_point(int(sys.argv[2]), sys.argv[3])
        return
    prepared = os.environ["REBENCH_PREPARED"]
    name = profile_name()
    settings = load_profile(name)
    log(f"preparing scaling-law, profile {name}, in {prepared}")
    write_json(os.path.join(prepared, "workspace", "config.json"), settings["train"])
    write_json(os.path.join(prepared, "workspace", "answer.json"), settings["starting_answer"])
    ensure_data(settings, prepared)
    ensure_table(settings, prepared)


if __name__ == "__main__":
    main()
