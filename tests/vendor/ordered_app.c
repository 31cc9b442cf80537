/*
 * A program written from CANN's documentation of the stream-ordered pools
 * (acl_rt_memory_soma.h): it allocates on one stream, fills on another,
 * orders the streams with an event, frees, and copies back. One mode per
 * misuse the tracking layer reports; built against the stand-in runtime
 * and against libaclalloc alone.
 *
 * Modes: clean, use-after-free (a fill on stream 2 after the free on
 * stream 1), free-while-used (a free on stream 1 while stream 2's fill is
 * not ordered before it), leak (a block never freed).
 */
#include <stdio.h>
#include <string.h>

#include "acl/acl.h"
#include "acl/acl_rt_memory_soma.h"

#define CHECK(call)                                                           \
    do {                                                                      \
        aclError rc_ = (call);                                                \
        if (rc_ != ACL_SUCCESS) {                                             \
            printf("%s failed: %d %s\n", #call, rc_, aclGetRecentErrMsg());   \
            return 1;                                                         \
        }                                                                     \
    } while (0)

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "clean";
    aclrtStream s1 = NULL, s2 = NULL;
    aclrtEvent used = NULL;
    aclrtMemPool pool = NULL;
    void *a = NULL, *b = NULL;
    unsigned char host[4000];

    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    CHECK(aclrtCreateStream(&s1));
    CHECK(aclrtCreateStream(&s2));
    CHECK(aclrtCreateEvent(&used));
    aclrtMemPoolProps props;
    memset(&props, 0, sizeof(props));
    props.allocType = ACL_MEM_ALLOCATION_TYPE_PINNED;
    props.handleType = ACL_MEM_HANDLE_TYPE_NONE;
    props.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = 0;
    props.maxSize = 1 << 20;
    CHECK(aclrtMemPoolCreate(&pool, &props));
    printf("# stream1=%p stream2=%p pool=%p\n", s1, s2, (void *)pool);

    CHECK(aclrtMemPoolMallocAsync(&a, 4000, pool, s1));
    CHECK(aclrtMemPoolMallocAsync(&b, 3000, pool, s1));
    printf("# b-a=%td\n", (char *)b - (char *)a);
    CHECK(aclrtMemsetAsync(a, 4000, 7, 4000, s1));
    /* Stream 2 fills b, then stream 1 waits for it before freeing b. */
    CHECK(aclrtMemsetAsync(b, 3000, 9, 3000, s2));
    if (strcmp(mode, "free-while-used") != 0) {
        CHECK(aclrtRecordEvent(used, s2));
        CHECK(aclrtStreamWaitEvent(s1, used));
    }
    CHECK(aclrtMemcpyAsync(host, sizeof(host), a, 4000, ACL_MEMCPY_DEVICE_TO_HOST, s1));
    CHECK(aclrtSynchronizeStream(s1));
    int ok = host[0] == 7 && host[3999] == 7;
    CHECK(aclrtMemPoolFreeAsync(b, s1));
    if (strcmp(mode, "use-after-free") == 0) CHECK(aclrtMemsetAsync(b, 3000, 1, 16, s2));
    if (strcmp(mode, "leak") != 0) CHECK(aclrtMemPoolFreeAsync(a, s1));
    CHECK(aclrtSynchronizeStream(s1));
    CHECK(aclrtSynchronizeStream(s2));
    /* The same size again on stream 1: served from the pool. */
    void *again = NULL;
    CHECK(aclrtMemPoolMallocAsync(&again, 3000, pool, s1));
    CHECK(aclrtMemPoolFreeAsync(again, s1));
    CHECK(aclrtSynchronizeStream(s1));
    if (strcmp(mode, "leak") != 0) CHECK(aclrtMemPoolDestroy(pool));

    CHECK(aclrtDestroyEvent(used));
    CHECK(aclrtDestroyStream(s1));
    CHECK(aclrtDestroyStream(s2));
    printf("result: %s\n", ok ? "ok" : "wrong data");
    return ok ? 0 : 1;
}
