#!/bin/bash
# The reference solution (hidden; used by `rebench env calibrate`).
set -euo pipefail
cd "$(dirname "$0")"
source ./env.sh

rm -rf finetuning_tokens ftout trained_model
if [ "${LAUNCHER}" = "python" ]; then
  # Smoke scale: the three scripts' work in one process (scripts/fast_finetune.py).
  python scripts/fast_finetune.py finetune.yaml train_data.jsonl "${MAX_SEQ_LEN}" trained_model \
    model_name_or_path="${BASE_MODEL}"
  exit 0
fi

# Full scale (llm-foundry on 4 GPUs). UNTESTED here (no GPU): a plausible
# optimization, not RE-Bench's own reference solution. No stale-memory
# cleanup process, no valid split copy and no evaluation, tokenizing with
# more workers, no activation checkpointing, sharding the optimizer state
# only, and no intermediate checkpoint but the final one.
python scripts/data_prep/convert_finetuning_dataset.py \
  --dataset='json' --splits='train' --data_files train_data.jsonl \
  --out_root finetuning_tokens --skip-preprocessing --max_seq_len "${MAX_SEQ_LEN}" \
  --tokenizer "${BASE_MODEL}" --num_workers 16
composer scripts/train/train.py finetune.yaml data_local=finetuning_tokens \
  model_name_or_path="${BASE_MODEL}" train_loader.dataset.split=train \
  eval_loader.dataset.split=train eval_interval=0 save_folder=ftout \
  save_interval=1000ep fsdp_config.activation_checkpointing=false \
  fsdp_config.sharding_strategy=SHARD_GRAD_OP train_loader.num_workers=2
python scripts/inference/convert_composer_to_hf.py --composer_path ftout/latest-rank0.pt \
  --hf_output_path trained_model --output_precision bf16
