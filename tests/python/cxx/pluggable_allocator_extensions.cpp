// A CPython extension module with the exports of torch_npu's own
// pluggable-allocator test extension (test/cpp_extensions in Ascend/pytorch):
// my_malloc and my_free over aclrtMallocAlign32/aclrtFree, a flag the
// module reports through check_custom_allocator_used(), a
// get-device-stats function that returns a default-constructed DeviceStats
// by value and a reset-peak function. torch_npu builds it against c10's
// DeviceStats; this file declares that struct itself, in PyTorch's current
// layout (976 bytes) or, with -DEXT_DEVICE_STATS_V1, in the older one (952
// bytes), so the tests run the module as either build of torch_npu would
// compile it. Built without pybind11 or torch (the Python C API stands in
// for PYBIND11_MODULE) and with no -l: the aclrt* symbols come from the
// libaclalloc the Python package loaded with RTLD_GLOBAL, as torch_npu's
// come from libascendcl.
#include <Python.h>
#include <sys/types.h>

#include <cstdint>
#include <cstdio>

#include "acl/acl.h"

namespace ext {

// c10::CachingDeviceAllocator::Stat: every member starts at 0.
struct Stat {
    int64_t current = 0;
    int64_t peak = 0;
    int64_t allocated = 0;
    int64_t freed = 0;
};

using StatArray = Stat[3];

// c10::CachingDeviceAllocator::DeviceStats, in the layout chosen at build.
struct DeviceStats {
    StatArray allocation;
    StatArray segment;
    StatArray active;
    StatArray inactive_split;
    StatArray allocated_bytes;
    StatArray reserved_bytes;
    StatArray active_bytes;
    StatArray inactive_split_bytes;
    StatArray requested_bytes;
    int64_t num_alloc_retries = 0;
    int64_t num_ooms = 0;
    Stat oversize_allocations;
    Stat oversize_segments;
#ifndef EXT_DEVICE_STATS_V1
    int64_t num_sync_all_streams = 0;
    int64_t num_device_alloc = 0;
    int64_t num_device_free = 0;
#endif
    int64_t max_split_size = 0;
};

#ifdef EXT_DEVICE_STATS_V1
static_assert(sizeof(DeviceStats) == 952, "PyTorch's older DeviceStats");
#else
static_assert(sizeof(DeviceStats) == 976, "PyTorch's current DeviceStats");
#endif

}  // namespace ext

extern "C" {

static bool useflag = false;

void *my_malloc(ssize_t size, int device, aclrtStream stream) {
    (void)device;
    (void)stream;
    void *ptr = nullptr;
    if (aclrtMallocAlign32(&ptr, static_cast<size_t>(size), ACL_MEM_MALLOC_HUGE_FIRST) !=
        ACL_SUCCESS)
        return nullptr;
    std::printf("alloc ptr = %p, size = %zd\n", ptr, size);
    useflag = true;
    return ptr;
}

void my_free(void *ptr, ssize_t size, int device, aclrtStream stream) {
    (void)size;
    (void)device;
    (void)stream;
    std::printf("free ptr = %p\n", ptr);
    aclrtFree(ptr);
}

// c10::DeviceIndex is an int8_t.
ext::DeviceStats my_get_device_stats(int8_t device) {
    (void)device;
    ext::DeviceStats stats;
    return stats;
}

void my_reset_peak_status(int8_t device) {
    (void)device;
    std::printf("resetPeakStatus success!\n");
}

static PyObject *check_custom_allocator_used(PyObject *, PyObject *) {
    return PyBool_FromLong(useflag);
}

static PyMethodDef methods[] = {
    {"check_custom_allocator_used", check_custom_allocator_used, METH_NOARGS, ""},
    {nullptr, nullptr, 0, nullptr},
};

static PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "pluggable_allocator_extensions", nullptr, -1, methods,
    nullptr,               nullptr,                          nullptr, nullptr,
};

PyMODINIT_FUNC PyInit_pluggable_allocator_extensions(void) { return PyModule_Create(&module); }

}  // extern "C"
