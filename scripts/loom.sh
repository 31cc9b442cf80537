#!/usr/bin/env bash
# The loom models of the one lock-free table (tests/loom_registry.rs),
# bounded so that they run in well under a minute on 2 cores once built.
# Its own target directory keeps the --cfg loom build from evicting the
# normal one.
set -euo pipefail
cd "$(dirname "$0")/.."

RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-3}" \
  CARGO_TARGET_DIR=target/loom \
  cargo test --release --test loom_registry -- --nocapture
