#!/usr/bin/env bash
# One run on the GPU machine (one NVIDIA GPU, its Python's torch 2.11+cu130,
# no network): everything the CUDA build claims, measured, into one JSON.
#
# Prepare here (development machine):
#   bash tools/cuda-build.sh && bash tests/gpu/pack.sh     # -> out/gpu (~tens of MiB)
# Run there, carrying out/gpu, with a time limit that leaves room for a rerun:
#   bash tests/gpu/gpu-check.sh [--quick]     # figures -> $OUT/gpu-figures.json (or out/)
#
# Steps (each bounded in time; a failing step is recorded, the rest still run):
#   1. cuda_paths_test: staged == CPU on GPU (fp32 1e-4, bf16 2%), codec round
#      trips from device memory, free-memory query.
#   2. train-ref --device=cuda on the 125m and 350m presets (fp32 and --bf16):
#      tokens/s, MFU (6N + 12 L d T flops per token, H200 bf16 dense peak
#      989 TFLOPS), peak GPU memory (nvidia-smi, sampled) vs the printed estimate.
#   3. plain_loop.py: the same 350m model in a plain PyTorch loop, same batch.
#   4. skipswarm local: 4 processes (1 data node + 1 replica of 3 stages) on the
#      one GPU, loopback gRPC: tokens/s vs train-ref.
set -uo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"
pack="$here/out/gpu"
res="${OUT:-$here/out}"
mkdir -p "$res"
log="$res/gpu-check.log"
quick=0
[ "${1:-}" = "--quick" ] && quick=1
exec > >(tee -a "$log") 2>&1

torch_dir="$(python3 -c 'import torch, os; print(os.path.dirname(torch.__file__))')"
site="$(dirname "$torch_dir")"
ld="$torch_dir/lib"
for d in "$site"/nvidia/*/lib "$site"/nvidia/cu13/lib; do [ -d "$d" ] && ld="$ld:$d"; done
ld="$ld:$pack/lib"
# Our libstdc++ (gcc 12) only where the machine's is older.
if ! strings "$(ldconfig -p | awk '/libstdc\+\+\.so\.6 /{print $NF; exit}')" 2>/dev/null |
     grep -q GLIBCXX_3.4.30; then
  ld="$ld:$pack/lib/stdcxx"
fi
export LD_LIBRARY_PATH="$ld${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
bin="$pack/bin/skipswarm"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true
ldd "$bin" | grep "not found" && echo "MISSING LIBRARIES (see above)"

# Runs "$@" with nvidia-smi sampling used memory; prints "peak_mib=N".
with_peak() {
  local f
  f="$(mktemp)"
  (while true; do nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits >>"$f"; \
     sleep 0.2; done) &
  local sampler=$!
  "$@"
  local rc=$?
  kill "$sampler" 2>/dev/null
  wait "$sampler" 2>/dev/null
  echo "peak_mib=$(sort -n "$f" | tail -1)"
  rm -f "$f"
  return $rc
}

cd "$res"
figures="$res/gpu-figures.jsonl"
: >"$figures"
idle_mib="$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1)"
echo "{\"step\":\"idle\",\"used_mib\":${idle_mib:-0}}" >>"$figures"

echo "== 1. CUDA unit tests"
timeout 300 "$pack/bin/cuda_paths_test" --gtest_output=json:"$res/cuda_paths_test.json"
echo "{\"step\":\"cuda_paths_test\",\"rc\":$?}" >>"$figures"

iters=30
[ $quick = 1 ] && iters=8
for preset in 125m 350m; do
  for bf16 in false true; do
    echo "== 2. train-ref --model=$preset --bf16=$bf16"
    rm -f "$res/metrics-$preset-$bf16.jsonl"
    out="$(with_peak timeout 420 "$bin" train-ref --model="$preset" --device=cuda \
      --bf16="$bf16" --samples_per_mb=8 --mbs_per_iteration=2 --iterations=$iters \
      --log_every=2 --eval_every=0 --eval_batches=1 --final_eval_batches=1 \
      --checkpoint_every=0 --metrics_out="$res/metrics-$preset-$bf16.jsonl" 2>&1)"
    rc=$?
    echo "$out" | tail -25
    python3 "$pack/figures.py" train_ref "$preset" "$bf16" "$rc" \
      "$res/metrics-$preset-$bf16.jsonl" <<<"$out" >>"$figures"
  done
done

echo "== 3. plain PyTorch loop, 350m shapes"
for bf16 in "" "--bf16"; do
  timeout 300 python3 "$pack/plain_loop.py" --layers 24 --d_model 1024 --heads 16 --ffn 2816 \
    --seq_len 1024 --samples_per_mb 8 --mbs_per_iteration 2 --iterations $iters $bf16 \
    | tail -1 >>"$figures"
done

echo "== 4. 4-process local swarm on one GPU (125m, stages=4)"
out="$(with_peak timeout 420 "$bin" local --model=125m --device=cuda --stages=4 \
  --local_data_nodes=1 --local_replicas=1 --local_iterations=$iters --local_mbs=2 \
  --samples_per_mb=8 --local_dir="$res/local" 2>&1)"
rc=$?
echo "$out" | tail -30
python3 "$pack/figures.py" local 125m false "$rc" "" <<<"$out" >>"$figures"

python3 - "$figures" "$res/gpu-figures.json" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{")]
json.dump(rows, open(sys.argv[2], "w"), indent=2)
print(json.dumps(rows, indent=1))
PY
