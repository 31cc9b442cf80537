/*
 * One descriptor shared by several streams, then re-registration and
 * unregistration: what a service does when it moves streams between pools.
 */
#include <stdio.h>
#include <stdlib.h>

#include "acl/acl.h"

typedef struct {
    const char *name;
    int allocs, frees;
} Pool;

static void *pool_alloc(aclrtAllocator allocator, size_t size) {
    ((Pool *)allocator)->allocs++;
    return malloc(size ? size : 1);
}
static void pool_free(aclrtAllocator allocator, aclrtAllocatorBlock block) {
    ((Pool *)allocator)->frees++;
    free(block);
}
static void *pool_addr(aclrtAllocatorBlock block) { return block; }

static aclrtAllocatorDesc make_desc(Pool *pool) {
    aclrtAllocatorDesc d = aclrtAllocatorCreateDesc();
    aclrtAllocatorSetObjToDesc(d, pool);
    aclrtAllocatorSetAllocFuncToDesc(d, pool_alloc);
    aclrtAllocatorSetFreeFuncToDesc(d, pool_free);
    aclrtAllocatorSetGetAddrFromBlockFuncToDesc(d, pool_addr);
    return d;
}

/* One workspace on `stream`; returns the pool that served it. */
static Pool *use(aclrtStream stream) {
    aclrtAllocatorDesc desc;
    aclrtAllocator obj;
    aclrtAllocatorAllocFunc a;
    aclrtAllocatorFreeFunc f;
    if (aclrtAllocatorGetByStream(stream, &desc, &obj, &a, &f, NULL, NULL) != ACL_SUCCESS) return NULL;
    f(obj, a(obj, 256));
    return (Pool *)obj;
}

#define CHECK(c)                                                  \
    do {                                                          \
        if (!(c)) {                                               \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
            return 1;                                             \
        }                                                         \
    } while (0)

int main(void) {
    enum { STREAMS = 8 };
    static char streams[STREAMS];
    Pool shared = {"shared", 0, 0}, dedicated = {"dedicated", 0, 0};
    aclrtAllocatorDesc shared_desc = make_desc(&shared);
    aclrtAllocatorDesc dedicated_desc = make_desc(&dedicated);

    for (int i = 0; i < STREAMS; i++) CHECK(aclrtAllocatorRegister(&streams[i], shared_desc) == ACL_SUCCESS);
    for (int i = 0; i < STREAMS; i++) CHECK(use(&streams[i]) == &shared);

    /* Stream 0 moves to its own pool: the last registration wins. */
    CHECK(aclrtAllocatorRegister(&streams[0], dedicated_desc) == ACL_SUCCESS);
    CHECK(use(&streams[0]) == &dedicated);
    CHECK(use(&streams[1]) == &shared);

    /* The shared descriptor can go away; the streams keep their allocator. */
    CHECK(aclrtAllocatorDestroyDesc(shared_desc) == ACL_SUCCESS);
    CHECK(use(&streams[7]) == &shared);

    /* Unregistered streams have no allocator; unregistering twice is harmless. */
    for (int i = 1; i < STREAMS; i++) CHECK(aclrtAllocatorUnregister(&streams[i]) == ACL_SUCCESS);
    CHECK(aclrtAllocatorUnregister(&streams[1]) == ACL_SUCCESS);
    CHECK(use(&streams[1]) == NULL);
    (void)aclGetRecentErrMsg();
    CHECK(use(&streams[0]) == &dedicated);

    CHECK(aclrtAllocatorUnregister(&streams[0]) == ACL_SUCCESS);
    CHECK(aclrtAllocatorDestroyDesc(dedicated_desc) == ACL_SUCCESS);
    printf("shared pool: %d/%d allocs/frees, dedicated pool: %d/%d\n", shared.allocs, shared.frees,
           dedicated.allocs, dedicated.frees);
    CHECK(shared.allocs == STREAMS + 2 && shared.frees == shared.allocs);
    CHECK(dedicated.allocs == 2 && dedicated.frees == 2);
    return 0;
}
