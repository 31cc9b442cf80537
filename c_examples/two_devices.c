/*
 * The default allocator with two devices: one caching pool per device. A
 * block freed while device 0 is current is never handed out while device 1
 * is; device 1's allocations come from device 1's memory (its free memory
 * moves); each device's pool has its own statistics.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "acl/acl.h"
#include "aclalloc.h"
#include "common/check.h"
#include "common/expect.h"

static size_t device_free(void) {
    size_t free_b = 0, total = 0;
    aclrtGetMemInfo(ACL_HBM_MEM, &free_b, &total);
    return free_b;
}

static void *workspace_seen;
static void record(void *ws, size_t size, void *data) {
    (void)size;
    (void)data;
    workspace_seen = ws;
}

int main(void) {
    setenv("ACLALLOC_DEVICE_COUNT", "2", 1);
    setenv("ACLALLOC_DEVICE_MEMORY", "256MiB", 1);
    CHECK(aclInit(NULL));

    CHECK(aclrtSetDevice(0));
    size_t free0_before = device_free();
    void *on0 = NULL;
    CHECK(aclallocDefaultMalloc(&on0, 1 << 20, NULL));
    EXPECT(device_free() < free0_before);
    CHECK(aclallocDefaultFree(on0));
    aclrtAllocator pool0 = NULL;
    CHECK(aclallocGetDefaultAllocator(&pool0));

    CHECK(aclrtSetDevice(1));
    size_t free1_before = device_free();
    void *on1 = NULL;
    CHECK(aclallocDefaultMalloc(&on1, 1 << 20, NULL));
    printf("device 0 block %p, device 1 block %p; device 1 free %zu -> %zu\n", on0, on1,
           free1_before, device_free());
    EXPECT(on1 != on0);
    EXPECT(device_free() < free1_before);
    aclrtAllocator pool1 = NULL;
    CHECK(aclallocGetDefaultAllocator(&pool1));
    EXPECT(pool1 != NULL && pool1 != pool0);

    /* A launch's workspace on a device-1 stream comes from device 1. */
    aclrtStream s1;
    CHECK(aclrtCreateStream(&s1));
    size_t before_launch = device_free();
    CHECK(aclallocLaunchKernel(s1, 8 << 20, record, NULL));
    CHECK(aclrtSynchronizeStream(s1));
    EXPECT(device_free() < before_launch);
    EXPECT(workspace_seen != NULL);

    /* Each device's statistics are its own. */
    int64_t allocs0 = -1, allocs1 = -1;
    CHECK(aclallocPoolGetStat(pool0, "allocation.all.allocated", &allocs0));
    CHECK(aclallocPoolGetStat(pool1, "allocation.all.allocated", &allocs1));
    printf("allocations: device 0 pool %lld, device 1 pool %lld\n", (long long)allocs0,
           (long long)allocs1);
    EXPECT(allocs0 == 1);
    EXPECT(allocs1 == 2);

    /* Freed on whichever device is current, a block goes to its own pool. */
    CHECK(aclrtSetDevice(0));
    CHECK(aclallocDefaultFree(on1));
    void *again0 = NULL;
    CHECK(aclallocDefaultMalloc(&again0, 1 << 20, NULL));
    EXPECT(again0 == on0);
    CHECK(aclallocDefaultFree(again0));

    CHECK(aclrtDestroyStream(s1));
    CHECK(aclrtResetDevice(1));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("%s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
