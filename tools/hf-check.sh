#!/usr/bin/env bash
# Proof that `skipswarm export --format=hf` writes a real LLaMA: trains a
# small checkpoint with train-ref (Debian CPU build), exports it, loads it
# with Hugging Face transformers' LlamaForCausalLM on the CPU, compares the
# logits on a fixed batch to 1e-4 relative and prints a generated sample.
#
#   bash tools/hf-check.sh [train-ref flags, e.g. --iterations=50]
#
# Not part of CI: the Python side needs torch (a 530 MB wheel, plus three
# small NVIDIA libraries the PyPI wheel loads at import even on CPU),
# transformers and safetensors, installed once into a virtualenv
# ($HF_VENV, default /tmp/skipswarm-hf-venv). Figures and a sample are in
# README.md "Take the model away".
set -euo pipefail
cd "$(dirname "$0")/.."

HF_VENV="${HF_VENV:-/tmp/skipswarm-hf-venv}"
TORCH_VERSION="${TORCH_VERSION:-2.11.0}"
WORK="${HF_CHECK_DIR:-/tmp/skipswarm-hf-check}"

if ! "$HF_VENV/bin/python" -c "import torch, transformers, safetensors" 2>/dev/null; then
  python3 -m venv "$HF_VENV"
  pip="$HF_VENV/bin/pip"
  # torch without its CUDA dependency tree: the CPU path needs only the
  # three libraries libtorch_cuda.so links that no CUDA toolkit ships here.
  wheel="$(ls "${TORCH_WHEEL_DIR:-$HOME/.cache/skipswarm/wheels}"/torch-"$TORCH_VERSION"-*.whl \
    2>/dev/null | head -1 || true)"
  "$pip" install -q --no-deps "${wheel:-torch==$TORCH_VERSION}"
  "$pip" install -q --no-deps "nvidia-cusparselt-cu13==0.8.0" "nvidia-nvshmem-cu13==3.4.5" \
    "nvidia-cufile==1.15.1.6.*"
  "$pip" install -q transformers safetensors numpy filelock "typing-extensions>=4.10" \
    "sympy>=1.13.3" networkx jinja2 fsspec
fi

bazel build //cli:skipswarm
bin=bazel-bin/cli/skipswarm
rm -rf "$WORK"
mkdir -p "$WORK"
"$bin" train-ref --model=small --stages=4 --iterations=300 --samples_per_mb=8 \
  --eval_batches=4 --final_eval_batches=8 --checkpoint_dir="$WORK/ckpt" "$@"
"$bin" export --checkpoint="$WORK/ckpt" --format=hf --out="$WORK/hf"
"$HF_VENV/bin/python" tools/hf_check.py "$WORK/hf" --json "$WORK/hf-check.json"
