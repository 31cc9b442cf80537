#!/usr/bin/env bash
# The loom models: the lock-free table (tests/loom_registry.rs) and the
# owner word's biased ownership (tests/loom_owner_word.rs), bounded so that
# together they run in about a minute on 2 cores once built.
# Its own target directory keeps the --cfg loom build from evicting the
# normal one.
set -euo pipefail
cd "$(dirname "$0")/.."

RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-3}" \
  CARGO_TARGET_DIR=target/loom \
  cargo test --release --test loom_registry -- --nocapture
