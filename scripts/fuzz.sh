#!/usr/bin/env bash
# Runs the cargo-fuzz target for a bounded time (docs/FUZZING.md):
#
#   scripts/fuzz.sh [SECONDS]      (default 30; FUZZ_TARGET picks the target)
#
# Installs cargo-fuzz from crates.io when it is missing. Uses the nightly
# toolchain when there is one; otherwise the stable one with RUSTC_BOOTSTRAP=1,
# which accepts the -Z sanitizer flags cargo-fuzz passes.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-30}"
target="${FUZZ_TARGET:-api_sequence}"

command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked

if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  fuzz=(cargo +nightly fuzz)
else
  echo "fuzz.sh: no nightly toolchain; using stable with RUSTC_BOOTSTRAP=1"
  export RUSTC_BOOTSTRAP=1
  fuzz=(cargo fuzz)
fi

"${fuzz[@]}" build "$target"
# -rss_limit_mb: ASan's quarantine makes RSS grow without a leak.
"${fuzz[@]}" run "$target" -- -max_total_time="$seconds" -rss_limit_mb=4096 -print_final_stats=1
