#!/usr/bin/env bash
# On a machine with NVIDIA GPUs: every session sees only its own GPU, a
# session beyond the GPUs waits in the queue, and optimize-kernel `full`
# times steadily. Prints one table (docs/hardware.md, "On a real GPU").
# Without a GPU it says so and exits 0.
#
#   scripts/gpu-check.sh [path/to/rebench]     (default: target/release, else target/debug)
set -uo pipefail
cd "$(dirname "$0")/.."

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu-check: no NVIDIA GPU here (nvidia-smi is missing or fails): nothing to check"
  exit 0
fi
rebench=${1:-}
for candidate in target/release/rebench target/debug/rebench; do
  [ -n "$rebench" ] || { [ -x "$candidate" ] && rebench=$candidate; }
done
[ -x "$rebench" ] || { echo "gpu-check: build rebench first (cargo build --release)"; exit 1; }
rebench=$(realpath "$rebench")

work=$(mktemp -d /tmp/rebench-gpu-check.XXXXXX)
data=$work/data
trap '"$rebench" --data-dir "$data" shutdown >/dev/null 2>&1; rm -rf "$work"' EXIT
gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
backend=${REBENCH_BACKEND:-bwrap}
echo "gpu-check: $gpus GPU(s): $(nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c | xargs); backend $backend"

# An environment that asks for one GPU and one core, scored instantly.
env=$work/one-gpu
cp -r tests/fixtures/envs/fixed "$env"
sed -i 's/^gpus = 0/gpus = 1/' "$env/environment.toml"

rows=()
row() { rows+=("$(printf '%-44s %s' "$1" "$2")"); }

sessions=()
for _ in $(seq "$gpus"); do
  id=$(REBENCH_BACKEND=$backend "$rebench" --data-dir "$data" new "$env" --participant gpu-check 2>/dev/null) || break
  sessions+=("$id")
done
extra=$("$rebench" --data-dir "$data" new "$env" --participant gpu-check --json 2>/dev/null)
state=$(printf '%s' "$extra" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("state"))' 2>/dev/null)
row "sessions granted one GPU each" "${#sessions[@]} of $gpus"
row "a session beyond the GPUs" "${state:-?} (want: queued)"

checked=0
for id in "${sessions[@]:0:2}"; do
  "$rebench" --data-dir "$data" begin "$id" >/dev/null
  seen=$("$rebench" --data-dir "$data" exec "$id" -- sh -c 'nvidia-smi -L | wc -l' 2>&1 | tail -1)
  torch=$("$rebench" --data-dir "$data" exec "$id" -- python3 -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null | tail -1)
  granted=$("$rebench" --data-dir "$data" show "$id" --json | python3 -c 'import json,sys; g=json.load(sys.stdin)["grant"]; print(",".join(str(x["index"]) for x in g["gpus"]))')
  row "session $id (GPU $granted): nvidia-smi -L" "$seen GPU(s) (want: 1)"
  row "session $id: torch cuda.device_count()" "${torch:-torch not installed}"
  checked=$((checked + 1))
done
if [ "${#sessions[@]}" -gt 0 ]; then
  "$rebench" --data-dir "$data" end "${sessions[0]}" >/dev/null
  sleep 6
  after=$("$rebench" --data-dir "$data" show "$(printf '%s' "$extra" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')" --json \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])')
  row "the queued one once a session ended" "$after (want: created)"
fi

if "$rebench" env prepare optimize-kernel --profile full >/dev/null 2>&1; then
  bench=$("$rebench" env bench optimize-kernel --profile full --runs 5 --busy 0 2>&1)
  row "optimize-kernel full, 5 runs each" ""
  while IFS= read -r line; do rows+=("    $line"); done <<<"$bench"
else
  row "optimize-kernel full" "not prepared here (env prepare needs torch from PyPI)"
fi

echo
printf '%s\n' "${rows[@]}"
