#!/usr/bin/env bash
# The Python package: a fresh virtual environment under build/, `pip install .`
# (which builds libaclalloc with cargo and packs it into the wheel), pytest and
# ruff from PyPI, then ruff format/check and the pytest suite (tests/python,
# which also runs python_examples/).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
VENV=build/pyvenv
start=$(date +%s)
if [ ! -x "$VENV/bin/python" ]; then
  rm -rf "$VENV"
  "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q --disable-pip-version-check pytest ruff
# Not --force-reinstall: an unchanged library is not rebuilt by cargo, but the
# package files are always replaced.
"$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps --force-reinstall .

"$VENV/bin/ruff" format --check .
"$VENV/bin/ruff" check .
# Run from outside the source tree, so `import aclalloc` is the installed wheel.
(cd build && ../"$VENV"/bin/python -m pytest -q -p no:cacheprovider ../tests/python)
echo "python-test.sh: $(( $(date +%s) - start )) s"
