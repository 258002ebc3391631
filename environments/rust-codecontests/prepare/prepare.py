"""`[prepare]` command of rust-codecontests: puts the held-out problems in $REBENCH_PREPARED.

    python3 prepare/prepare.py <env>/hidden/heldout_smoke.jsonl

RUST_CODECONTESTS_DATA (from the profile's prepare_env) chooses the data:

smoke         copies the shipped held-out smoke problems to heldout.jsonl (12 problems, ~36 KB).

codecontests  needs the internet (or a local copy, below). Downloads the
              CodeContests (deepmind/code_contests on Hugging Face) parquet files of
              the `test` split (165 problems; held out, all public, private and
              generated tests -> heldout.jsonl) and the `valid` split (117 problems; the
              participant's development set -> workspace/problems/codecontests_valid.jsonl,
              at most 50 tests per problem, inputs over 64 KB dropped, which rebench copies
              into every session's workspace). The two splits are a few hundred MB of
              parquet (the train split, ~3 GB, is not fetched); budget ~5-15 minutes on a
              good connection. Parquet is read with pyarrow: if the preparing python lacks
              it, a throwaway venv with pyarrow is made in a temporary folder (pip needs
              PyPI) and deleted afterwards. The downloads are deleted too.
              RUST_CODECONTESTS_SOURCE=<dir>: read the parquet files (names containing
              "test-" and "valid-") from that folder instead of downloading.
              HF_TOKEN, when set, is sent to Hugging Face.
Not run on the development machine (no internet there): the codecontests path is untested.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request

HF_TREE = "https://huggingface.co/api/datasets/deepmind/code_contests/tree/main/data"
HF_FILE = "https://huggingface.co/datasets/deepmind/code_contests/resolve/main/"
DEV_MAX_TESTS = 50
DEV_MAX_INPUT = 64 * 1024
COLUMNS = ["name", "description", "public_tests", "private_tests", "generated_tests", "time_limit",
           "memory_limit_bytes", "difficulty", "source", "cf_rating"]


def log(text):
    print(text, flush=True)


def prepared_dir():
    path = os.environ.get("REBENCH_PREPARED") or os.getcwd()
    os.makedirs(path, exist_ok=True)
    return path


def prepare_smoke(source):
    out = prepared_dir()
    shutil.copyfile(source, os.path.join(out, "heldout.jsonl"))
    with open(source, encoding="utf-8") as f:
        count = sum(1 for line in f if line.strip())
    with open(os.path.join(out, "dataset.json"), "w", encoding="utf-8") as f:
        json.dump({"dataset": "smoke", "heldout_problems": count}, f)
    log(f"smoke: {count} held-out problems in {out}/heldout.jsonl")


def _get(url, path=None):
    headers = {"User-Agent": "rebench-prepare"}
    if os.environ.get("HF_TOKEN"):
        headers["Authorization"] = f"Bearer {os.environ['HF_TOKEN']}"
    request = urllib.request.Request(url, headers=headers)
    with urllib.request.urlopen(request, timeout=600) as response:
        if path is None:
            return response.read()
        with open(path, "wb") as f:
            shutil.copyfileobj(response, f, length=1 << 20)
    return None


def fetch_parquet(workdir):
    """{split: [parquet paths]} for the test and valid splits."""
    local = os.environ.get("RUST_CODECONTESTS_SOURCE")
    splits = {"test": [], "valid": []}
    if local:
        for name in sorted(os.listdir(local)):
            for split in splits:
                if name.endswith(".parquet") and f"{split}-" in name:
                    splits[split].append(os.path.join(local, name))
    else:
        listing = json.loads(_get(HF_TREE))
        for entry in listing:
            path = entry.get("path", "")
            for split in splits:
                if path.endswith(".parquet") and os.path.basename(path).startswith(f"{split}-"):
                    target = os.path.join(workdir, os.path.basename(path))
                    log(f"downloading {path} ({entry.get('size', '?')} bytes)")
                    _get(HF_FILE + path, target)
                    splits[split].append(target)
    for split, paths in splits.items():
        if not paths:
            raise SystemExit(f"no parquet files for the {split} split found "
                             f"({'in ' + local if local else 'on Hugging Face'})")
    return splits


def python_with_pyarrow(workdir):
    try:
        import pyarrow.parquet  # noqa: F401
        return sys.executable
    except ImportError:
        pass
    venv = os.path.join(workdir, "venv")
    log("pyarrow not importable: making a temporary venv with it")
    subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    python = os.path.join(venv, "bin", "python")
    subprocess.run([python, "-m", "pip", "install", "--quiet", "pyarrow>=14"], check=True)
    return python


def _tests(struct):
    if not struct:
        return []
    return [{"input": i, "output": o} for i, o in zip(struct.get("input") or [], struct.get("output") or [])]


def convert(split, out_path, paths):
    """Runs under a python with pyarrow: parquet rows -> problems, one JSON per line."""
    import pyarrow.parquet as pq

    dev = split == "valid"
    count = 0
    with open(out_path, "w", encoding="utf-8") as out:
        for path in paths:
            table = pq.read_table(path, columns=COLUMNS)
            for row in table.to_pylist():
                public = _tests(row["public_tests"])
                tests = public + _tests(row["private_tests"]) + _tests(row["generated_tests"])
                if dev:
                    tests = [t for t in tests if len(t["input"]) <= DEV_MAX_INPUT][:DEV_MAX_TESTS]
                if not tests:
                    continue
                limit = row.get("time_limit") or {}
                seconds = (limit.get("seconds") or 0) + (limit.get("nanos") or 0) / 1e9
                memory = row.get("memory_limit_bytes") or 0
                problem = {
                    "name": row["name"],
                    "description": row["description"],
                    "public_tests": public,
                    "tests": tests,
                    "time_limit_s": seconds if seconds > 0 else 2.0,
                    "memory_limit_mb": memory // (1024 * 1024) if memory > 0 else 256,
                    "difficulty": row.get("difficulty"),
                    "source": row.get("source"),
                    "cf_rating": row.get("cf_rating"),
                }
                out.write(json.dumps(problem) + "\n")
                count += 1
    return count


def prepare_codecontests():
    out = prepared_dir()
    workdir = tempfile.mkdtemp(prefix="rcc-prepare-")
    try:
        splits = fetch_parquet(workdir)
        python = python_with_pyarrow(workdir)
        dev_dir = os.path.join(out, "workspace", "problems")
        os.makedirs(dev_dir, exist_ok=True)
        targets = {"test": os.path.join(out, "heldout.jsonl"),
                   "valid": os.path.join(dev_dir, "codecontests_valid.jsonl")}
        counts = {}
        for split, paths in splits.items():
            result = subprocess.run([python, os.path.abspath(__file__), "--convert", split, targets[split], *paths],
                                    check=True, capture_output=True, text=True)
            counts[split] = int(result.stdout.strip().splitlines()[-1])
            log(f"{split}: {counts[split]} problems -> {targets[split]}")
        with open(os.path.join(out, "dataset.json"), "w", encoding="utf-8") as f:
            json.dump({"dataset": "codecontests", "heldout_problems": counts["test"],
                       "dev_problems": counts["valid"]}, f)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def main():
    if sys.argv[1:2] == ["--convert"]:
        split, out_path, *paths = sys.argv[2:]
        print(convert(split, out_path, paths))
        return
    data = os.environ.get("RUST_CODECONTESTS_DATA", "smoke")
    if data == "smoke":
        if len(sys.argv) < 2:
            raise SystemExit("usage: prepare.py <heldout_smoke.jsonl>")
        prepare_smoke(sys.argv[1])
    elif data == "codecontests":
        prepare_codecontests()
    else:
        raise SystemExit(f"RUST_CODECONTESTS_DATA must be smoke or codecontests, not {data!r}")


if __name__ == "__main__":
    main()
