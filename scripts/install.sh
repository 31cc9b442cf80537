#!/usr/bin/env bash
# Installs libaclalloc into a prefix, as a system library:
#
#   scripts/install.sh PREFIX [--lib-dir DIR]
#
#   PREFIX/lib/libaclalloc.so.X.Y.Z, libaclalloc.so.X -> it, libaclalloc.so -> .so.X
#   PREFIX/include/aclalloc.h, PREFIX/include/acl/*.h
#   PREFIX/lib/pkgconfig/aclalloc.pc
#   PREFIX/lib/cmake/aclalloc/aclallocConfig.cmake, aclallocConfigVersion.cmake
#
# Builds with `cargo build --release` first, unless --lib-dir names a directory
# holding an already built libaclalloc.so. DESTDIR is honoured for packagers.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

prefix=""
lib_dir=""
while [ $# -gt 0 ]; do
  case "$1" in
    --lib-dir) lib_dir="$2"; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) [ -z "$prefix" ] || { echo "install.sh: one PREFIX only" >&2; exit 2; }; prefix="$1"; shift ;;
  esac
done
[ -n "$prefix" ] || { echo "usage: scripts/install.sh PREFIX [--lib-dir DIR]" >&2; exit 2; }

if [ -z "$lib_dir" ]; then
  (cd "$root" && cargo build --release)
  lib_dir="$root/target/release"
fi
[ -f "$lib_dir/libaclalloc.so" ] || { echo "install.sh: no libaclalloc.so in $lib_dir" >&2; exit 1; }

# The version is Cargo.toml's; the ABI version (SONAME) is its major part.
version="$(sed -n 's/^version = "\([^"]*\)".*/\1/p' "$root/Cargo.toml" | head -n 1)"
soversion="${version%%.*}"
real="libaclalloc.so.$version"
soname="libaclalloc.so.$soversion"

dest="${DESTDIR:-}$prefix"
install -d "$dest/lib" "$dest/include/acl" "$dest/lib/pkgconfig" "$dest/lib/cmake/aclalloc"
install -m 0755 "$lib_dir/libaclalloc.so" "$dest/lib/$real"
ln -sfn "$real" "$dest/lib/$soname"
ln -sfn "$soname" "$dest/lib/libaclalloc.so"
install -m 0644 "$root/include/aclalloc.h" "$dest/include/"
install -m 0644 "$root"/include/acl/*.h "$dest/include/acl/"

subst() {
  sed -e "s/@VERSION@/$version/g" -e "s/@SOVERSION@/$soversion/g" "$1" > "$2"
  chmod 0644 "$2"
}
subst "$root/packaging/aclalloc.pc.in" "$dest/lib/pkgconfig/aclalloc.pc"
subst "$root/packaging/aclallocConfig.cmake.in" "$dest/lib/cmake/aclalloc/aclallocConfig.cmake"
subst "$root/packaging/aclallocConfigVersion.cmake.in" "$dest/lib/cmake/aclalloc/aclallocConfigVersion.cmake"

echo "installed aclalloc $version into $dest"
