/*
 * Memory pools (PyTorch's MemPool and use_mem_pool) from C: a pool whose
 * segments come from a pluggable allocator, a use of it on device 0 that
 * routes this thread's aclallocDefaultMalloc there, blocks that keep their
 * pool after the use, and a destroy that gives the segments back to the
 * plugin once the blocks are freed.
 */
#include <stdio.h>
#include <string.h>

#include "acl/acl.h"
#include "aclalloc.h"
#include "common/expect.h"

#ifndef PLUGIN_PATH
#define PLUGIN_PATH "libmy_plugin_allocator.so"
#endif

/* How many times `needle` occurs in `text`. */
static int count(const char *text, const char *needle) {
    int n = 0;
    for (const char *at = strstr(text, needle); at != NULL; at = strstr(at + 1, needle)) n++;
    return n;
}

int main(void) {
    EXPECT(aclInit(NULL) == ACL_SUCCESS);
    EXPECT(aclrtSetDevice(0) == ACL_SUCCESS);

    aclallocPluggableConfig config;
    memset(&config, 0, sizeof config);
    config.path = PLUGIN_PATH;
    config.allocSymbol = "my_malloc";
    config.freeSymbol = "my_free";
    aclallocPluggable plugin;
    aclrtAllocatorDesc desc;
    if (aclallocPluggableCreate(&config, &plugin, &desc) != ACL_SUCCESS) {
        fprintf(stderr, "%s\n", aclGetRecentErrMsg());
        return 1;
    }

    aclallocMemPoolOptions options;
    memset(&options, 0, sizeof options);
    options.allocator = plugin;
    options.tag = "weights";
    aclallocMemPool pool;
    EXPECT(aclallocMemPoolCreate(&options, &pool) == ACL_SUCCESS);
    uint64_t id = 0, uses = 0;
    EXPECT(aclallocMemPoolGetId(pool, &id) == ACL_SUCCESS && id > 0);

    void *weights[3];
    EXPECT(aclallocMemPoolBeginUse(pool, 0) == ACL_SUCCESS);
    EXPECT(aclallocMemPoolUseCount(pool, &uses) == ACL_SUCCESS && uses == 2);
    for (int i = 0; i < 3; i++) {
        EXPECT(aclallocDefaultMalloc(&weights[i], (size_t)1 << 20, NULL) == ACL_SUCCESS);
        memset(weights[i], i, (size_t)1 << 20);
    }
    EXPECT(aclallocMemPoolEndUse(pool, 0) == ACL_SUCCESS);
    void *scratch;
    EXPECT(aclallocDefaultMalloc(&scratch, 4096, NULL) == ACL_SUCCESS);

    char snapshot[16384];
    size_t length = 0;
    EXPECT(aclallocMemPoolSnapshot(pool, snapshot, sizeof snapshot, &length) == ACL_SUCCESS);
    EXPECT(length < sizeof snapshot);
    printf("memory pool %llu: %d live blocks\n", (unsigned long long)id,
           count(snapshot, "active_allocated"));
    EXPECT(count(snapshot, "active_allocated") == 3);

    aclallocAllocatorStats st;
    EXPECT(aclallocPluggableGetStats(plugin, &st) == ACL_SUCCESS);
    printf("plugin segments live   -> %llu\n", (unsigned long long)st.activeCount);
    EXPECT(st.activeCount > 0);
    expect("aclallocPluggableDestroy (pool holds it)", aclallocPluggableDestroy(plugin),
           ACL_ERROR_RELATIVE_RESOURCE_NOT_CLEARED, "Blocks it handed out");
    expect("aclallocMemPoolEndUse (no use here)", aclallocMemPoolEndUse(pool, 0),
           ACL_ERROR_INVALID_PARAM, "no use of the pool");

    /* Destroyed with live blocks: deferred; the blocks stay usable. */
    expect("aclallocMemPoolDestroy", aclallocMemPoolDestroy(pool), ACL_SUCCESS, NULL);
    memset(weights[0], 0x7F, (size_t)1 << 20);
    for (int i = 0; i < 3; i++) EXPECT(aclallocDefaultFree(weights[i]) == ACL_SUCCESS);
    EXPECT(aclallocDefaultFree(scratch) == ACL_SUCCESS);
    EXPECT(aclallocPluggableGetStats(plugin, &st) == ACL_SUCCESS);
    printf("plugin segments live   -> %llu\n", (unsigned long long)st.activeCount);
    EXPECT(st.activeCount == 0);
    expect("aclallocPluggableDestroy", aclallocPluggableDestroy(plugin), ACL_SUCCESS, NULL);

    printf("%s\n", failures == 0 ? "mem_pool: OK" : "mem_pool: FAILED");
    return failures == 0 ? 0 : 1;
}
