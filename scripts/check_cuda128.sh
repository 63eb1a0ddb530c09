#!/usr/bin/env bash
# Compiles every header under include/ (each alone) and every test, example and bench source against the
# CUDA Toolkit 12.8 headers: the CUDA runtime headers and CCCL 2.7 from PyPI (nvidia-cuda-runtime-cu12 and
# nvidia-cuda-cccl-cu12 12.8.90), with the installed nvcc's front end, syntax only, for sm_90. PyPI has no
# 12.8 nvcc driver, so this proves the sources compile against 12.8's runtime API and CCCL 2.7 (no CCCL-3-only
# API), not that 12.8's compiler builds them; nvcc's own crt/ headers still come from the installed toolkit.
# Usage: scripts/check_cuda128.sh [WORK_DIR]   (WORK_DIR keeps the downloaded headers; default a temp dir)
set -euo pipefail
case "${1-}" in
  -h | --help) sed -n '2,/^set /{/^set /d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
  -*) echo "scripts/check_cuda128.sh: unknown option '$1' (it takes a WORK_DIR; --help says what it does)" >&2; exit 2 ;;
esac
cd "$(dirname "${BASH_SOURCE[0]}")/.."
command -v nvcc >/dev/null 2>&1 || export PATH="/usr/local/cuda/bin:$PATH"
work=${1:-$(mktemp -d "${TMPDIR:-/tmp}/rss-cuda128.XXXXXX")}
mkdir -p "$work/tu"
site="$work/site"
if [ ! -d "$site/nvidia/cuda_cccl/include" ] || [ ! -d "$site/nvidia/cuda_runtime/include" ]; then
  PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1 python3 -m pip install -q --target "$site" \
    nvidia-cuda-runtime-cu12==12.8.90 nvidia-cuda-cccl-cu12==12.8.90
fi
# -I, not -isystem: nvcc's profile adds the installed toolkit's include folder with -I, which is searched
# before any -isystem; a user -I comes first. The probe below proves which headers win.
export RSS_CUDA128_FLAGS="-std=c++17 -arch=sm_90 -I$site/nvidia/cuda_cccl/include -I$site/nvidia/cuda_runtime/include"

cat > "$work/tu/probe.cu" <<'EOF'
#include <cuda_runtime.h>
#include <cuda/version>
#include <cub/version.cuh>
#define RSS_STR2(x) #x
#define RSS_STR(x) RSS_STR2(x)
#pragma message("CUDART_VERSION=" RSS_STR(CUDART_VERSION) " CCCL_VERSION=" RSS_STR(CCCL_VERSION))
static_assert(CUDART_VERSION == 12080, "the CUDA runtime headers are not 12.8's");
static_assert(CCCL_MAJOR_VERSION == 2 && CCCL_MINOR_VERSION == 7, "CCCL is not 2.7");
int main() { return 0; }
EOF
# shellcheck disable=SC2086
if ! nvcc $RSS_CUDA128_FLAGS -c "$work/tu/probe.cu" -o /dev/null > "$work/probe.log" 2>&1; then
  cat "$work/probe.log" >&2
  echo "the probe did not see the CUDA 12.8 runtime headers and CCCL 2.7" >&2
  exit 1
fi
grep -o 'CUDART_VERSION=[0-9]* CCCL_VERSION=[0-9]*' "$work/probe.log" | head -n 1
echo "nvcc $(nvcc --version | grep -o 'release [0-9.]*') front end with the headers of nvidia-cuda-runtime-cu12 and nvidia-cuda-cccl-cu12 12.8.90"

# One translation unit per header, then the sources themselves.
have_nccl=yes
echo '#include <nccl.h>' | nvcc -x cu -E - -o /dev/null >/dev/null 2>&1 || have_nccl=no
[ "$have_nccl" = yes ] || echo "skip  include/rss/sharded/ (needs nccl.h, not found)"
list="$work/tu/list"
: > "$list"
while IFS= read -r header; do
  tu="$work/tu/$(echo "${header#include/}" | tr '/.' '__').cu"
  printf '#include "%s"\n' "${header#include/}" > "$tu"
  echo "$tu" >> "$list"
done < <(find include -type f \( -name '*.hpp' -o -name '*.cuh' -o -name '*.h' \) | sort |
         { if [ "$have_nccl" = yes ]; then cat; else grep -v '^include/rss/sharded/'; fi; })
headers=$(wc -l < "$list")
# Sources that need headers this check does not provide are named and skipped: PyTorch extensions always,
# the NCCL code (rows sharded over GPUs) where no nccl.h is found.
while IFS= read -r src; do
  if grep -q -E '#include <(torch|ATen|pybind11)/' "$src"; then
    echo "skip  $src (needs PyTorch's headers)"
  elif [ "$have_nccl" = no ] && grep -q -E '#include .*(nccl|sharded)' "$src"; then
    echo "skip  $src (needs nccl.h, not found)"
  else
    echo "$src" >> "$list"
  fi
done < <(find tests examples bench -type f \( -name '*.cu' -o -name '*.cpp' \) | sort)

check_one() {
  local src=$1 start=$SECONDS out label=$1
  case "$src" in */tu/*) label="include/$(sed -n 's/^#include "\(.*\)"$/\1/p' "$src") (alone)" ;; esac
  local lang="-x cu -fdevice-syntax-only"
  case "$src" in *.cpp) lang="-x c++" ;; esac  # as the build compiles them: plain C++
  # shellcheck disable=SC2086
  if out=$(nvcc $RSS_CUDA128_FLAGS -Iinclude -Itests -I. -Ibench $lang -Xcompiler -fsyntax-only \
             -c "$src" -o /dev/null 2>&1); then
    echo "ok    $label ($((SECONDS - start)) s)"
  else
    printf 'FAIL  %s\n%s\n' "$label" "$out"
    return 1
  fi
}
export -f check_one
rc=0
xargs -P "$(nproc)" -I{} bash -c 'check_one "$@"' _ {} < "$list" || rc=$?
total=$(wc -l < "$list")
if [ "$rc" -ne 0 ]; then
  echo "CUDA 12.8 check FAILED: see FAIL above ($headers headers and $((total - headers)) sources checked)" >&2
  exit 1
fi
echo "CUDA 12.8 check passed: $headers headers alone and $((total - headers)) sources (tests, examples, bench)"
