#!/usr/bin/env bash
# Installs libaclalloc into a prefix, as a system library:
#
#   scripts/install.sh PREFIX [--lib-dir DIR] [--no-strip]
#
#   PREFIX/bin/aclalloc (finds the library in ../lib)
#   PREFIX/lib/libaclalloc.so.X.Y.Z, libaclalloc.so.X -> it, libaclalloc.so -> .so.X
#   PREFIX/lib/libaclalloc_preload.so (libc's exec family and posix_spawn, for 'aclalloc run')
#   PREFIX/include/aclalloc.h, PREFIX/include/acl/*.h, PREFIX/include/aclalloc/*.h
#   PREFIX/lib/pkgconfig/aclalloc.pc
#   PREFIX/lib/cmake/aclalloc/aclallocConfig.cmake, aclallocConfigVersion.cmake
#   PREFIX/share/doc/aclalloc/LICENSE-MIT, LICENSE-APACHE
#
# Builds with `cargo build --release` first, unless --lib-dir names a directory
# holding an already built libaclalloc.so, libaclalloc_preload.so and aclalloc. The library and the
# tool are stripped of debug information and symbol tables (the release
# build keeps line tables for backtraces); --no-strip installs them as built.
# DESTDIR is honoured for packagers.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

prefix=""
lib_dir=""
strip_binaries=1
while [ $# -gt 0 ]; do
  case "$1" in
    --lib-dir) lib_dir="$2"; shift 2 ;;
    --no-strip) strip_binaries=0; shift ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) [ -z "$prefix" ] || { echo "install.sh: one PREFIX only" >&2; exit 2; }; prefix="$1"; shift ;;
  esac
done
[ -n "$prefix" ] || { echo "usage: scripts/install.sh PREFIX [--lib-dir DIR] [--no-strip]" >&2; exit 2; }

if [ -z "$lib_dir" ]; then
  (cd "$root" && cargo build --release)
  lib_dir="$root/target/release"
fi
for built in libaclalloc.so libaclalloc_preload.so aclalloc; do
  [ -f "$lib_dir/$built" ] || { echo "install.sh: no $built in $lib_dir (build with 'cargo build --release')" >&2; exit 1; }
done
if [ "$strip_binaries" = 1 ] && ! command -v strip >/dev/null 2>&1; then
  echo "install.sh: 'strip' not found (binutils); install it or pass --no-strip" >&2
  exit 1
fi

# The version is Cargo.toml's; the ABI version (SONAME) is its major part.
version="$(sed -n 's/^version = "\([^"]*\)".*/\1/p' "$root/Cargo.toml" | head -n 1)"
soversion="${version%%.*}"
real="libaclalloc.so.$version"
soname="libaclalloc.so.$soversion"

dest="${DESTDIR:-}$prefix"
install -d "$dest/bin" "$dest/lib" "$dest/include/acl" "$dest/include/aclalloc" \
  "$dest/lib/pkgconfig" "$dest/lib/cmake/aclalloc" "$dest/share/doc/aclalloc"
install -m 0755 "$lib_dir/libaclalloc.so" "$dest/lib/$real"
install -m 0755 "$lib_dir/libaclalloc_preload.so" "$dest/lib/libaclalloc_preload.so"
install -m 0755 "$lib_dir/aclalloc" "$dest/bin/aclalloc"
if [ "$strip_binaries" = 1 ]; then
  # --strip-unneeded keeps what the dynamic linker needs (.dynsym).
  strip --strip-unneeded "$dest/lib/$real" "$dest/lib/libaclalloc_preload.so"
  strip "$dest/bin/aclalloc"
fi
ln -sfn "$real" "$dest/lib/$soname"
ln -sfn "$soname" "$dest/lib/libaclalloc.so"
install -m 0644 "$root/include/aclalloc.h" "$dest/include/"
install -m 0644 "$root"/include/acl/*.h "$dest/include/acl/"
install -m 0644 "$root"/include/aclalloc/*.h "$dest/include/aclalloc/"
install -m 0644 "$root/LICENSE-MIT" "$root/LICENSE-APACHE" "$dest/share/doc/aclalloc/"

subst() {
  sed -e "s/@VERSION@/$version/g" -e "s/@SOVERSION@/$soversion/g" "$1" > "$2"
  chmod 0644 "$2"
}
subst "$root/packaging/aclalloc.pc.in" "$dest/lib/pkgconfig/aclalloc.pc"
subst "$root/packaging/aclallocConfig.cmake.in" "$dest/lib/cmake/aclalloc/aclallocConfig.cmake"
subst "$root/packaging/aclallocConfigVersion.cmake.in" "$dest/lib/cmake/aclalloc/aclallocConfigVersion.cmake"

echo "installed aclalloc $version into $dest"
