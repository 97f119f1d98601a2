#!/usr/bin/env bash
# The CUDA build: compiles and links SkipSwarm against the libtorch inside a
# PyPI `torch` wheel (default 2.11.0+cu130, the GPU machine's version) and
# the local CUDA toolkit. Nothing here needs a GPU; the binaries it makes
# run on a machine whose torch/lib and nvidia/*/lib are on LD_LIBRARY_PATH
# (tests/gpu/gpu-check.sh).
#
#   bash tools/cuda-build.sh [extra bazel targets or flags]
#
# Environment (all optional):
#   TORCH_VERSION    wheel version to use (2.11.0)
#   TORCH_WHEEL_DIR  where the wheel is looked for / downloaded
#                    (~/.cache/skipswarm/wheels)
#   LIBTORCH_DIR     where it is unpacked (~/.cache/skipswarm/torch-$TORCH_VERSION)
#   CUDA_HOME        the CUDA toolkit (the folder above `nvcc`'s bin/)
#
# Steps: `pip download --no-deps` the wheel if it is missing (~530 MB), unpack
# its include/ and lib/ (the wheel's bundled protobuf headers are moved
# aside: ours are Debian's), write third_party/libtorch_ext.bazelrc (which
# .bazelrc imports for --config=torch_ext) and build //cli:skipswarm plus
# the GPU tests. Bazel itself stays offline.
set -euo pipefail
cd "$(dirname "$0")/.."

TORCH_VERSION="${TORCH_VERSION:-2.11.0}"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/skipswarm"
TORCH_WHEEL_DIR="${TORCH_WHEEL_DIR:-$CACHE/wheels}"
LIBTORCH_DIR="${LIBTORCH_DIR:-$CACHE/torch-$TORCH_VERSION}"

if [ -z "${CUDA_HOME:-}" ]; then
  nvcc_path="$(command -v nvcc || true)"
  if [ -z "$nvcc_path" ]; then
    echo "cuda-build: nvcc is not on PATH; set CUDA_HOME to the CUDA toolkit" >&2
    exit 1
  fi
  CUDA_HOME="$(dirname "$(dirname "$(readlink -f "$nvcc_path")")")"
fi
CUDA_LIB=""
for d in "$CUDA_HOME/lib64" "$CUDA_HOME/lib" "$CUDA_HOME/targets/x86_64-linux/lib"; do
  if [ -e "$d/libcudart.so" ] || ls "$d"/libcudart.so.* >/dev/null 2>&1; then
    CUDA_LIB="$(readlink -f "$d")"
    break
  fi
done
if [ -z "$CUDA_LIB" ]; then
  echo "cuda-build: no libcudart under $CUDA_HOME" >&2
  exit 1
fi

wheel="$(ls "$TORCH_WHEEL_DIR"/torch-"$TORCH_VERSION"-*.whl 2>/dev/null | head -1 || true)"
if [ ! -f "$LIBTORCH_DIR/.unpacked" ]; then
  if [ -z "$wheel" ]; then
    mkdir -p "$TORCH_WHEEL_DIR"
    echo "cuda-build: downloading torch==$TORCH_VERSION (~530 MB) into $TORCH_WHEEL_DIR"
    python3 -m pip download --no-deps --only-binary=:all: -d "$TORCH_WHEEL_DIR" \
      "torch==$TORCH_VERSION"
    wheel="$(ls "$TORCH_WHEEL_DIR"/torch-"$TORCH_VERSION"-*.whl | head -1)"
  fi
  echo "cuda-build: unpacking $wheel into $LIBTORCH_DIR"
  tmp="$LIBTORCH_DIR.partial"
  rm -rf "$tmp"
  mkdir -p "$tmp"
  python3 - "$wheel" "$tmp" <<'EOF'
import sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist()
             if n.startswith(("torch/include/", "torch/lib/")) or n == "torch/version.py"]
    z.extractall(out, names)
EOF
  mv "$tmp/torch/include/google" "$tmp/torch/include.bundled-google" 2>/dev/null || true
  rm -rf "$LIBTORCH_DIR"
  mv "$tmp/torch" "$LIBTORCH_DIR"
  rm -rf "$tmp"
  touch "$LIBTORCH_DIR/.unpacked"
fi
# --override_repository makes the folder a local_repository: it needs its
# own WORKSPACE and BUILD (the same BUILD as the stub's).
touch "$LIBTORCH_DIR/WORKSPACE"
cp third_party/libtorch_ext.BUILD "$LIBTORCH_DIR/BUILD.bazel"
grep -h "__version__" "$LIBTORCH_DIR/version.py" || true

cat > third_party/libtorch_ext.bazelrc <<EOF
# Written by tools/cuda-build.sh; not in git.
build:torch_ext --override_repository=libtorch_ext=$LIBTORCH_DIR
build:torch_ext --linkopt=-L$LIBTORCH_DIR/lib --linkopt=-Wl,-rpath,$LIBTORCH_DIR/lib
build:torch_ext --linkopt=-L$CUDA_LIB --linkopt=-Wl,-rpath-link,$CUDA_LIB
EOF

targets=(//cli:skipswarm //tests/gpu:all)
start=$(date +%s)
bazel build --config=torch_ext "${targets[@]}" "$@"
end=$(date +%s)
echo "cuda-build: built ${targets[*]} against $LIBTORCH_DIR in $((end - start)) s"
