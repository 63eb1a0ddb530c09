# Sourced by scripts/test.sh and scripts/bench.sh: puts nvcc on PATH and checks what the build needs.
# As root it installs what is missing (Debian packages with apt-get, Python packages with pip); as
# another user it names what to install and stops with exit code 1.
# Usage: source scripts/setup.sh [catch2] [benchmark]   (the tests need Catch2, the bench Google Benchmark;
# both need CMake 3.21+, a C++17 compiler, the CUDA toolkit 12.8+, python3 with the packages of requirements.txt)

case "${1-}" in  # -h, --help (sourced or run): this text
  -h | --help) sed -n '1,/^$/{/^$/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; return 0 2>/dev/null || exit 0 ;;
esac
# A failure stops the sourcing script (return from the source), or this one where it was run: rss_fail
# only prints, and each call is followed by the return (a return inside rss_fail would only leave rss_fail).
rss_fail() {
  echo "scripts/setup.sh: $*" >&2
}

if ! command -v nvcc >/dev/null 2>&1; then
  if [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH="/usr/local/cuda/bin:$PATH"
  else
    rss_fail "nvcc is neither on PATH nor in /usr/local/cuda/bin: install the CUDA toolkit (12.8 or newer) and put its bin/ on PATH"
    return 1 2>/dev/null || exit 1
  fi
fi
export CUDACXX="${CUDACXX:-$(command -v nvcc)}"
command -v cmake >/dev/null 2>&1 || { rss_fail "cmake not found: install CMake 3.21 or newer (Debian: apt-get install cmake; or python3 -m pip install cmake)"; return 1 2>/dev/null || exit 1; }
command -v python3 >/dev/null 2>&1 || { rss_fail "python3 not found (Debian: apt-get install python3)"; return 1 2>/dev/null || exit 1; }
echo "nvcc: $CUDACXX ($(nvcc --version | grep -o 'release [0-9.]*')); $(cmake --version | head -n 1); python3: $(python3 --version 2>&1)"

rss_have_header() {  # a Debian package, or the header where a source install puts it
  dpkg -s "$1" >/dev/null 2>&1 || [ -f "/usr/include/$2" ] || [ -f "/usr/local/include/$2" ]
}
rss_apt=()
for rss_want in "$@"; do
  case "$rss_want" in
    catch2) rss_have_header catch2 catch2/catch.hpp || rss_apt+=(catch2) ;;
    benchmark) rss_have_header libbenchmark-dev benchmark/benchmark.h || rss_apt+=(libbenchmark-dev) ;;
    *) rss_fail "unknown component '$rss_want' (known: catch2 benchmark)"; return 1 2>/dev/null || exit 1 ;;
  esac
done
# The Python packages: requirements.txt (one requirement a line, its name also the module it imports).
rss_requirements="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/requirements.txt"
[ -f "$rss_requirements" ] || { rss_fail "$rss_requirements not found"; return 1 2>/dev/null || exit 1; }
rss_pip=()    # the missing requirements, as written there (pip installs them)
rss_names=()  # their names (import check, Debian's python3-NAME)
while read -r rss_req || [ -n "$rss_req" ]; do  # a last line without a newline too
  rss_req=${rss_req%%#*}
  rss_req=${rss_req//[[:space:]]/}
  [ -n "$rss_req" ] || continue
  rss_name=${rss_req%%[<>=!~;[]*}
  python3 -c "import $rss_name" >/dev/null 2>&1 || { rss_pip+=("$rss_req"); rss_names+=("$rss_name"); }
done < "$rss_requirements"

if [ "${#rss_apt[@]}" -gt 0 ] || [ "${#rss_pip[@]}" -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    {
      echo "scripts/setup.sh: missing, and not root, so not installed here:"
      [ "${#rss_apt[@]}" -eq 0 ] || echo "    Debian packages: ${rss_apt[*]}    ->  sudo apt-get install ${rss_apt[*]}"
      if [ "${#rss_pip[@]}" -gt 0 ]; then
        # pip refuses --user in a virtual environment, and any install into a distribution's python (PEP 668).
        case $(python3 -c 'import os, sys, sysconfig; print("venv" if sys.prefix != sys.base_prefix else "managed"
                 if os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")) else "user")') in
          venv) echo "    Python packages: ${rss_names[*]}    ->  python3 -m pip install -r $rss_requirements" ;;
          managed)
            echo "    Python packages: ${rss_names[*]}    ->  sudo apt-get install ${rss_names[*]/#/python3-}"
            echo "        (or in a virtual environment: python3 -m venv ~/rss-venv && . ~/rss-venv/bin/activate &&"
            echo "         python3 -m pip install -r $rss_requirements)" ;;
          *) echo "    Python packages: ${rss_names[*]}    ->  python3 -m pip install --user -r $rss_requirements" ;;
        esac
      fi
      echo "Install them (or run this as root), then run the command again."
    } >&2
    return 1 2>/dev/null || exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  if [ "${#rss_apt[@]}" -gt 0 ]; then
    echo "apt: installing ${rss_apt[*]}"
    apt-get update -qq && apt-get install -y -qq --no-install-recommends "${rss_apt[@]}"
  fi
  if [ "${#rss_pip[@]}" -gt 0 ]; then
    echo "pip: installing ${rss_pip[*]} (from requirements.txt)"
    # A Debian system python refuses pip (PEP 668) or lacks it: fall back to the distribution's packages.
    PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1 python3 -m pip install -q "${rss_pip[@]}" || {
      echo "pip failed: installing ${rss_names[*]/#/python3-} with apt"
      apt-get update -qq && apt-get install -y -qq --no-install-recommends "${rss_names[@]/#/python3-}"
    }
  fi
fi
unset rss_want rss_req rss_name
