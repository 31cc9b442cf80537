/*
 * A program on a CANN machine that wants aclalloc's pool and tracking: it
 * includes CANN's <acl/acl.h> and <aclalloc.h>, in the order ACLALLOC_FIRST
 * picks. Compiled as C and as C++ by tests/cann_headers.rs, against the
 * CANN-shaped fixture headers (first on the include path) or against
 * include/ alone; prints which headers it saw and "ok" when every call did
 * what it should.
 */
#ifdef ACLALLOC_FIRST
#include <aclalloc.h>
#include <acl/acl.h>
#else
#include <acl/acl.h>
#include <aclalloc.h>
#endif

#include <acl/acl_rt_memory_soma.h>

#include <stdio.h>
#include <string.h>

static int failures = 0;
#define CHECK(cond)                                                  \
    do {                                                             \
        if (!(cond)) {                                               \
            fprintf(stderr, "%s:%d: %s failed\n", __FILE__, __LINE__, #cond); \
            failures++;                                              \
        }                                                            \
    } while (0)

static void fill(void *workspace, size_t size, void *userData) {
    memset(workspace, 0x5a, size);
    *(size_t *)userData += size;
}

int main(void) {
#ifdef ACLALLOC_TEST_CANN_FIXTURE
    printf("headers: cann fixture\n");
#else
    printf("headers: aclalloc include/\n");
#endif
    aclrtStream stream = NULL;
    CHECK(aclInit(NULL) == ACL_SUCCESS);
    CHECK(aclrtSetDevice(0) == ACL_SUCCESS);
    CHECK(aclrtCreateStreamWithConfig(&stream, 0, ACL_STREAM_FAST_LAUNCH) == ACL_SUCCESS);
    CHECK(aclallocTrackingSetEnabled(1) == ACL_SUCCESS);

    aclallocPoolConfig config;
    CHECK(aclallocPoolConfigInit(&config) == ACL_SUCCESS);
    aclallocPool pool = NULL;
    aclrtAllocatorDesc desc = NULL;
    CHECK(aclallocPoolCreate(&config, &pool, &desc) == ACL_SUCCESS);
    CHECK(aclrtAllocatorRegister(stream, desc) == ACL_SUCCESS);

    size_t filled = 0;
    for (int i = 0; i < 8; i++) {
        CHECK(aclallocLaunchKernel(stream, 4096, fill, &filled) == ACL_SUCCESS);
    }
    CHECK(aclrtSynchronizeStream(stream) == ACL_SUCCESS);
    CHECK(filled == 8 * 4096);

    /* CANN's enum types as parameters. */
    void *dev = NULL;
    aclrtMemMallocPolicy policy = ACL_MEM_MALLOC_HUGE_FIRST;
    aclrtMemcpyKind kind = ACL_MEMCPY_HOST_TO_DEVICE;
    char text[16] = "aclalloc";
    CHECK(aclrtMalloc(&dev, sizeof text, policy) == ACL_SUCCESS);
    CHECK(aclrtMemcpy(dev, sizeof text, text, sizeof text, kind) == ACL_SUCCESS);
    CHECK(aclrtFree(dev) == ACL_SUCCESS);

    /* A stream-ordered pool, with the props as CANN's documentation fills them. */
    aclrtMemLocation location = {0, ACL_MEM_LOCATION_TYPE_DEVICE};
    aclrtMemPoolProps props = {ACL_MEM_ALLOCATION_TYPE_PINNED, ACL_MEM_HANDLE_TYPE_NONE, location,
                               1UL << 30, {0}};
    aclrtMemPool ordered = NULL;
    void *block = NULL;
    uint64_t used = 0;
    CHECK(aclrtMemPoolCreate(&ordered, &props) == ACL_SUCCESS);
    CHECK(aclrtMemPoolMallocAsync(&block, 1000, ordered, stream) == ACL_SUCCESS);
    CHECK(aclrtMemPoolGetAttr(ordered, ACL_RT_MEM_POOL_ATTR_USED_MEM_CURRENT, &used) ==
          ACL_SUCCESS);
    CHECK(used >= 1000);
    CHECK(aclrtMemPoolFreeAsync(block, stream) == ACL_SUCCESS);
    CHECK(aclrtSynchronizeStream(stream) == ACL_SUCCESS);
    CHECK(aclrtMemPoolTrimTo(ordered, 0) == ACL_SUCCESS);
    CHECK(aclrtMemPoolDestroy(ordered) == ACL_SUCCESS);

    size_t peak = 0;
    CHECK(aclallocPoolMaxMemoryAllocated(pool, &peak) == ACL_SUCCESS);
    CHECK(peak >= 4096);
    CHECK(aclallocTrackingIsEnabled() == 1);
    CHECK(aclallocTrackingFaultCount() == 0);
    CHECK(aclrtAllocatorUnregister(stream) == ACL_SUCCESS);
    CHECK(aclallocPoolDestroy(pool) == ACL_SUCCESS);
    CHECK(aclrtDestroyStream(stream) == ACL_SUCCESS);
    CHECK(aclrtResetDevice(0) == ACL_SUCCESS);
    CHECK(aclFinalize() == ACL_SUCCESS);
    CHECK(aclallocTrackingSetEnabled(0) == ACL_SUCCESS);
    printf("%s\n", failures == 0 ? "ok" : "FAILED");
    return failures == 0 ? 0 : 1;
}
