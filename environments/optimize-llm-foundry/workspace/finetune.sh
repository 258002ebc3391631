#!/bin/bash
# Finetunes $BASE_MODEL on train_data.jsonl with finetune.yaml and writes
# the result to trained_model/. Make this faster without changing what it
# computes (see instructions.md).
set -euo pipefail
cd "$(dirname "$0")"
source ./env.sh

rm -rf finetuning_tokens
python -c "import streaming; streaming.base.util.clean_stale_shared_memory()"
time python scripts/data_prep/convert_finetuning_dataset.py \
  --dataset='json' \
  --splits='train' \
  --data_files train_data.jsonl \
  --out_root finetuning_tokens \
  --skip-preprocessing \
  --max_seq_len "${MAX_SEQ_LEN}" \
  --tokenizer "${BASE_MODEL}"
cp -r finetuning_tokens/train finetuning_tokens/valid

rm -rf ftout
time ${LAUNCHER} scripts/train/train.py \
  finetune.yaml \
  data_local=finetuning_tokens \
  model_name_or_path="${BASE_MODEL}" \
  train_loader.dataset.split=train \
  eval_loader.dataset.split=valid \
  save_folder=ftout

rm -rf trained_model
time python scripts/inference/convert_composer_to_hf.py \
  --composer_path ftout/latest-rank0.pt \
  --hf_output_path trained_model \
  --output_precision bf16

find . -type d -name "__pycache__" -prune -exec rm -rf {} +
