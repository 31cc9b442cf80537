#!/usr/bin/env bash
# Writes a CANN-shaped install of aclalloc, which CANN's build files and
# sample scripts accept as the CANN package path:
#
#   scripts/cann-prefix.sh PREFIX
#   source PREFIX/bin/setenv.bash      # ASCEND_HOME_PATH, ASCENDC_CMAKE_DIR, ...
#   cmake -B build -DASCEND_CANN_PACKAGE_PATH="$ASCEND_HOME_PATH" && cmake --build build
#
# ACLALLOC_LIB names another build of libaclalloc.so (default: target/release).
#
# PREFIX/include     CANN's headers as aclalloc implements them (acl/*.h) and aclalloc.h
# PREFIX/lib64       libaclalloc.so, with libascendcl.so and the other runtime
#                    library names linked to it
# PREFIX/bin         setenv.bash (what CANN's set_env.sh / setenv.bash set)
# PREFIX/lib64       also libopapi.so (libnnopbase.so linked to it) with
#                    PREFIX/include/aclnn and aclnnop: host stand-ins for the
#                    operator library calls CANN's samples make (aclnnAdd,
#                    aclnnMul, tensors, scalars), from scripts/cann-samples/aclnn,
#                    kept outside the library (needs a C++ compiler: $CXX or c++)
# PREFIX/cmake       ascendc.cmake: ascendc_library() builds the host stand-ins
#                    named by -DACLALLOC_HOST_KERNELS=... and those of the same
#                    file names in -DACLALLOC_LIBRARY_KERNELS=DIR (AI Core kernels
#                    cannot run on the host), or an empty library without them;
#                    ascendc_fatbin_library() builds the kernel binary a program
#                    loads with aclrtBinaryLoadFromFile from the stand-ins in
#                    -DACLALLOC_FATBIN_KERNELS=DIR (DIR/<kernel source's name>)
set -euo pipefail
if [ $# -ne 1 ]; then
  echo "usage: $0 PREFIX" >&2
  exit 2
fi
root="$(cd "$(dirname "$0")/.." && pwd)"
mkdir -p "$1"
prefix="$(cd "$1" && pwd)"
lib="${ACLALLOC_LIB:-$root/target/release/libaclalloc.so}"
[ -f "$lib" ] || (cd "$root" && cargo build --release >&2)

mkdir -p "$prefix/include" "$prefix/lib64" "$prefix/bin" "$prefix/cmake"
cp -R "$root/include/acl" "$root/include/aclalloc" "$root/include/aclalloc.h" "$prefix/include/"
cp "$lib" "$prefix/lib64/libaclalloc.so"
soname="$(readelf -d "$lib" 2>/dev/null | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')"
[ -n "$soname" ] && ln -sfn libaclalloc.so "$prefix/lib64/$soname"
# The runtime's library names CANN programs and build files link against.
for name in ascendcl acl_rt acl_rt_impl runtime; do
  ln -sfn libaclalloc.so "$prefix/lib64/lib$name.so"
done

# The operator library's stand-ins, linked to the runtime they launch on.
standins="$root/scripts/cann-samples/aclnn"
cxx="${CXX:-c++}"
if command -v "$cxx" >/dev/null; then
  cp -R "$standins/aclnn" "$standins/aclnnop" "$prefix/include/"
  "$cxx" -std=c++17 -O2 -shared -fPIC -I"$prefix/include" "$standins/host_aclnn.cpp" \
    -L"$prefix/lib64" -laclalloc -Wl,-rpath,'$ORIGIN' -o "$prefix/lib64/libopapi.so"
  ln -sfn libopapi.so "$prefix/lib64/libnnopbase.so"
else
  echo "$0: no C++ compiler ($cxx): the operator library's stand-ins are not installed" >&2
fi

cat > "$prefix/bin/setenv.bash" <<SETENV
# The environment CANN's setenv.bash gives, for aclalloc's CANN-shaped prefix.
export ASCEND_HOME_PATH="$prefix"
export ASCEND_TOOLKIT_HOME="$prefix"
export ASCEND_CANN_PACKAGE_PATH="$prefix"
export ASCENDC_CMAKE_DIR="$prefix/cmake"
export SOC_VERSION="\${SOC_VERSION:-aclalloc-host}"
export LD_LIBRARY_PATH="$prefix/lib64\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
SETENV
cp "$prefix/bin/setenv.bash" "$prefix/set_env.sh"

cat > "$prefix/cmake/ascendc.cmake" <<'CMAKE'
# ascendc_library() for aclalloc's host runtime: AI Core kernels are not
# compiled; the library is built from host stand-ins of the same effect
# (launched with aclallocLaunchKernel or aclrtLaunchHostFunc). A kernel
# source with a file of the same name in ACLALLOC_LIBRARY_KERNELS (a
# sample's own kernel) is replaced by that file; the others (the shared
# kernels of CANN's example/kernel_func) by the sources listed in
# ACLALLOC_HOST_KERNELS. Both are the variable or the environment; without
# any stand-in the library is empty.
get_filename_component(_aclalloc_prefix "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
set(ACLALLOC_HOST_KERNELS "$ENV{ACLALLOC_HOST_KERNELS}" CACHE STRING "Host stand-ins for the AI Core kernels (;-list of sources)")
set(ACLALLOC_LIBRARY_KERNELS "$ENV{ACLALLOC_LIBRARY_KERNELS}" CACHE PATH
    "Directory of host stand-ins for a program's own kernel sources: <kernel source's file name> for each")
function(ascendc_library name type)
  set(_sources)
  set(_shared FALSE)
  foreach(_source IN LISTS ARGN)
    get_filename_component(_file "${_source}" NAME)
    if(ACLALLOC_LIBRARY_KERNELS AND EXISTS "${ACLALLOC_LIBRARY_KERNELS}/${_file}")
      list(APPEND _sources "${ACLALLOC_LIBRARY_KERNELS}/${_file}")
    else()
      set(_shared TRUE)
    endif()
  endforeach()
  if(_shared AND ACLALLOC_HOST_KERNELS)
    list(APPEND _sources ${ACLALLOC_HOST_KERNELS})
  endif()
  # As CANN's, the library brings the runtime with it.
  if(_sources)
    add_library(${name} ${type} ${_sources})
    # A stand-in includes the program's own headers, or example/kernel_func's.
    target_include_directories(${name} PRIVATE "${CMAKE_CURRENT_SOURCE_DIR}" "${CMAKE_CURRENT_SOURCE_DIR}/../../..")
    set(_scope PUBLIC)
  else()
    message(STATUS "ascendc_library(${name}): AI Core kernels do not run on the host; "
                   "set ACLALLOC_HOST_KERNELS or ACLALLOC_LIBRARY_KERNELS to host stand-ins of ${ARGN}")
    add_library(${name} INTERFACE)
    set(_scope INTERFACE)
  endif()
  target_include_directories(${name} ${_scope} "${_aclalloc_prefix}/include")
  target_link_libraries(${name} ${_scope} "${_aclalloc_prefix}/lib64/libascendcl.so")
endfunction()

# ascendc_fatbin_library() for aclalloc's host runtime: the kernel binary a
# program loads by file name (aclrtBinaryLoadFromFile) is a shared object of
# host stand-ins, one per kernel: `aclallocKernel_NAME` for kernel NAME
# (aclallocKernelStandIn in aclalloc.h). Each kernel source's stand-in is the
# file of the same name in ACLALLOC_FATBIN_KERNELS (the variable or the
# environment). Built as CANN's is, fatbin/<name>/<name>.o under the build
# directory, installed to fatbin/<name>/<name>.o under the install prefix.
set(ACLALLOC_FATBIN_KERNELS "$ENV{ACLALLOC_FATBIN_KERNELS}" CACHE PATH
    "Directory of host stand-ins for kernel binaries: <kernel source's file name> for each kernel source")
function(ascendc_fatbin_library name)
  set(_stand_ins)
  foreach(_source IN LISTS ARGN)
    get_filename_component(_file "${_source}" NAME)
    if(ACLALLOC_FATBIN_KERNELS AND EXISTS "${ACLALLOC_FATBIN_KERNELS}/${_file}")
      list(APPEND _stand_ins "${ACLALLOC_FATBIN_KERNELS}/${_file}")
    else()
      message(WARNING "ascendc_fatbin_library(${name}): AI Core kernels do not run on the host, and "
                      "ACLALLOC_FATBIN_KERNELS has no host stand-in ${_file} for ${_source}: "
                      "aclrtBinaryGetFunction will not find its kernels")
    endif()
  endforeach()
  if(NOT _stand_ins)
    # A binary without kernels still loads: the program learns which kernel
    # is missing from aclrtBinaryGetFunction.
    set(_stand_ins "${CMAKE_CURRENT_BINARY_DIR}/${name}_no_kernels.cpp")
    file(WRITE "${_stand_ins}" "/* No host stand-ins were given for ${name}. */\n")
  endif()
  add_library(${name} MODULE ${_stand_ins})
  target_include_directories(${name} PRIVATE "${_aclalloc_prefix}/include" "${ACLALLOC_FATBIN_KERNELS}")
  set_target_properties(${name} PROPERTIES
    PREFIX "" SUFFIX ".o" OUTPUT_NAME "${name}"
    LIBRARY_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}/fatbin/${name}")
  install(TARGETS ${name} LIBRARY DESTINATION "fatbin/${name}")
endfunction()
CMAKE
echo "$prefix: source $prefix/bin/setenv.bash"
