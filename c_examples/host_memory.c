/*
 * Host memory from aclrtMallocHost: a round trip through device memory with
 * every copy kind, synchronous and on a stream, a kernel writing into it, and
 * the errors for a freed, foreign or device pointer.
 */
#include <stdint.h>
#include <string.h>

#include "acl/acl.h"
#include "aclalloc.h"
#include "common/check.h"
#include "common/expect.h"

static void add_one(void *ws, size_t size, void *data) {
    (void)ws;
    (void)size;
    uint8_t *bytes = data;
    for (int i = 0; i < 256; i++) bytes[i]++;
}

int main(void) {
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtStream stream = NULL;
    CHECK(aclrtCreateStream(&stream));

    void *src = NULL, *dst = NULL, *dev = NULL;
    CHECK(aclrtMallocHost(&src, 256));
    CHECK(aclrtMallocHost(&dst, 256));
    CHECK(aclrtMalloc(&dev, 256, ACL_MEM_MALLOC_HUGE_FIRST));
    EXPECT(((uintptr_t)src & 31) == 0);
    for (int i = 0; i < 256; i++) ((uint8_t *)src)[i] = (uint8_t)i;

    aclrtMemcpyKind kinds[] = {ACL_MEMCPY_HOST_TO_HOST, ACL_MEMCPY_HOST_TO_DEVICE,
                               ACL_MEMCPY_DEVICE_TO_HOST, ACL_MEMCPY_DEVICE_TO_DEVICE,
                               ACL_MEMCPY_DEFAULT};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        memset(dst, 0, 256);
        CHECK(aclrtMemcpy(dev, 256, src, 256, kinds[k]));
        CHECK(aclrtMemcpyAsync(dst, 256, dev, 256, kinds[k], stream));
        CHECK(aclrtSynchronizeStream(stream));
        EXPECT(memcmp(src, dst, 256) == 0);
    }
    /* A kernel works on host memory as on device memory. */
    CHECK(aclallocLaunchKernel(stream, 0, add_one, dst));
    CHECK(aclrtSynchronizeStream(stream));
    EXPECT(((uint8_t *)dst)[255] == 0);
    EXPECT(((uint8_t *)dst)[1] == 2);

    int local = 0;
    expect("aclrtMallocHost(size 0)", aclrtMallocHost(&src, 0), ACL_ERROR_INVALID_PARAM, "size");
    expect("aclrtMallocHost(NULL)", aclrtMallocHost(NULL, 8), ACL_ERROR_INVALID_PARAM,
           "hostPtr cannot be a NULL pointer");
    expect("aclrtFreeHost(device memory)", aclrtFreeHost(dev), ACL_ERROR_INVALID_PARAM,
           "aclrtMallocHost");
    expect("aclrtFreeHost(stack)", aclrtFreeHost(&local), ACL_ERROR_INVALID_PARAM,
           "aclrtMallocHost");
    expect("aclrtFreeHost(src)", aclrtFreeHost(src), ACL_SUCCESS, NULL);
    expect("aclrtFreeHost(src again)", aclrtFreeHost(src), ACL_ERROR_INVALID_PARAM,
           "already freed");
    expect("aclrtMemcpy(from freed host memory)",
           aclrtMemcpy(dev, 256, src, 256, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_INVALID_PARAM,
           "no live memory");

    CHECK(aclrtFreeHost(dst));
    CHECK(aclrtFree(dev));
    CHECK(aclrtDestroyStream(stream));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("%s\n", failures == 0 ? "host memory: ok" : "host memory: FAILED");
    return failures == 0 ? 0 : 1;
}
