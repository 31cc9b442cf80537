#!/usr/bin/env bash
# Builds CANN's runtime samples with their own CMake against aclalloc laid
# out as a CANN install (scripts/cann-prefix.sh) and runs each RUNS times,
# comparing what it prints with the output its README documents.
#
#   scripts/cann-samples.sh SOURCE [RUNS] [SAMPLE...]
#
# SOURCE is a checkout of hicann/runtime (a directory holding example/), or
# anything `git clone` accepts (a URL, a local repository), cloned into the
# scratch directory. RUNS defaults to 20. SAMPLE names paths under example/
# (default: the samples that need neither notifies nor IPC, listed below).
# The AI Core kernels are replaced by host stand-ins of the same effect
# (scripts/cann-samples/host_kernels.cpp for example/kernel_func's kernels,
# and scripts/cann-samples/kernels/ for a sample's own, built by the
# prefix's ascendc_library(); the kernel binaries a sample loads by file name, from
# the stand-ins in scripts/cann-samples/fatbin/, built by its
# ascendc_fatbin_library() and installed where the sample loads them, as
# its run.sh does with `cmake --install`), and the operator library calls
# (aclnnAdd, aclnnMul, tensors, scalars) by those of
# scripts/cann-samples/aclnn, which the prefix installs as libopapi.so and
# libnnopbase.so. A sample whose run.sh makes its input with
# scripts/gen_data.py and checks its output with md5sum and
# scripts/verify_result.py gets the same around each run (they need numpy),
# their output after the program's. A sample built as a server and a client
# (memory/12) runs as a pair on a free local port, each compared with its
# own block of the README's output.
#
# One line per sample: builds?, runs that exited 0 and printed every
# documented line ("exact"; "shape" when only numbers differ), and the first
# difference. Not run by CI: it needs the samples' sources and cmake.
# ACLALLOC_SAMPLES_DIR keeps the scratch directory (default: a temporary one).
# A sample built as two processes (proc_a and proc_b: IPC memory, events and
# notifies) runs as its run.sh runs it, both at once; each documented line
# must come from one of them, in that process's order (a kernel's print
# anywhere: it comes out when the runtime flushes it). Every sample sees 8
# devices (ACLALLOC_DEVICE_COUNT, unless set), as the multi-device ones need.
set -uo pipefail
if [ $# -lt 1 ]; then
  sed -n '2,36p' "$0" >&2
  exit 2
fi
root="$(cd "$(dirname "$0")/.." && pwd)"
source_arg="$1"
runs="${2:-20}"
shift $(( $# >= 2 ? 2 : 1 ))
samples=("$@")
if [ ${#samples[@]} -eq 0 ]; then
  samples=(
    0_quickstart/0_hello_cann
    0_quickstart/1_error_handling
    0_quickstart/2_system_info
    1_basic_features/context/0_context_query
    1_basic_features/device/0_device_normal
    1_basic_features/event/0_event_status
    1_basic_features/event/1_event_timestamp
    1_basic_features/stream/0_simple_stream
    1_basic_features/stream/1_stream_with_failure_mode
    1_basic_features/stream/2_multi_stream
    1_basic_features/stream/3_stream_config_query
    1_basic_features/memory/0_h2h_memory_copy
    1_basic_features/memory/1_h2d_sync_memory_copy
    1_basic_features/memory/2_h2d_async_memory_copy
    1_basic_features/memory/3_d2h_sync_memory_copy
    1_basic_features/memory/4_d2h_async_memory_copy
    1_basic_features/memory/5_d2d_sync_memory_copy
    1_basic_features/memory/6_d2d_async_memory_copy
    1_basic_features/memory/9_multistream_sync_memory
    2_advanced_features/kernel/0_launch_kernel
    3_memory_advanced/allocator/0_custom_allocator
    3_memory_advanced/host_register/0_simple_zero_copy
    3_memory_advanced/managed_memory/0_uvm_allocate
    2_advanced_features/model_ri/0_simple_model
    2_advanced_features/model_ri/1_model_update
    2_advanced_features/model_ri/2_model_switch
    2_advanced_features/model_ri/3_cond_model
    2_advanced_features/model_ri/4_model_sync_external
  )
fi

work="${ACLALLOC_SAMPLES_DIR:-$(mktemp -d)}"
mkdir -p "$work"
if [ -d "$source_arg/example" ]; then
  rm -rf "$work/runtime"
  mkdir -p "$work/runtime"
  cp -R "$source_arg/example" "$work/runtime/"
else
  rm -rf "$work/runtime"
  git clone -q --depth 1 "$source_arg" "$work/runtime" || { echo "cannot clone $source_arg" >&2; exit 2; }
fi
examples="$work/runtime/example"
prefix="$work/prefix"
bash "$root/scripts/cann-prefix.sh" "$prefix" >/dev/null || exit 2
# shellcheck disable=SC1091
source "$prefix/bin/setenv.bash"
export ACLALLOC_HOST_KERNELS="$root/scripts/cann-samples/host_kernels.cpp"
export ACLALLOC_FATBIN_KERNELS="$root/scripts/cann-samples/fatbin"
export ACLALLOC_LIBRARY_KERNELS="$root/scripts/cann-samples/kernels"
export ACLALLOC_DEVICE_COUNT="${ACLALLOC_DEVICE_COUNT:-8}"

# The documented output: the Nth (default: first) fenced block after the
# README's output heading.
documented() { # README [N]
  awk -v want="${2:-1}" '
    /^#+ .*(示例输出|运行结果|输出示例|Output|output)/ { h = 1; next }
    h && /^```/ { if (inb) { if (++n == want) exit; inb = 0; next } inb = 1; next }
    inb && n == want - 1 { print }
  ' "$1" | sed 's/\r$//' | grep -v '^[[:space:]]*$' | grep -v '^\.\.\.'
}
# Drops the documented lines the sample's own scripts print (they are not the
# program's): a line found in a script as it is, or one that matches an
# `echo "..."` of a script, the README's "..." matching anything and each
# shell variable of the echo read as "..." (which matches anything too).
without_script_lines() { # DIR < documented > expected
  perl -e '
    my (@echoes, $all);
    for my $f (glob("$ARGV[0]/*.sh")) {
      open(my $s, "<", $f) or next;
      local $/; my $text = <$s>;
      $all .= $text;
      push @echoes, map { s/\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*/.../gr } ($text =~ /echo\s+"([^"]*)"/g);
    }
    while (my $line = <STDIN>) {
      chomp $line;
      next if defined $all && index($all, $line) >= 0;
      my $re = join "", map { $_ eq "..." ? ".*" : quotemeta } split /(\.\.\.)/, $line;
      next if grep { /^$re$/ } @echoes;
      # And the other way: a shell variable of the echo matches what it printed.
      next if grep {
        my $er = join "", map { $_ eq "..." ? ".*" : quotemeta } split /(\.\.\.)/, $_;
        $line =~ /^$er$/
      } @echoes;
      print "$line\n";
    }' "$1"
}
# A port for a server sample: one no TCP or UDP socket of this machine is
# bound to (as /proc/net lists them; a clash shows as a failed run).
free_port() {
  local port
  for _ in $(seq 50); do
    port=$(( 20000 + RANDOM % 20000 ))
    grep -qi "$(printf ':%04X ' "$port")" /proc/net/tcp /proc/net/tcp6 /proc/net/udp /proc/net/udp6 2>/dev/null ||
      { echo "$port"; return; }
  done
  echo 28888
}
# Does every documented line appear in the output, in order? The README's
# placeholders ("...", "<name>", "8.x.x") match anything; with "shape",
# numbers match any number too. Runs of spaces and commas are not compared
# (the READMEs and the samples' log macros differ in both).
matches() { # expected output [shape]
  perl -e '
    my ($exp, $out, $shape) = @ARGV;
    open(my $o, "<", $out) or exit 2; my @out = <$o>;
    for (@out) { chomp; s/[\s,]+/ /g; }
    open(my $e, "<", $exp) or exit 2;
    my $at = 0;
    while (my $line = <$e>) {
      chomp $line; $line =~ s/[\s,]+/ /g; $line =~ s/^ | $//g;
      my $re = join "", map {
        /^(\.\.\.|<[^>]*>|\d+(\.x)+)$/ ? ".*" :
        ($shape && /^\d+(\.\d+)?$/) ? "[-+]?\\d+(\\.\\d+)?" : quotemeta
      } split /(\.\.\.|<[^>]*>|\d+(?:\.x)+|\d+(?:\.\d+)?)/, $line;
      # The lines md5sum prints ("<hash>  <file>", documented as "... <file>") come
      # in the order of its glob, which the READMEs do not always keep:
      # found anywhere.
      if ($line =~ m{^\.\.\. \S+\.bin$}) {
        next if grep { /^\s*$re\s*$/ } @out;
      }
      # In order: each line is looked for after the one matched before it.
      my $found;
      while ($at < @out) { if ($out[$at++] =~ /^\s*$re\s*$/) { $found = 1; last } }
      next if $found;
      print "$line\n"; exit 1;
    }' "$@"
}

# Does every documented line appear in one of two outputs, in the order of
# the output it appears in? (Two processes interleave freely.)
matches_pair() { # expected output_a output_b [shape]
  perl -e '
    my ($exp, $a, $b, $shape) = @ARGV;
    my @outs;
    for my $f ($a, $b) {
      open(my $o, "<", $f) or exit 2; my @l = <$o>;
      for (@l) { chomp; s/[\s,]+/ /g; }
      push @outs, \@l;
    }
    my @at = (0, 0);
    open(my $e, "<", $exp) or exit 2;
    LINE: while (my $line = <$e>) {
      chomp $line; $line =~ s/[\s,]+/ /g; $line =~ s/^ | $//g;
      my $re = join "", map {
        /^(\.\.\.|<[^>]*>|\d+(\.x)+)$/ ? ".*" :
        ($shape && /^\d+(\.\d+)?$/) ? "[-+]?\\d+(\\.\\d+)?" : quotemeta
      } split /(\.\.\.|<[^>]*>|\d+(?:\.x)+|\d+(?:\.\d+)?)/, $line;
      # A kernel print comes out when the runtime flushes it, not where the
      # kernel was launched: found anywhere in either output.
      if ($line =~ /^(Source|Destination) data/) {
        for my $p (0, 1) { next LINE if grep { /^\s*$re\s*$/ } @{$outs[$p]} }
      }
      for my $p (0, 1) {
        for (my $i = $at[$p]; $i < @{$outs[$p]}; $i++) {
          if ($outs[$p][$i] =~ /^\s*$re\s*$/) { $at[$p] = $i + 1; next LINE }
        }
      }
      print "$line\n"; exit 1;
    }' "$@"
}

printf '%-52s %-7s %-6s %-6s %s\n' sample builds exact shape "first difference"
for s in "${samples[@]}"; do
  dir="$examples/$s"
  if [ ! -f "$dir/CMakeLists.txt" ]; then
    printf '%-52s %-7s\n' "$s" "absent"
    continue
  fi
  rm -rf "$dir/build"
  if ! (cmake -S "$dir" -B "$dir/build" -DASCEND_CANN_PACKAGE_PATH="$ASCEND_HOME_PATH" \
          -DACLALLOC_HOST_KERNELS="$ACLALLOC_HOST_KERNELS" \
          -DACLALLOC_FATBIN_KERNELS="$ACLALLOC_FATBIN_KERNELS" \
          -DACLALLOC_LIBRARY_KERNELS="$ACLALLOC_LIBRARY_KERNELS" >"$dir/build.log" 2>&1 &&
        cmake --build "$dir/build" -j 2 >>"$dir/build.log" 2>&1 &&
        # What run.sh installs (a kernel binary the program loads from out/).
        { ! grep -q '^cmake --install' "$dir/run.sh" 2>/dev/null ||
          cmake --install "$dir/build" >>"$dir/build.log" 2>&1; }); then
    miss="$(grep -oE "'acl[A-Za-z0-9_]+' (was not declared|is not a member)|undefined reference to .acl[A-Za-z0-9_]+|'ACL[A-Z0-9_]+' was not declared|error: [^:]*$" "$dir/build.log" |
            grep -oE "acl[A-Za-z0-9_]+|ACL[A-Z0-9_]+|error: .*" | sort -u | tr '\n' ' ' | cut -c1-300)"
    printf '%-52s %-7s %-6s %-6s %s\n' "$s" no - - "$miss"
    continue
  fi
  if [ -x "$dir/build/server" ] && [ -x "$dir/build/client" ]; then
    # A server and a client (run_server.sh, run_client.sh): the README
    # documents the server's output, then the client's.
    documented "$dir/README.md" 1 | without_script_lines "$dir" >"$dir/expected.txt"
    documented "$dir/README.md" 2 | without_script_lines "$dir" >"$dir/expected_client.txt"
    exact=0 shaped=0 first=""
    for ((i = 1; i <= runs; i++)); do
      port="$(free_port)"
      (cd "$dir" && rm -rf file && mkdir -p file)
      # Line-buffered, so the client starts once the server says it listens
      # (memory/12's handshake is one UDP datagram, lost if sent before:
      # up to 60 s for a loaded machine).
      (cd "$dir" && exec timeout 120 stdbuf -oL ./build/server "$port" >"$dir/run.txt" 2>"$dir/run.err") &
      server=$!
      for _ in $(seq 1200); do
        grep -q 'listening on port' "$dir/run.txt" 2>/dev/null && break
        kill -0 "$server" 2>/dev/null || break
        sleep 0.05
      done
      (cd "$dir" && timeout 120 ./build/client 127.0.0.1 "$port" >"$dir/run_client.txt" 2>"$dir/run_client.err")
      crc=$?
      wait "$server"
      src=$?
      ok_exact=1 ok_shape=1
      if [ $src -ne 0 ] || [ $crc -ne 0 ]; then
        ok_exact=0 ok_shape=0
        [ -n "$first" ] || first="exit server $src client $crc: $(tail -n 1 "$dir/run.err" "$dir/run_client.err" | tr '\n' ' ' | cut -c1-200)"
      fi
      for side in "" _client; do
        matches "$dir/expected$side.txt" "$dir/run$side.txt" >/dev/null || ok_exact=0
        if ! missing="$(matches "$dir/expected$side.txt" "$dir/run$side.txt" shape)"; then
          ok_shape=0
          [ -n "$first" ] || first="missing${side:+ ($side)}: $missing"
        fi
      done
      exact=$((exact + ok_exact))
      shaped=$((shaped + ok_shape))
    done
    printf '%-52s %-7s %-6s %-6s %s\n' "$s" yes "$exact/$runs" "$shaped/$runs" "$first"
    continue
  fi
  if [ -x "$dir/build/proc_a" ] && [ -x "$dir/build/proc_b" ]; then
    documented "$dir/README.md" | without_script_lines "$dir" >"$dir/expected.txt"
    exact=0 shaped=0 first=""
    for ((i = 1; i <= runs; i++)); do
      (cd "$dir" && grep -E '^(rm -rf|mkdir -p) [A-Za-z0-9_]+$' run.sh 2>/dev/null | grep -vw build | sh)
      # A producer and its consumer (ipcevent/1): run.sh starts
      # `proc_a $CONSUMER_NUM` and `proc_b <device> <consumer>` per consumer;
      # one consumer here, on device 1.
      args_a=() args_b=()
      if grep -q 'proc_a \$CONSUMER_NUM' "$dir/run.sh" 2>/dev/null; then
        args_a=(1) args_b=(1 1)
      fi
      (cd "$dir" && exec timeout 120 ./build/proc_a "${args_a[@]}" >"$dir/run_a.txt" 2>"$dir/run_a.err") &
      pa=$!
      (cd "$dir" && exec timeout 120 ./build/proc_b "${args_b[@]}" >"$dir/run_b.txt" 2>"$dir/run_b.err") &
      pb=$!
      wait "$pa"; ra=$?
      wait "$pb"; rb=$?
      ok_exact=1 ok_shape=1
      if [ $ra -ne 0 ] || [ $rb -ne 0 ]; then
        ok_exact=0 ok_shape=0
        [ -n "$first" ] || first="exit proc_a $ra proc_b $rb: $(tail -q -n 1 "$dir/run_a.err" "$dir/run_b.err" | tr '\n' ' ' | cut -c1-200)"
      fi
      matches_pair "$dir/expected.txt" "$dir/run_a.txt" "$dir/run_b.txt" >/dev/null || ok_exact=0
      if ! missing="$(matches_pair "$dir/expected.txt" "$dir/run_a.txt" "$dir/run_b.txt" shape)"; then
        ok_shape=0
        [ -n "$first" ] || first="missing: $missing"
      fi
      exact=$((exact + ok_exact))
      shaped=$((shaped + ok_shape))
    done
    printf '%-52s %-7s %-6s %-6s %s\n' "$s" yes "$exact/$runs" "$shaped/$runs" "$first"
    continue
  fi
  exe="$(find "$dir/build" -maxdepth 2 -type f -perm -u+x -name 'main' | head -1)"
  [ -n "$exe" ] || exe="$(find "$dir/build" -maxdepth 2 -type f -perm -u+x ! -name '*.so' ! -name '*.o' ! -path '*CMakeFiles*' | head -1)"
  documented "$dir/README.md" | without_script_lines "$dir" >"$dir/expected.txt"
  # run.sh's data steps around the program: its input made before, its
  # output checked after (the check's lines are part of the documented output).
  before="$(grep -E '^python3 scripts/gen_data\.py' "$dir/run.sh" 2>/dev/null)"
  after="$(grep -E '^(md5sum |python3 scripts/verify_result\.py )' "$dir/run.sh" 2>/dev/null)"
  exact=0 shaped=0 first=""
  for ((i = 1; i <= runs; i++)); do
    # The directories run.sh makes for the program (its input and output files).
    (cd "$dir" && grep -E '^(rm -rf|mkdir -p) [A-Za-z0-9_ ]+$' run.sh 2>/dev/null | grep -vw build | sh)
    rc=0
    if [ -n "$before" ] && ! (cd "$dir" && sh -c "$before" >"$dir/run.err" 2>&1); then
      rc=1
      [ -n "$first" ] || first="run.sh's data step failed (numpy?): $(tail -n 1 "$dir/run.err" | cut -c1-150)"
      : >"$dir/run.txt"
    else
      (cd "$dir" && timeout 120 "$exe" >"$dir/run.txt" 2>"$dir/run.err")
      rc=$?
      [ $rc -ne 0 ] || [ -z "$after" ] || (cd "$dir" && sh -c "$after" >>"$dir/run.txt" 2>&1) || rc=$?
    fi
    ok_exact=1 ok_shape=1
    [ $rc -eq 0 ] || { ok_exact=0; ok_shape=0; [ -n "$first" ] || first="exit $rc: $(tail -n 1 "$dir/run.err" "$dir/run.txt" | cut -c1-200)"; }
    matches "$dir/expected.txt" "$dir/run.txt" >/dev/null || ok_exact=0
    if ! missing="$(matches "$dir/expected.txt" "$dir/run.txt" shape)"; then
      ok_shape=0
      [ -n "$first" ] || first="missing: $missing"
    fi
    exact=$((exact + ok_exact))
    shaped=$((shaped + ok_shape))
  done
  printf '%-52s %-7s %-6s %-6s %s\n' "$s" yes "$exact/$runs" "$shaped/$runs" "$first"
done
[ -n "${ACLALLOC_SAMPLES_DIR:-}" ] || rm -rf "$work"
