#!/usr/bin/env bash
# Memory and UB checks of what ctest runs from c_examples/: every test there
# is built with -fsanitize=address,undefined and run; every example registered
# with aclalloc_example() (the C/C++ examples, the shared conformance suite,
# whatever is added that way) is also checked for the sanitizer runtimes with
# nm, and every ctest that runs a program (aclalloc_example()'s, and the
# -lascendcl and environment tests registered by hand with
# ACLALLOC_TEST_WRAPPER) runs it under valgrind memcheck. Any report fails.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release
# The library with its test hooks, for c_examples/dead_worker.c (the builds
# below use existing libraries: -DACLALLOC_CARGO_BUILD=OFF).
cargo build --release --lib --features test-hooks --target-dir target/test-hooks

# The binaries of every example registered with aclalloc_example().
executables() {
  cat "$1"/examples/*
}

echo "== AddressSanitizer + UndefinedBehaviorSanitizer"
asan=build/c_examples-asan
cmake -S c_examples -B "$asan" -DCMAKE_BUILD_TYPE=Debug -DACLALLOC_CARGO_BUILD=OFF \
  -DACLALLOC_SANITIZE=ON >/dev/null
cmake --build "$asan" -j 2 >/dev/null
count=0
for exe in $(executables "$asan"); do
  # Prove the sanitizers are really in each binary, not just asked for.
  symbols="$(nm "$exe")"
  grep -q '__asan_init' <<<"$symbols" || { echo "$exe: no __asan_init, ASan is not linked" >&2; exit 1; }
  grep -q '__ubsan_handle_' <<<"$symbols" || { echo "$exe: no __ubsan_handle_*, UBSan is not linked" >&2; exit 1; }
  echo "$(basename "$exe"): __asan_init and __ubsan_handle_* linked"
  count=$((count + 1))
done
[ "$count" -gt 0 ] || { echo "no examples found" >&2; exit 1; }
echo "sanitize: $count example binaries carry ASan and UBSan"
# Each pass's ctest output, for the tally at the end (what ran, what not).
asan_log="$asan/sanitize-ctest.log"
ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1" \
UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" \
  ctest --test-dir "$asan" --output-on-failure | tee "$asan_log"

echo "== valgrind memcheck"
# --fair-sched=yes: valgrind runs one thread at a time, and its default lock
# lets a thread that spins (a kernel waiting for another stream's kernel)
# take the CPU back again and again, starving the thread it waits for.
memcheck=build/c_examples-valgrind
cmake -S c_examples -B "$memcheck" -DCMAKE_BUILD_TYPE=Debug -DACLALLOC_CARGO_BUILD=OFF \
  "-DACLALLOC_TEST_WRAPPER=valgrind;--fair-sched=yes;--error-exitcode=1;--leak-check=full;--errors-for-leak-kinds=definite;--track-origins=yes" \
  >/dev/null
cmake --build "$memcheck" -j 2 >/dev/null
# A test added with a plain add_test would silently skip valgrind: refuse it.
# Only ascendcl_needed (readelf on the binary) runs no code of ours.
unwrapped="$(ctest --test-dir "$memcheck" -N -V | grep 'Test command:' | grep -v valgrind | grep -v readelf || true)"
if [ -n "$unwrapped" ]; then
  echo "tests that do not run under valgrind (use \${ACLALLOC_TEST_WRAPPER}):" >&2
  echo "$unwrapped" >&2
  exit 1
fi
memcheck_log="$memcheck/sanitize-ctest.log"
ctest --test-dir "$memcheck" --output-on-failure | tee "$memcheck_log"

# Every ctest above passed (a failure ends the script first). What ran is
# ctest's own count ("... out of N": disabled tests are not in it); the
# disabled ones are named, so a skipped test is never counted as passed.
ran_in() { sed -n 's/.*tests failed out of \([0-9][0-9]*\).*/\1/p' "$1" | tail -n 1; }
disabled_in() {
  local names
  names=$(sed -n 's/^[[:space:]]*[0-9][0-9]* - \(.*\) (Disabled)$/\1/p' "$1" | tr '\n' ' ')
  echo "${names:-none}"
}
asan_ran=$(ran_in "$asan_log")
memcheck_ran=$(ran_in "$memcheck_log")
echo "sanitize: ASan+UBSan: $asan_ran tests passed; disabled: $(disabled_in "$asan_log")"
echo "sanitize: valgrind memcheck: $memcheck_ran tests passed; disabled: $(disabled_in "$memcheck_log")"
echo "sanitize: $(( asan_ran + memcheck_ran )) passed, 0 failed"
