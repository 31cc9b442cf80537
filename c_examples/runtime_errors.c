/*
 * Every bad input to the host runtime, its error code, and the message
 * aclGetRecentErrMsg leaves for it. Runs with 2 devices of 64 MiB each.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acl/acl.h"
#include "aclalloc.h"
#include "common/expect.h"

/* In the program's read-only data: aclrtMemset must refuse it, not fault. */
static const char read_only_bytes[16] = "read-only bytes";

static int kernels_run;
static void count_kernel(void *ws, size_t size, void *data) {
    (void)ws;
    (void)size;
    (void)data;
    kernels_run++;
}

static int frees;
static int obj;
static void *null_alloc(aclrtAllocator o, size_t s) { (void)o; (void)s; return NULL; }
static void *some_alloc(aclrtAllocator o, size_t s) { (void)o; (void)s; return &obj; }
static void count_free(aclrtAllocator o, aclrtAllocatorBlock b) { (void)o; (void)b; frees++; }
static void *null_addr(aclrtAllocatorBlock b) { (void)b; return NULL; }

static aclrtAllocatorDesc make_desc(aclrtAllocatorAllocFunc a, aclrtAllocatorGetAddrFromBlockFunc g) {
    aclrtAllocatorDesc d = aclrtAllocatorCreateDesc();
    aclrtAllocatorSetObjToDesc(d, &obj);
    aclrtAllocatorSetAllocFuncToDesc(d, a);
    aclrtAllocatorSetFreeFuncToDesc(d, count_free);
    aclrtAllocatorSetGetAddrFromBlockFuncToDesc(d, g);
    return d;
}

int main(void) {
    /* Read once, on the first runtime call. */
    setenv("ACLALLOC_DEVICE_COUNT", "2", 1);
    setenv("ACLALLOC_DEVICE_MEMORY", "64MiB", 1);
    int32_t dev = -1;
    uint32_t count = 0;
    void *p = NULL;
    aclrtStream stream = NULL;
    aclrtContext ctx = NULL;
    size_t free_b, total_b;
    char host[64];

    /* Initialization. */
    expect("aclFinalize() before aclInit", aclFinalize(), ACL_ERROR_REPEAT_FINALIZE,
           "aclFinalize failed. ACL is not initialized");
    expect("aclInit(missing file)", aclInit("/nonexistent/acl.json"), ACL_ERROR_INVALID_FILE,
           "aclInit failed. Parameter configPath is invalid");
    expect("aclInit(NULL)", aclInit(NULL), ACL_SUCCESS, "");
    expect("aclInit(NULL) again", aclInit(NULL), ACL_ERROR_REPEAT_INITIALIZE,
           "aclInit failed. ACL is already initialized");

    /* Before any device is set. */
    expect("aclrtGetDevice without a device", aclrtGetDevice(&dev), ACL_ERROR_RT_CONTEXT_NULL,
           "aclrtGetDevice failed. There is no current context on this thread");
    expect("aclrtCreateStream without a device", aclrtCreateStream(&stream), ACL_ERROR_RT_CONTEXT_NULL,
           "aclrtCreateStream failed. There is no current context");
    expect("aclrtMalloc without a device", aclrtMalloc(&p, 100, ACL_MEM_MALLOC_HUGE_FIRST),
           ACL_ERROR_RT_CONTEXT_NULL, "aclrtMalloc failed. There is no current context");
    expect("aclrtGetMemInfo without a device", aclrtGetMemInfo(ACL_HBM_MEM, &free_b, &total_b),
           ACL_ERROR_RT_CONTEXT_NULL, "aclrtGetMemInfo failed. There is no current context");
    expect("aclrtSynchronizeStream(NULL) without a device", aclrtSynchronizeStream(NULL), ACL_ERROR_RT_CONTEXT_NULL,
           "aclrtSynchronizeStream failed. There is no current context");
    expect("aclrtGetCurrentContext without a device", aclrtGetCurrentContext(&ctx), ACL_ERROR_RT_CONTEXT_NULL,
           "aclrtGetCurrentContext failed. There is no current context");

    /* Devices. */
    expect("aclrtGetDeviceCount(NULL)", aclrtGetDeviceCount(NULL), ACL_ERROR_INVALID_PARAM,
           "aclrtGetDeviceCount failed because count cannot be a NULL pointer.");
    expect("aclrtGetDeviceCount", aclrtGetDeviceCount(&count), ACL_SUCCESS, "");
    if (count != 2) failures++;
    expect("aclrtSetDevice(2) of 2", aclrtSetDevice(2), ACL_ERROR_RT_INVALID_DEVICEID,
           "aclrtSetDevice failed. Parameter deviceId is invalid. Reason: device 2 does not exist; there are 2 devices");
    expect("aclrtSetDevice(-1)", aclrtSetDevice(-1), ACL_ERROR_RT_INVALID_DEVICEID, "device -1 does not exist");
    expect("aclrtResetDevice(7)", aclrtResetDevice(7), ACL_ERROR_RT_INVALID_DEVICEID, "aclrtResetDevice failed");
    expect("aclrtResetDeviceForce(-3)", aclrtResetDeviceForce(-3), ACL_ERROR_RT_INVALID_DEVICEID,
           "aclrtResetDeviceForce failed. Parameter deviceId is invalid");
    expect("aclrtCreateContext(NULL, 0)", aclrtCreateContext(NULL, 0), ACL_ERROR_INVALID_PARAM,
           "aclrtCreateContext failed because context cannot be a NULL pointer.");
    expect("aclrtGetCurrentContext(NULL)", aclrtGetCurrentContext(NULL), ACL_ERROR_INVALID_PARAM,
           "aclrtGetCurrentContext failed because context cannot be a NULL pointer.");
    expect("aclrtCreateContext(ctx, 5)", aclrtCreateContext(&ctx, 5), ACL_ERROR_RT_INVALID_DEVICEID,
           "aclrtCreateContext failed. Parameter deviceId is invalid");
    expect("aclrtSetDevice(1)", aclrtSetDevice(1), ACL_SUCCESS, "");
    expect("aclrtGetDevice(NULL)", aclrtGetDevice(NULL), ACL_ERROR_INVALID_PARAM,
           "deviceId cannot be a NULL pointer");
    expect("aclrtGetDevice", aclrtGetDevice(&dev), ACL_SUCCESS, "");
    if (dev != 1) failures++;

    /* Contexts. */
    static int not_a_handle;
    expect("aclrtSetCurrentContext(NULL)", aclrtSetCurrentContext(NULL), ACL_ERROR_INVALID_PARAM,
           "aclrtSetCurrentContext failed because context cannot be a NULL pointer.");
    expect("aclrtSetCurrentContext(foreign)", aclrtSetCurrentContext(&not_a_handle), ACL_ERROR_INVALID_PARAM,
           "Parameter context is invalid. Reason: It is not a live context");
    expect("aclrtGetCurrentContext", aclrtGetCurrentContext(&ctx), ACL_SUCCESS, "");
    expect("aclrtDestroyContext(default context)", aclrtDestroyContext(ctx), ACL_ERROR_INVALID_PARAM,
           "It is a device's default context; aclrtResetDevice releases it");
    aclrtContext mine = NULL;
    expect("aclrtCreateContext(ctx, 0)", aclrtCreateContext(&mine, 0), ACL_SUCCESS, "");
    expect("aclrtDestroyContext(ctx)", aclrtDestroyContext(mine), ACL_SUCCESS, "");
    expect("aclrtDestroyContext(ctx) again", aclrtDestroyContext(mine), ACL_ERROR_INVALID_PARAM,
           "aclrtDestroyContext failed. Parameter context is invalid");
    expect("aclrtGetCurrentContext after destroying it", aclrtGetCurrentContext(&ctx), ACL_ERROR_RT_CONTEXT_NULL,
           "no current context");
    expect("aclrtSetDevice(1) again", aclrtSetDevice(1), ACL_SUCCESS, "");

    /* Streams. */
    expect("aclrtCreateStream(NULL)", aclrtCreateStream(NULL), ACL_ERROR_INVALID_PARAM,
           "aclrtCreateStream failed because stream cannot be a NULL pointer.");
    expect("aclrtCreateStreamWithConfig(priority 8)", aclrtCreateStreamWithConfig(&stream, 8, 0),
           ACL_ERROR_INVALID_PARAM, "Parameter priority is invalid");
    expect("aclrtCreateStreamWithConfig(unknown flag)", aclrtCreateStreamWithConfig(&stream, 0, 0x1000),
           ACL_ERROR_INVALID_PARAM, "Parameter flag is invalid");
    expect("aclrtCreateStreamWithConfig(3, FAST_LAUNCH)",
           aclrtCreateStreamWithConfig(&stream, 3, ACL_STREAM_FAST_LAUNCH), ACL_SUCCESS, "");
    expect("aclrtDestroyStream(NULL)", aclrtDestroyStream(NULL), ACL_ERROR_INVALID_PARAM,
           "aclrtDestroyStream failed because stream cannot be a NULL pointer.");
    expect("aclrtDestroyStreamForce(foreign)", aclrtDestroyStreamForce(&not_a_handle), ACL_ERROR_INVALID_PARAM,
           "aclrtDestroyStreamForce failed. Parameter stream is invalid. Reason: It is not a live stream");
    expect("aclrtSynchronizeStream(foreign)", aclrtSynchronizeStream(&not_a_handle), ACL_ERROR_INVALID_PARAM,
           "Parameter stream is invalid. Reason: It is not a live stream");
    expect("aclallocLaunchKernel(foreign stream)", aclallocLaunchKernel(&not_a_handle, 0, count_kernel, NULL),
           ACL_ERROR_INVALID_PARAM, "aclallocLaunchKernel failed. Parameter stream is invalid");
    expect("aclallocLaunchKernel(NULL kernel)", aclallocLaunchKernel(stream, 0, NULL, NULL),
           ACL_ERROR_INVALID_PARAM, "aclallocLaunchKernel failed because kernel cannot be a NULL pointer.");

    /* Launches whose allocator fails: nothing is enqueued. */
    aclrtAllocatorDesc refusing = make_desc(null_alloc, null_addr);
    aclrtAllocatorRegister(stream, refusing);
    char want[160];
    snprintf(want, sizeof want, "The allocator of stream %p returned NULL from alloc for a workspace of 4096 bytes",
             stream);
    expect("launch: alloc returns NULL", aclallocLaunchKernel(stream, 4096, count_kernel, NULL),
           ACL_ERROR_RT_MEMORY_ALLOCATION, want);
    aclrtAllocatorDesc no_addr = make_desc(some_alloc, null_addr);
    aclrtAllocatorRegister(stream, no_addr);
    expect("launch: getAddrFromBlock returns NULL", aclallocLaunchKernel(stream, 512, count_kernel, NULL),
           ACL_ERROR_RT_MEMORY_ALLOCATION, "returned NULL from getAddrFromBlock for a workspace block of 512 bytes");
    expect("aclrtSynchronizeStream", aclrtSynchronizeStream(stream), ACL_SUCCESS, "");
    if (kernels_run != 0 || frees != 1) {
        fprintf(stderr, "  FAILED: %d kernels ran, %d blocks were freed (wanted 0 and 1)\n", kernels_run, frees);
        failures++;
    }
    aclrtAllocatorUnregister(stream);
    expect("launch: default allocator out of memory", aclallocLaunchKernel(stream, 65 << 20, count_kernel, NULL),
           ACL_ERROR_RT_MEMORY_ALLOCATION, "Device 1 is out of memory");
    expect("aclrtDestroyStream", aclrtDestroyStream(stream), ACL_SUCCESS, "");
    expect("aclrtDestroyStream again", aclrtDestroyStream(stream), ACL_ERROR_INVALID_PARAM,
           "aclrtDestroyStream failed. Parameter stream is invalid. Reason: It is not a live stream");
    expect("aclallocLaunchKernel(destroyed stream)", aclallocLaunchKernel(stream, 0, count_kernel, NULL),
           ACL_ERROR_INVALID_PARAM, "It is not a live stream");

    /* Memory. */
    expect("aclrtMalloc(NULL, 100)", aclrtMalloc(NULL, 100, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM,
           "aclrtMalloc failed because devPtr cannot be a NULL pointer.");
    expect("aclrtMalloc(size 0)", aclrtMalloc(&p, 0, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM,
           "Parameter size is invalid");
    expect("aclrtMalloc(more than the device holds)", aclrtMalloc(&p, (size_t)65 << 20, ACL_MEM_MALLOC_HUGE_FIRST),
           ACL_ERROR_RT_MEMORY_ALLOCATION, "aclrtMalloc failed. Device 1 is out of memory: 68157440 bytes were requested");
    expect("aclrtMallocAlign32(more than the device holds)",
           aclrtMallocAlign32(&p, (size_t)1 << 40, ACL_MEM_MALLOC_HUGE_ONLY), ACL_ERROR_RT_MEMORY_ALLOCATION,
           "aclrtMallocAlign32 failed. Device 1 is out of memory");
    expect("aclrtMalloc(4096)", aclrtMalloc(&p, 4096, ACL_MEM_MALLOC_NORMAL_ONLY), ACL_SUCCESS, "");
    expect("aclrtGetMemInfo(bad attr)", aclrtGetMemInfo((aclrtMemAttr)99, &free_b, &total_b), ACL_ERROR_INVALID_PARAM,
           "Parameter attr is invalid");
    expect("aclrtGetMemInfo(NULL free)", aclrtGetMemInfo(ACL_HBM_MEM, NULL, &total_b), ACL_ERROR_INVALID_PARAM,
           "free cannot be a NULL pointer");
    expect("aclrtGetMemInfo", aclrtGetMemInfo(ACL_HBM_MEM, &free_b, &total_b), ACL_SUCCESS, "");
    if (total_b != (size_t)64 << 20 || free_b != total_b - 4096) failures++;
    expect("aclrtMemcpy(count > destMax)", aclrtMemcpy(p, 16, host, 32, ACL_MEMCPY_HOST_TO_DEVICE),
           ACL_ERROR_INVALID_PARAM, "Parameter count is invalid. Reason: It is greater than destMax");
    expect("aclrtMemcpy(H2D into host memory)", aclrtMemcpy(host, 64, host, 64, ACL_MEMCPY_HOST_TO_DEVICE),
           ACL_ERROR_INVALID_PARAM, "Parameter dst is invalid. Reason: It is not device memory");
    expect("aclrtMemcpy(D2H past the allocation)",
           aclrtMemcpy(host, 64, (char *)p + 4090, 64, ACL_MEMCPY_DEVICE_TO_HOST), ACL_ERROR_INVALID_PARAM,
           "Parameter src is invalid. Reason: The range runs past the end of its device allocation");
    expect("aclrtMemcpy(bad kind)", aclrtMemcpy(p, 64, host, 64, (aclrtMemcpyKind)42), ACL_ERROR_INVALID_PARAM,
           "Parameter kind is invalid");
    expect("aclrtMemcpy(NULL src)", aclrtMemcpy(p, 64, NULL, 64, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_INVALID_PARAM,
           "aclrtMemcpy failed because src cannot be a NULL pointer.");
    expect("aclrtMemcpyAsync(D2D from host memory)",
           aclrtMemcpyAsync(p, 64, host, 64, ACL_MEMCPY_DEVICE_TO_DEVICE, NULL), ACL_ERROR_INVALID_PARAM,
           "aclrtMemcpyAsync failed. Parameter src is invalid. Reason: It is not device memory");
    expect("aclrtMemcpyAsync(foreign stream)",
           aclrtMemcpyAsync(p, 64, host, 64, ACL_MEMCPY_HOST_TO_DEVICE, &not_a_handle), ACL_ERROR_INVALID_PARAM,
           "aclrtMemcpyAsync failed. Parameter stream is invalid");
    expect("aclrtMemset(count > maxCount)", aclrtMemset(p, 8, 0, 9), ACL_ERROR_INVALID_PARAM,
           "Parameter count is invalid. Reason: It is greater than maxCount");
    /* CANN decides from the address whether memory is the host's: host
     * memory the process may write is filled, a read-only range refused. */
    memset(host, 0x5a, sizeof host);
    expect("aclrtMemset(host memory)", aclrtMemset(host, 64, 0, 64), ACL_SUCCESS, "");
    if (host[0] != 0 || host[63] != 0) failures++;
    expect("aclrtMemset(read-only host memory)", aclrtMemset((void *)read_only_bytes, 16, 0, 16),
           ACL_ERROR_INVALID_PARAM, "Reason: It is neither device memory nor host memory this process may write");
    expect("aclrtMemsetAsync(past the end)", aclrtMemsetAsync(p, 8192, 0, 8192, NULL), ACL_ERROR_INVALID_PARAM,
           "aclrtMemsetAsync failed. Parameter devPtr is invalid. Reason: The range runs past the end");
    expect("aclrtFree(NULL)", aclrtFree(NULL), ACL_ERROR_INVALID_PARAM,
           "aclrtFree failed because devPtr cannot be a NULL pointer.");
    expect("aclrtFree(host memory)", aclrtFree(host), ACL_ERROR_INVALID_PARAM,
           "aclrtFree failed. Parameter devPtr is invalid. Reason: It is not the start of live device memory");
    expect("aclrtFree(interior pointer)", aclrtFree((char *)p + 16), ACL_ERROR_INVALID_PARAM,
           "It is not the start of live device memory");
    expect("aclrtFree", aclrtFree(p), ACL_SUCCESS, "");
    expect("aclrtFree again", aclrtFree(p), ACL_ERROR_INVALID_PARAM, "or it was already freed");

    /* Teardown. */
    expect("aclrtResetDevice(1)", aclrtResetDevice(1), ACL_SUCCESS, "");
    expect("aclrtResetDeviceForce(1)", aclrtResetDeviceForce(1), ACL_SUCCESS, "");
    expect("aclFinalize", aclFinalize(), ACL_SUCCESS, "");
    expect("aclFinalize again", aclFinalize(), ACL_ERROR_REPEAT_FINALIZE, "aclFinalize failed. ACL is not initialized");

    aclrtAllocatorDestroyDesc(refusing);
    aclrtAllocatorDestroyDesc(no_addr);
    printf("%s: %d failure(s)\n", failures ? "FAILED" : "OK", failures);
    return failures ? 1 : 0;
}
