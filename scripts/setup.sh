# Sourced by scripts/test.sh and scripts/bench.sh: puts nvcc on PATH and installs, only when missing,
# what a fresh machine lacks (it has the CUDA toolkit, compilers, CMake and Google Benchmark).
# Usage: source scripts/setup.sh [catch2]   (catch2: the tests need it, the benchmarks do not)

if ! command -v nvcc >/dev/null 2>&1; then
  if [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH="/usr/local/cuda/bin:$PATH"
  else
    echo "nvcc is neither on PATH nor in /usr/local/cuda/bin: install the CUDA toolkit (12.8 or newer)" >&2
    exit 1
  fi
fi
export CUDACXX="${CUDACXX:-$(command -v nvcc)}"
echo "nvcc: $CUDACXX ($(nvcc --version | grep -o 'release [0-9.]*')); $(cmake --version | head -n 1); python3: $(python3 --version 2>&1)"

export DEBIAN_FRONTEND=noninteractive
rss_apt=()
dpkg -s libbenchmark-dev >/dev/null 2>&1 || rss_apt+=(libbenchmark-dev)
if [ "${1:-}" = catch2 ]; then dpkg -s catch2 >/dev/null 2>&1 || rss_apt+=(catch2); fi
if [ "${#rss_apt[@]}" -gt 0 ]; then
  echo "apt: installing ${rss_apt[*]}"
  apt-get update -qq && apt-get install -y -qq --no-install-recommends "${rss_apt[@]}"
fi
if ! python3 -c 'import numpy, matplotlib' >/dev/null 2>&1; then
  echo "pip: installing numpy matplotlib"
  # A Debian system python refuses pip (PEP 668) or lacks it: fall back to the distribution's packages.
  PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1 python3 -m pip install -q numpy matplotlib || {
    echo "pip failed: installing python3-numpy python3-matplotlib with apt"
    apt-get update -qq && apt-get install -y -qq --no-install-recommends python3-numpy python3-matplotlib
  }
fi
