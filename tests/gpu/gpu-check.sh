#!/usr/bin/env bash
# One run on the GPU machine (one NVIDIA GPU, its Python's torch 2.11+cu130,
# no network): everything the CUDA build claims, measured, into one JSON.
#
# Prepare here (development machine):
#   bash tools/cuda-build.sh && bash tests/gpu/pack.sh     # -> out/gpu (~tens of MiB)
# Run there, carrying out/gpu, with a time limit that leaves room for a rerun:
#   GPU_CHECK_BUDGET_S=480 bash tests/gpu/gpu-check.sh
# Figures -> $OUT/gpu-figures.json (one row per step, written as each step
# ends, so a run cut short still returns what it measured); the whole log
# -> $OUT/gpu-check.log; the nodes' logs -> $OUT/gpu-logs.tar.gz.
#
# Steps, most important first; each has its own time limit and none starts
# past the budget (a failing step is recorded, the rest still run):
#   1. the CUDA context's own memory (a one-element tensor from Python's
#      torch, the same libtorch version), to subtract from peaks.
#   2. cuda_paths_test: staged == CPU on GPU (fp32 1e-4, bf16 2%), codec
#      round trips from device memory, free-memory query.
#   3. train-ref --device=cuda --model=350m --bf16, and the same model in a
#      plain PyTorch loop (plain_loop.py): tokens/s, MFU, peak memory
#      (nvidia-smi, sampled) vs the printed estimate.
#   4. skipswarm local: 4 processes (1 data node + 1 replica of 3 stages,
#      125m) on the one GPU over loopback gRPC, vs train-ref 125m.
#   5. The same in fp32 (350m train-ref and plain loop, 125m train-ref).
# Environment: GPU_CHECK_BUDGET_S (480), GPU_CHECK_ITERS (20), GPU_CHECK_SKIP
# (words: test, local, fp32; e.g. "test local" for a rerun of the figures).
set -uo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"
pack="$here/out/gpu"
res="${OUT:-$here/out/gpu-results}"
work=/tmp/gpu-check
rm -rf "$work"
mkdir -p "$res" "$work"
log="$res/gpu-check.log"
budget="${GPU_CHECK_BUDGET_S:-480}"
iters="${GPU_CHECK_ITERS:-20}"
start_s=$SECONDS
exec > >(tee -a "$log") 2>&1

torch_dir="$(python3 -c 'import torch, os; print(os.path.dirname(torch.__file__))')"
site="$(dirname "$torch_dir")"
ld="$torch_dir/lib"
for d in "$site"/nvidia/*/lib "$site"/nvidia/*/lib64; do [ -d "$d" ] && ld="$ld:$d"; done
ld="$ld:$pack/lib"
# Our libstdc++ (gcc 12) only where the machine's is older.
if ! strings "$(ldconfig -p | awk '/libstdc\+\+\.so\.6 /{print $NF; exit}')" 2>/dev/null |
     grep -q GLIBCXX_3.4.30; then
  ld="$ld:$pack/lib/stdcxx"
fi
export LD_LIBRARY_PATH="$ld${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
bin="$pack/bin/skipswarm"
corpus="$pack/corpus"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true
python3 -c 'import torch; print("python torch", torch.__version__, torch.version.cuda)'
if ldd "$bin" | grep "not found"; then echo "MISSING LIBRARIES (see above)"; fi

figures="$res/gpu-figures.jsonl"
: >"$figures"
row() { echo "$1" >>"$figures"; }

# Seconds a step may take: its own limit, cut to what is left of the budget
# (0: do not start it).
limit() {
  local left=$((budget - (SECONDS - start_s) - 15))
  if [ "$left" -lt 20 ]; then echo 0; elif [ "$left" -lt "$1" ]; then echo "$left"; else echo "$1"; fi
}

# Runs "$@" with nvidia-smi sampling used memory; prints "peak_mib=N".
with_peak() {
  local f="$work/peak.$$"
  : >"$f"
  (while true; do nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits >>"$f"; \
     sleep 0.2; done) &
  local sampler=$!
  "$@"
  local rc=$?
  kill "$sampler" 2>/dev/null
  wait "$sampler" 2>/dev/null
  echo "peak_mib=$(sort -n "$f" | tail -1)"
  return $rc
}

used_mib() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1; }

echo "== 1. idle and CUDA-context memory"
idle="$(used_mib)"
ctx="$(with_peak python3 -c 'import torch, time; x = torch.zeros(1, device="cuda"); torch.cuda.synchronize(); time.sleep(1.5)' | sed -n 's/peak_mib=//p')"
row "{\"step\":\"idle\",\"used_mib\":${idle:-0},\"with_torch_context_mib\":${ctx:-0}}"

skip() { [[ " ${GPU_CHECK_SKIP:-} " == *" $1 "* ]]; }

echo "== 2. CUDA unit tests"
t=$(limit 150)
if [ "$t" -gt 0 ] && ! skip test; then
  timeout "$t" "$pack/bin/cuda_paths_test" --gtest_output=json:"$res/cuda_paths_test.json"
  row "{\"step\":\"cuda_paths_test\",\"rc\":$?}"
fi

train_ref() {  # preset bf16 limit
  local t
  t=$(limit "$3")
  [ "$t" -gt 0 ] || { echo "skipped train-ref $1 bf16=$2: budget"; return; }
  echo "== train-ref --model=$1 --bf16=$2 (limit ${t}s)"
  local m="$work/metrics-$1-$2.jsonl" s=$SECONDS out rc
  out="$(with_peak timeout "$t" "$bin" train-ref --model="$1" --device=cuda \
    --bf16="$2" --corpus="$corpus" --samples_per_mb=8 --mbs_per_iteration=2 --iterations="$iters" \
    --log_every=1 --eval_every=0 --eval_batches=1 --final_eval_batches=1 \
    --checkpoint_every=0 --metrics_out="$m" 2>&1)"
  rc=$?
  echo "$out" | tail -20
  python3 "$pack/figures.py" train_ref "$1" "$2" "$rc" "$m" "$((SECONDS - s))" \
    <<<"$out" >>"$figures"
}

plain_loop() {  # bf16-flag limit
  local t
  t=$(limit "$2")
  [ "$t" -gt 0 ] || { echo "skipped plain loop $1: budget"; return; }
  echo "== plain PyTorch loop, 350m shapes $1 (limit ${t}s)"
  with_peak timeout "$t" python3 "$pack/plain_loop.py" --layers 24 --d_model 1024 --heads 16 \
    --ffn 2816 --seq_len 1024 --samples_per_mb 8 --mbs_per_iteration 2 --iterations "$iters" \
    $1 >"$work/plain.out" 2>&1
  cat "$work/plain.out" | tail -5
  python3 - "$work/plain.out" >>"$figures" <<'PY'
import json, re, sys
text = open(sys.argv[1]).read()
rows = [l for l in text.splitlines() if l.startswith("{")]
row = json.loads(rows[-1]) if rows else {"what": "plain_pytorch_loop", "failed": text[-800:]}
m = re.search(r"peak_mib=([0-9]+)", text)
if m:
    row["peak_used_mib"] = int(m.group(1))
row["step"] = "plain_loop"
print(json.dumps(row))
PY
}

local_swarm() {  # bf16 limit
  local t
  t=$(limit "$2")
  [ "$t" -gt 0 ] || { echo "skipped local swarm: budget"; return; }
  echo "== 4-process local swarm on one GPU (125m, stages=4, bf16=$1; limit ${t}s)"
  local s=$SECONDS out rc
  out="$(with_peak timeout "$t" "$bin" local --model=125m --device=cuda --bf16="$1" --corpus="$corpus" --stages=4 \
    --local_data_nodes=1 --local_replicas=1 --local_iterations="$iters" --local_mbs=2 \
    --samples_per_mb=8 --local_dir="$work/local-$1" 2>&1)"
  rc=$?
  echo "$out" | tr '\r' '\n' | tail -25
  python3 "$pack/figures.py" local 125m "$1" "$rc" "$work/local-$1/progress.jsonl" \
    "$((SECONDS - s))" <<<"$out" >>"$figures"
}

echo "== 3. 350m, bf16: train-ref vs a plain PyTorch loop"
train_ref 350m true 150
plain_loop --bf16 120
echo "== 4. local swarm vs train-ref, 125m bf16"
skip local || local_swarm true 180
train_ref 125m true 90
if ! skip fp32; then
  echo "== 5. fp32"
  train_ref 350m false 150
  plain_loop "" 120
  train_ref 125m false 90
fi

python3 - "$figures" "$res/gpu-figures.json" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{")]
json.dump(rows, open(sys.argv[2], "w"), indent=2)
for r in rows:
    print(json.dumps({k: v for k, v in r.items() if k != "tail"}))
PY
# Logs and progress only (no checkpoints: hundreds of MiB).
(cd "$work" && find . \( -name '*.out' -o -name '*.err' -o -name '*.jsonl' -o -name '*.log' \) \
   -size -4M -print0 | tar czf "$res/gpu-logs.tar.gz" --null -T -) 2>/dev/null
echo "gpu-check: done in $((SECONDS - start_s)) s"
