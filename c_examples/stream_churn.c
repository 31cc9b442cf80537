/*
 * A stream per request: 100 streams, each running a kernel with a 4 MiB
 * workspace (from the default allocator, then from a pool registered on
 * each), then destroyed. On a 1 GiB device the memory those streams cached
 * must come back: a 512 MiB aclrtMalloc succeeds afterwards, and the
 * device's free memory is what it was before, round after round.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>

#include "acl/acl.h"
#include "aclalloc.h"
#include "common/check.h"
#include "common/expect.h"

#define STREAMS 100
#define WORKSPACE (4u << 20)

static void touch(void *ws, size_t size, void *data) {
    (void)data;
    ((volatile char *)ws)[size - 1] = 1;
}

static size_t device_free(void) {
    size_t free_b = 0, total = 0;
    aclrtGetMemInfo(ACL_HBM_MEM, &free_b, &total);
    return free_b;
}

/* One round of STREAMS short-lived streams; with `desc`, each stream has
 * the pool registered. Returns nonzero on a failed call. */
static int churn(aclrtAllocatorDesc desc) {
    aclrtStream streams[STREAMS];
    for (int i = 0; i < STREAMS; i++) {
        CHECK(aclrtCreateStream(&streams[i]));
        if (desc) {
            CHECK(aclrtAllocatorRegister(streams[i], desc));
        }
        CHECK(aclallocLaunchKernel(streams[i], WORKSPACE, touch, NULL));
    }
    for (int i = 0; i < STREAMS; i++) {
        CHECK(aclrtSynchronizeStream(streams[i]));
        CHECK(aclrtDestroyStream(streams[i]));
    }
    return 0;
}

static int big_malloc_fits(const char *after) {
    void *big = NULL;
    aclError rc = aclrtMalloc(&big, 512u << 20, ACL_MEM_MALLOC_HUGE_FIRST);
    printf("after %-32s device free %4zu MiB, 512 MiB aclrtMalloc -> %d\n", after,
           device_free() >> 20, rc);
    EXPECT(rc == ACL_SUCCESS);
    if (rc == ACL_SUCCESS) {
        CHECK(aclrtFree(big));
    }
    return 0;
}

int main(void) {
    setenv("ACLALLOC_DEVICE_MEMORY", "1GiB", 1);
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    size_t baseline = device_free();

    for (int round = 0; round < 3; round++) {
        if (churn(NULL) || big_malloc_fits("100 streams, default allocator")) {
            return 1;
        }
    }
    /* The default pool keeps nothing for streams that are gone. */
    EXPECT(device_free() == baseline);

    aclallocPool pool = NULL;
    aclrtAllocatorDesc desc = NULL;
    CHECK(aclallocPoolCreate(NULL, &pool, &desc));
    for (int round = 0; round < 3; round++) {
        if (churn(desc) || big_malloc_fits("100 streams, a registered pool")) {
            return 1;
        }
    }
    size_t reserved = 1;
    CHECK(aclallocPoolMemoryReserved(pool, &reserved));
    printf("registered pool: %zu bytes reserved after its streams are gone\n", reserved);
    EXPECT(reserved == 0);
    EXPECT(device_free() == baseline);
    CHECK(aclallocPoolDestroy(pool));
    CHECK(aclrtAllocatorDestroyDesc(desc));

    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("%s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
