/*
 * Sleep and wake of tagged pools, on two devices: device 0's pool
 * ("weights") with expandable segments, device 1's ("kv_cache") with fixed
 * ones. aclallocSleep gives their physical memory back (each device's free
 * memory returns to what it was before the pool), offloading "weights" to
 * host memory and discarding "kv_cache"; the addresses stay reserved.
 * While asleep, copies and sets into that memory, allocations, a launch
 * whose userData points into it and a launch needing a workspace from a
 * sleeping pool are refused, the pool's tag in the message. aclallocWakeUp maps memory at the same addresses and
 * restores "weights" byte-exact. 100 cycles leave device 0's free memory
 * exactly where the first left it; pools destroyed while asleep give
 * everything back.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acl/acl.h"
#include "aclalloc.h"
#include "common/check.h"
#include "common/expect.h"

#define MIB ((size_t)1 << 20)
#define SIZE (48 * MIB)

static size_t device_free(int32_t device) {
    size_t free_b = 0, total = 0;
    aclrtSetDevice(device);
    aclrtGetMemInfo(ACL_HBM_MEM, &free_b, &total);
    return free_b;
}

static void kernel(void *workspace, size_t size, void *data) {
    (void)workspace;
    (void)size;
    (void)data;
}

int main(void) {
    setenv("ACLALLOC_DEVICE_COUNT", "2", 1);
    setenv("ACLALLOC_DEVICE_MEMORY", "1GiB", 1);
    CHECK(aclInit(NULL));

    const char *tags[2] = {"weights", "kv_cache"};
    aclallocPool pools[2];
    aclrtAllocatorDesc descs[2];
    aclrtAllocatorBlock blocks[2];
    void *ptrs[2];
    size_t free_start[2];
    unsigned char *pattern = malloc(SIZE), *back = malloc(SIZE);
    if (pattern == NULL || back == NULL) {
        return 1;
    }
    for (size_t i = 0; i < SIZE; i++) {
        pattern[i] = (unsigned char)(i * 31 + 7);
    }
    for (int32_t d = 0; d < 2; d++) {
        free_start[d] = device_free(d);
        aclallocPoolConfig cfg;
        CHECK(aclallocPoolConfigInit(&cfg));
        cfg.expandable_segments = d == 0;
        CHECK(aclallocPoolCreate(&cfg, &pools[d], &descs[d]));
        /* Tagged before its first allocation. */
        CHECK(aclallocPoolSetTag(pools[d], tags[d]));
        blocks[d] = aclallocPoolAlloc(pools[d], SIZE);
        EXPECT(blocks[d] != NULL);
        ptrs[d] = aclallocPoolGetAddrFromBlock(blocks[d]);
        CHECK(aclrtMemcpy(ptrs[d], SIZE, pattern, SIZE, ACL_MEMCPY_HOST_TO_DEVICE));
    }
    /* A tag comes too late once the pool holds memory. */
    expect("aclallocPoolSetTag after an allocation", aclallocPoolSetTag(pools[0], "late"),
           ACL_ERROR_INVALID_PARAM, "before its first allocation");

    aclrtStream stream;
    CHECK(aclrtSetDevice(1));
    CHECK(aclrtCreateStream(&stream));
    CHECK(aclrtAllocatorRegister(stream, descs[1]));

    const char *offload[] = {"weights"};
    CHECK(aclallocSleep(offload, 1));
    for (int32_t d = 0; d < 2; d++) {
        printf("device %d asleep: free %zu of %zu at start\n", d, device_free(d), free_start[d]);
        EXPECT(device_free(d) == free_start[d]);
    }
    CHECK(aclallocSleep(offload, 1)); /* asleep already: nothing changes */

    CHECK(aclrtSetDevice(0));
    expect("aclrtMemcpy into a sleeping pool",
           aclrtMemcpy(ptrs[0], SIZE, pattern, SIZE, ACL_MEMCPY_HOST_TO_DEVICE),
           ACL_ERROR_INVALID_PARAM, "tagged \"weights\", which is asleep");
    expect("aclrtMemcpy out of a sleeping pool",
           aclrtMemcpy(back, SIZE, ptrs[0], SIZE, ACL_MEMCPY_DEVICE_TO_HOST),
           ACL_ERROR_INVALID_PARAM, "asleep");
    expect("aclrtMemset of a sleeping pool", aclrtMemset(ptrs[1], SIZE, 0, SIZE),
           ACL_ERROR_INVALID_PARAM, "tagged \"kv_cache\", which is asleep");
    EXPECT(aclallocPoolAlloc(pools[0], MIB) == NULL);
    const char *why = aclGetRecentErrMsg(); /* read once: reading takes it */
    printf("aclallocPoolAlloc from a sleeping pool: %s\n", why ? why : "(no message)");
    EXPECT(why != NULL && strstr(why, "asleep") != NULL);
    CHECK(aclrtSetDevice(1));
    expect("aclallocLaunchKernel, userData in a sleeping pool",
           aclallocLaunchKernel(stream, 0, kernel, ptrs[1]), ACL_ERROR_INVALID_PARAM,
           "Parameter userData is invalid. Reason: It is memory of the pool tagged \"kv_cache\"");
    expect("aclallocLaunchKernel, workspace from a sleeping pool",
           aclallocLaunchKernel(stream, MIB, kernel, NULL), ACL_ERROR_RT_MEMORY_ALLOCATION,
           "returned NULL from alloc");

    CHECK(aclallocWakeUp(NULL, 0));
    CHECK(aclallocWakeUp(NULL, 0)); /* awake already: nothing changes */
    CHECK(aclrtSetDevice(0));
    CHECK(aclrtMemcpy(back, SIZE, ptrs[0], SIZE, ACL_MEMCPY_DEVICE_TO_HOST));
    EXPECT(memcmp(back, pattern, SIZE) == 0);
    CHECK(aclrtSetDevice(1));
    CHECK(aclrtMemset(ptrs[1], SIZE, 0x5a, SIZE)); /* discarded: fresh, usable memory */
    CHECK(aclallocLaunchKernel(stream, MIB, kernel, NULL));
    CHECK(aclrtSynchronizeStream(stream));

    /* 100 cycles: device 0's free memory asleep and awake does not move. */
    size_t asleep_first = 0, awake_first = 0, asleep = 0, awake = 0;
    for (int cycle = 1; cycle <= 100; cycle++) {
        CHECK(aclallocSleep(offload, 1));
        asleep = device_free(0);
        CHECK(aclallocWakeUp(offload, 1));
        awake = device_free(0);
        if (cycle == 1) {
            asleep_first = asleep;
            awake_first = awake;
        } else if (asleep != asleep_first || awake != awake_first) {
            EXPECT(asleep == asleep_first && awake == awake_first);
            break;
        }
    }
    printf("after 100 cycles: device 0 free %zu asleep, %zu awake (after the first: %zu, %zu)\n",
           asleep, awake, asleep_first, awake_first);
    CHECK(aclrtSetDevice(0));
    CHECK(aclrtMemcpy(back, SIZE, ptrs[0], SIZE, ACL_MEMCPY_DEVICE_TO_HOST));
    EXPECT(memcmp(back, pattern, SIZE) == 0);

    /* Destroyed while asleep: everything goes back. */
    CHECK(aclrtAllocatorUnregister(stream));
    CHECK(aclrtDestroyStream(stream));
    CHECK(aclallocSleep(NULL, 0));
    for (int32_t d = 0; d < 2; d++) {
        CHECK(aclrtSetDevice(d));
        aclallocPoolFree(pools[d], blocks[d]);
        CHECK(aclallocPoolDestroy(pools[d]));
        EXPECT(device_free(d) == free_start[d]);
    }
    CHECK(aclallocWakeUp(NULL, 0)); /* no tagged pool left: nothing to do */

    free(pattern);
    free(back);
    CHECK(aclrtResetDevice(1));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("%s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
