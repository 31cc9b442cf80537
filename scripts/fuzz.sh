#!/usr/bin/env bash
# Runs the cargo-fuzz targets for a bounded total time (docs/FUZZING.md):
#
#   scripts/fuzz.sh [SECONDS]      (default 30, shared by the targets)
#
# Every target in fuzz/Cargo.toml gets an equal share of SECONDS (at least
# 5 s each); FUZZ_TARGET=name runs that one target for all of it. Installs
# cargo-fuzz from crates.io when it is missing. Uses the nightly toolchain
# when there is one; otherwise the stable one with RUSTC_BOOTSTRAP=1, which
# accepts the -Z sanitizer flags cargo-fuzz passes.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-30}"
if [[ -n "${FUZZ_TARGET:-}" ]]; then
  targets=("$FUZZ_TARGET")
else
  targets=(api_sequence pool_sequence runtime_sequence pluggable_sequence)
fi

command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked

if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  fuzz=(cargo +nightly fuzz)
else
  echo "fuzz.sh: no nightly toolchain; using stable with RUSTC_BOOTSTRAP=1"
  export RUSTC_BOOTSTRAP=1
  fuzz=(cargo fuzz)
fi

# LeakSanitizer's suppressions: glibc's per-thread list of thread_local
# destructors, seen as leaked while a library thread exits (fuzz/lsan.supp).
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$PWD/fuzz/lsan.supp"

share=$((seconds / ${#targets[@]}))
((share >= 5)) || share=5

"${fuzz[@]}" build
for target in "${targets[@]}"; do
  # -rss_limit_mb: ASan's quarantine makes RSS grow without a leak.
  # -timeout: a unit running this long is a hang (a finding), and must not
  # hold CI for libFuzzer's default 20 minutes.
  flags=(-max_total_time="$share" -rss_limit_mb=4096 -timeout=20 -print_final_stats=1)
  env=()
  # Inputs that once failed (fuzz/regressions/TARGET, checked in) run
  # first, every time, beside the corpus the runs grow (not checked in).
  corpora=("fuzz/corpus/$target")
  mkdir -p "${corpora[0]}"
  [[ -d "fuzz/regressions/$target" ]] && corpora+=("fuzz/regressions/$target")
  echo "fuzz.sh: $target for ${share} s"
  env "${env[@]}" "${fuzz[@]}" run "$target" "${corpora[@]}" -- "${flags[@]}"
done
