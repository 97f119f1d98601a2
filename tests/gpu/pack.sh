#!/usr/bin/env bash
# Packs what tests/gpu/gpu-check.sh needs on the GPU machine into
# out/gpu/ (git-ignored; carry it with the run): the CUDA build's binaries
# (stripped) and the Debian shared libraries they link that are neither
# glibc's, libtorch's nor CUDA's. Run after tools/cuda-build.sh.
#
#   bash tests/gpu/pack.sh && du -sh out/gpu
set -euo pipefail
cd "$(dirname "$0")/../.."
out=out/gpu
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib" "$out/lib/stdcxx"
for b in cli/skipswarm tests/gpu/cuda_paths_test; do
  src="$(bazel info --config=torch_ext bazel-bin 2>/dev/null)/$b"
  [ -f "$src" ] || { echo "pack: $src missing; run tools/cuda-build.sh" >&2; exit 1; }
  cp "$src" "$out/bin/"
  chmod u+w "$out/bin/$(basename "$b")"
  strip "$out/bin/$(basename "$b")"
done
cp tests/gpu/plain_loop.py tests/gpu/figures.py "$out/" 2>/dev/null || true
# The default training text (the GPU machine has no Debian fortunes).
cp -r /usr/share/games/fortunes "$out/corpus"
# Shared libraries by path, as this machine resolves them.
skip='^(libc|libm|libdl|libpthread|librt|ld-linux.*|libtorch.*|libc10.*|libcuda.*|libcu.*|libnccl.*|libnvshmem.*|libnv.*|libgomp)\.so'
for b in "$out"/bin/*; do
  ldd "$b" | awk '/=> \// {print $1, $3}'
done | sort -u | while read -r name path; do
  if [[ "$name" =~ $skip ]]; then continue; fi
  case "$name" in
    libstdc++.so.*|libgcc_s.so.*) cp -L "$path" "$out/lib/stdcxx/" ;;  # used only if older there
    *) cp -L "$path" "$out/lib/" ;;
  esac
done
du -sh "$out"
