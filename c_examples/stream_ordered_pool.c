/*
 * CANN's stream-ordered memory pool (acl/acl_rt_memory_soma.h), as its API
 * reference uses it: blocks allocated and freed on streams with no
 * synchronize between, a kernel writing into them, reuse on the same
 * stream, reuse by a second stream once it waited on an event recorded
 * after the free, a free made on another stream than the allocation's, the
 * pool's figures as attributes, the release threshold at a synchronize and
 * a trim.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "acl/acl.h"
#include "acl/acl_rt_memory_soma.h"
#include "aclalloc.h"
#include "common/check.h"
#include "common/expect.h"

#define MIB ((size_t)1 << 20)

typedef struct {
    uint32_t *out;
    uint32_t value;
} Write;

/* A host "kernel" writing the block it was given. */
static void write_block(void *workspace, size_t size, void *data) {
    (void)workspace;
    (void)size;
    Write *w = (Write *)data;
    for (size_t i = 0; i < 1024; i++) {
        w->out[i] = w->value;
    }
}

static uint64_t attr64(aclrtMemPool pool, aclrtMemPoolAttr attr) {
    uint64_t v = 0;
    if (aclrtMemPoolGetAttr(pool, attr, &v) != ACL_SUCCESS) {
        return UINT64_MAX;
    }
    return v;
}

int main(void) {
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtStream a = NULL, b = NULL;
    CHECK(aclrtCreateStream(&a));
    CHECK(aclrtCreateStream(&b));

    aclrtMemLocation location = {0, ACL_MEM_LOCATION_TYPE_DEVICE};
    aclrtMemPoolProps props = {ACL_MEM_ALLOCATION_TYPE_PINNED, ACL_MEM_HANDLE_TYPE_NONE, location,
                               256 * MIB, {0}};
    aclrtMemPool pool = NULL;
    CHECK(aclrtMemPoolCreate(&pool, &props));
    uint32_t on = 0;
    CHECK(aclrtMemPoolGetAttr(pool, ACL_RT_MEM_POOL_REUSE_FOLLOW_EVENT_DEPENDENCIES, &on));
    EXPECT(on == 1);

    /* Allocate, let a kernel write, copy back and free: no synchronize until the copy is read. */
    uint32_t *x = NULL;
    CHECK(aclrtMemPoolMallocAsync((void **)&x, 1024 * sizeof *x, pool, a));
    Write w = {x, 42};
    CHECK(aclallocLaunchKernel(a, 0, write_block, &w));
    uint32_t host[1024] = {0};
    CHECK(aclrtMemcpyAsync(host, sizeof host, x, sizeof host, ACL_MEMCPY_DEVICE_TO_HOST, a));
    CHECK(aclrtMemPoolFreeAsync(x, a));
    /* The same stream gets the block again at once. */
    uint32_t *y = NULL;
    CHECK(aclrtMemPoolMallocAsync((void **)&y, 1024 * sizeof *y, pool, a));
    EXPECT(y == x);
    CHECK(aclrtSynchronizeStream(a));
    EXPECT(host[0] == 42 && host[1023] == 42);
    CHECK(aclrtMemPoolFreeAsync(y, a));

    /* Stream b reuses a's 9 MiB block once it waited on an event recorded after the free. */
    void *big = NULL, *again = NULL;
    uint64_t keep_all = UINT64_MAX;
    CHECK(aclrtMemPoolSetAttr(pool, ACL_RT_MEM_POOL_ATTR_RELEASE_THRESHOLD, &keep_all));
    CHECK(aclrtMemPoolMallocAsync(&big, 9 * MIB, pool, a));
    CHECK(aclrtMemPoolFreeAsync(big, a));
    aclrtEvent freed = NULL;
    CHECK(aclrtCreateEvent(&freed));
    CHECK(aclrtRecordEvent(freed, a));
    CHECK(aclrtStreamWaitEvent(b, freed));
    uint64_t reserved = attr64(pool, ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_CURRENT);
    CHECK(aclrtMemPoolMallocAsync(&again, 9 * MIB, pool, b));
    EXPECT(again == big);
    EXPECT(attr64(pool, ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_CURRENT) == reserved);
    printf("reused across streams after an event: %s, reserved %llu bytes\n",
           again == big ? "yes" : "no", (unsigned long long)reserved);

    /* Freed on a, allocated on b: back in the pool when a reaches the free. */
    CHECK(aclrtMemPoolFreeAsync(again, a));
    EXPECT(attr64(pool, ACL_RT_MEM_POOL_ATTR_USED_MEM_HIGH) >= 9 * MIB);

    /* Errors name what is wrong. */
    expect("aclrtMemPoolFreeAsync(twice)", aclrtMemPoolFreeAsync(y, a), ACL_ERROR_INVALID_PARAM,
           "already freed");
    uint64_t high = 5;
    expect("aclrtMemPoolSetAttr(USED_MEM_HIGH, 5)",
           aclrtMemPoolSetAttr(pool, ACL_RT_MEM_POOL_ATTR_USED_MEM_HIGH, &high),
           ACL_ERROR_INVALID_PARAM, "writing 0");

    /* With the default threshold (0), free memory goes back at the next synchronize. */
    uint64_t keep_none = 0;
    CHECK(aclrtMemPoolSetAttr(pool, ACL_RT_MEM_POOL_ATTR_RELEASE_THRESHOLD, &keep_none));
    CHECK(aclrtSynchronizeStream(a));
    CHECK(aclrtSynchronizeStream(b));
    EXPECT(attr64(pool, ACL_RT_MEM_POOL_ATTR_USED_MEM_CURRENT) == 0);
    EXPECT(attr64(pool, ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_CURRENT) == 0);
    CHECK(aclrtMemPoolTrimTo(pool, 0));

    CHECK(aclrtMemPoolDestroy(pool));
    CHECK(aclrtDestroyEvent(freed));
    CHECK(aclrtDestroyStream(a));
    CHECK(aclrtDestroyStream(b));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("%s\n", failures == 0 ? "stream-ordered pool: ok" : "stream-ordered pool: FAILED");
    return failures == 0 ? 0 : 1;
}
