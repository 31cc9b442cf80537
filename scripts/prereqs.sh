#!/usr/bin/env bash
# Checks what a command of the README needs before it builds anything:
#
#   scripts/prereqs.sh demo       scripts/demo-run.sh: cargo and a C compiler
#   scripts/prereqs.sh test-all   scripts/test-all.sh: everything its tests use
#
# Prints one line per missing tool, naming it and how to install it (Debian or
# Ubuntu package names, as .ci/run installs them), and exits 1; exits 0 when
# nothing is missing. Takes well under a second.
set -uo pipefail

for_what=${1:-test-all}
case "$for_what" in
  demo | test-all) ;;
  *)
    echo "usage: $0 demo|test-all" >&2
    exit 2
    ;;
esac

missing=0
miss() {
  echo "missing: $1: $2" >&2
  missing=$((missing + 1))
}
have() {
  command -v "$1" >/dev/null 2>&1
}
# True when version $1 (x.y[.z...]) is at least $2 (x.y).
at_least() {
  local IFS=.
  local -a v=($1) w=($2)
  ((${v[0]:-0} > ${w[0]} || (${v[0]:-0} == ${w[0]} && ${v[1]:-0} >= ${w[1]})))
}

rustup_hint="install Rust 1.80 or newer: curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh"
if ! have cargo || ! have rustc; then
  miss "cargo (Rust >= 1.80)" "$rustup_hint"
else
  rust=$(rustc --version 2>/dev/null | awk '{print $2}')
  at_least "${rust:-0.0}" 1.80 || miss "Rust >= 1.80 (found ${rust:-none})" "rustup update stable"
fi
have cc || miss "a C compiler (cc)" "apt-get install gcc"

if [ "$for_what" = test-all ]; then
  have c++ || miss "a C++ compiler (c++)" "apt-get install g++"
  if ! have cmake || ! have ctest; then
    miss "cmake (>= 3.16)" "apt-get install cmake"
  else
    cmake_version=$(cmake --version 2>/dev/null | awk 'NR == 1 {print $3}')
    at_least "${cmake_version:-0.0}" 3.16 ||
      miss "cmake >= 3.16 (found ${cmake_version:-none})" "pip install cmake, or a newer distribution package"
  fi
  have pkg-config || miss "pkg-config" "apt-get install pkg-config"
  have git || miss "git" "apt-get install git"
  have nm || miss "nm" "apt-get install binutils"
  have readelf || miss "readelf" "apt-get install binutils"
  have valgrind || miss "valgrind" "apt-get install valgrind"
  if ! have python3; then
    miss "python3 (>= 3.9)" "apt-get install python3 python3-dev python3-venv"
  else
    # One interpreter start (a version manager's shim can take a second):
    # prints what is lacking. The extension module of tests/dlopen_runtime.rs
    # is built with python3-config's flags against Python.h.
    lacking=$(python3 - 2>/dev/null <<'PY'
import os, platform, sys, sysconfig
if sys.version_info < (3, 9):
    print("old", platform.python_version())
if not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")):
    print("headers")
try:
    import ensurepip, venv  # noqa: F401
except ImportError:
    print("venv")
PY
    ) || lacking="headers venv"
    have python3-config || lacking="$lacking headers"
    old=$(sed -n 's/^old //p' <<<"$lacking")
    [ -z "$old" ] || miss "python3 >= 3.9 (found $old)" "apt-get install python3"
    case "$lacking" in *headers*) miss "Python headers (python3-config, Python.h)" "apt-get install python3-dev" ;; esac
    case "$lacking" in *venv*) miss "python3 venv and ensurepip" "apt-get install python3-venv" ;; esac
  fi
  # The page tests (tests/viz_browser.rs) open the memory page in headless
  # Chromium; without it they skip, unless CI is set, where they fail.
  if ! have chromium && ! have chromium-browser && ! have google-chrome; then
    if [ -n "${CI:-}" ]; then
      miss "chromium (CI is set: the page tests require it)" "apt-get install chromium"
    else
      echo "note: no Chromium: the page tests (tests/viz_browser.rs) will skip; apt-get install chromium to run them" >&2
    fi
  fi
fi

[ "$missing" -eq 0 ]
