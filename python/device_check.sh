#!/usr/bin/env bash
# The PyTorch package on a GPU machine, offline: a fresh virtual environment over the system's torch, the
# package built and installed into it, its tests, the eager timings, and an editable install. Logs and JSON
# go to OUT. Steps (default: all, in this order; each can also run alone, e.g. to keep each command short):
#   install    a fresh venv (python3 -m venv --system-site-packages), then
#              pip install --no-index --no-build-isolation --no-deps ./python (TORCH_CUDA_ARCH_LIST=9.0, MAX_JOBS=16)
#   test       pytest python/tests/test_errors.py -v first (were an error path to crash the process, this log names
#              the case), then the whole of python/tests -q, the error cases last
#   eager      python/benchmarks/eager.py for bf16, then for fp32 (eager_bf16.json, eager_fp32.json), against
#              bench/results/summary.json's one-call host times when the tree has them
#   editable   pip install -e ./python into a second fresh venv; the import resolves to the checkout; a smoke test
# Usage: bash python/device_check.sh OUT [install] [test] [eager] [eager-bf16] [eager-fp32] [editable]
# RSS_TORCH_VENV (default build-torch/venv, ignored by git) is where the venv lives between steps.
set -uo pipefail
case "${1-}" in -h | --help) sed -n '2,/^set /{/^set /d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;; esac  # this header
cd "$(dirname "${BASH_SOURCE[0]}")/.."
[ $# -ge 1 ] || { echo "usage: bash python/device_check.sh OUT [install] [test] [eager] [editable]" >&2; exit 2; }
out=$(mkdir -p "$1" && cd "$1" && pwd)
shift
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(install test eager editable)
venv=${RSS_TORCH_VENV:-build-torch/venv}
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0} MAX_JOBS=${MAX_JOBS:-16}
command -v nvcc >/dev/null 2>&1 || export PATH="/usr/local/cuda/bin:$PATH"
status=0

note() { echo "== $* ($(date +%T))" | tee -a "$out/steps.log"; }
# Runs a command with its output in a log (and the log's tail on the terminal); records its exit code.
logged() {
  local log=$1
  shift
  "$@" > "$out/$log" 2>&1
  local rc=$?
  tail -n 25 "$out/$log"
  note "$log: exit $rc"
  [ "$rc" -eq 0 ] || status=1
  return "$rc"
}

fresh_venv() {
  rm -rf "$1"
  mkdir -p "$(dirname "$1")"
  python3 -m venv --system-site-packages "$1" || return 1
  # --system-site-packages reaches the base interpreter's packages; where python3 is itself a virtual environment
  # (its torch in that environment's site-packages), the new one would not see torch. A .pth file then adds
  # python3's own package folders after the new environment's, so the package builds against the torch it runs.
  if ! "$1/bin/python" -c 'import torch' 2>/dev/null && python3 -c 'import torch' 2>/dev/null; then
    local site
    site=$("$1/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') || return 1
    python3 -c 'import site, sys; print("\n".join(p for p in site.getsitepackages() if p.startswith(sys.prefix)))' \
      > "$site/python3-site-packages.pth" || return 1
    "$1/bin/python" -c 'import torch' || { echo "fresh_venv: $1 still has no torch" >&2; return 1; }
    echo "fresh_venv: $1 sees python3's torch through $site/python3-site-packages.pth"
  fi
}

install() {
  note "install: fresh venv $venv, TORCH_CUDA_ARCH_LIST=$TORCH_CUDA_ARCH_LIST MAX_JOBS=$MAX_JOBS"
  {
    nvidia-smi -L
    nvcc --version | tail -n 2
    python3 -c "import torch, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda)"
  } > "$out/environment.txt" 2>&1
  cat "$out/environment.txt"
  fresh_venv "$venv" || { note "install: venv failed"; status=1; return 1; }
  logged install.log bash -c "time '$venv/bin/python' -m pip install -v --no-index --no-build-isolation --no-deps ./python" || return 1
  logged import.log "$venv/bin/python" -c "
import glob, os, shutil, subprocess, torch, rss_torch
so = glob.glob(os.path.join(os.path.dirname(rss_torch.__file__), '_C*.so'))[0]
print('rss_torch', rss_torch.__version__, 'from', rss_torch.__file__)
tool = shutil.which('cuobjdump')
print(subprocess.run([tool, '--list-elf', so], capture_output=True, text=True).stdout.strip() if tool else 'no cuobjdump')
x = torch.randn(4, 1000, device='cuda', requires_grad=True)
y = rss_torch.rms_scaled_softmax(x)
y.backward(torch.ones_like(y))
print('smoke: row sums', y.sum(-1).tolist(), 'grad finite', bool(torch.isfinite(x.grad).all()))
"
}

run_tests() {
  [ -x "$venv/bin/python" ] || { note "test: no venv at $venv: run the install step first"; status=1; return 1; }
  logged pytest_errors.log "$venv/bin/python" -X faulthandler -m pytest -v -p no:cacheprovider python/tests/test_errors.py
  # The whole suite with the error cases last, after torch.compile and CUDA Graphs have run in the process (the
  # order in which the earlier design crashed).
  logged pytest.log "$venv/bin/python" -X faulthandler -m pytest -q -rs -p no:cacheprovider \
    --junitxml="$out/pytest.xml" python/tests/test_rss_torch.py python/tests/test_pointer_checks.py python/tests/test_errors.py
}

eager() {  # $1: dtype
  [ -x "$venv/bin/python" ] || { note "eager: no venv at $venv: run the install step first"; status=1; return 1; }
  local cpp=()
  [ -f bench/results/summary.json ] && cpp=(--cpp-json bench/results/summary.json)
  logged "eager_$1.log" "$venv/bin/python" python/benchmarks/eager.py --dtypes "$1" "${cpp[@]}" --out "$out/eager_$1.json"
}

editable() {
  local ev=${venv}-editable
  note "editable: fresh venv $ev, pip install -e ./python"
  fresh_venv "$ev" || { status=1; return 1; }
  logged editable.log bash -c "
'$ev/bin/python' -m pip install --no-index --no-build-isolation --no-deps -e ./python &&
cd /tmp && '$ev/bin/python' -c \"
import os, torch, rss_torch
here = os.path.realpath(rss_torch.__file__)
print('rss_torch from', here)
assert here == os.path.realpath('$PWD/python/rss_torch/__init__.py'), 'the editable install does not resolve to the checkout'
x = torch.randn(3, 5000, device='cuda', dtype=torch.bfloat16, requires_grad=True)
y = rss_torch.rms_scaled_softmax(x)
y.backward(torch.ones_like(y))
print('smoke: ok', tuple(x.grad.shape))
\""
}

for step in "${steps[@]}"; do
  case "$step" in
    install) install ;;
    test) run_tests ;;
    eager) eager bf16; eager fp32 ;;
    eager-bf16) eager bf16 ;;
    eager-fp32) eager fp32 ;;
    eager-fp16) eager fp16 ;;
    editable) editable ;;
    *) echo "device_check.sh: unknown step '$step'" >&2; exit 2 ;;
  esac
done
note "done: ${steps[*]}: $([ "$status" -eq 0 ] && echo all passed || echo something failed, see the logs)"
exit "$status"
