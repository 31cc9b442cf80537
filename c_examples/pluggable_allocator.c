/*
 * A pluggable allocator in torch_npu's style, loaded from a shared object by
 * path and symbol names (like NPUPluggableAllocator('my_plugin.so',
 * 'my_malloc', 'my_free')), registered on streams, and used by executor code
 * that only knows the stream. Afterwards aclalloc's statistics and the
 * plugin's own counters must agree and balance.
 *
 * Usage: pluggable_allocator [PLUGIN_PATH]  (default: the one built with it)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "acl/acl.h"
#include "aclalloc.h"
#include "common/expect.h"

#ifndef PLUGIN_PATH
#define PLUGIN_PATH "libmy_plugin_allocator.so"
#endif

/* One operator with a workspace, as an executor runs it. */
static int run_operator(aclrtStream stream, size_t size, unsigned char fill) {
    aclrtAllocatorDesc desc;
    aclrtAllocator obj;
    aclrtAllocatorAllocFunc alloc_fn;
    aclrtAllocatorFreeFunc free_fn;
    aclrtAllocatorGetAddrFromBlockFunc addr_fn;
    if (aclrtAllocatorGetByStream(stream, &desc, &obj, &alloc_fn, &free_fn, NULL, &addr_fn) != ACL_SUCCESS)
        return 0;
    aclrtAllocatorBlock block = alloc_fn(obj, size);
    if (block == NULL) return 0;
    unsigned char *ws = (unsigned char *)addr_fn(block);
    memset(ws, fill, size);
    int ok = size == 0 || (ws[0] == fill && ws[size - 1] == fill);
    free_fn(obj, block);
    return ok;
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : PLUGIN_PATH;
    aclallocPluggableConfig config;
    memset(&config, 0, sizeof config);
    config.path = path;
    config.allocSymbol = "my_malloc";
    config.freeSymbol = "my_free";
    config.initSymbol = "my_init";
    config.emptyCacheSymbol = "my_empty_cache";

    aclallocPluggable plugin = NULL;
    aclrtAllocatorDesc desc = NULL;
    if (aclallocPluggableCreate(&config, &plugin, &desc) != ACL_SUCCESS) {
        fprintf(stderr, "aclallocPluggableCreate: %s\n", aclGetRecentErrMsg());
        return 1;
    }
    static int stream_storage[2];
    aclrtStream streams[2] = {&stream_storage[0], &stream_storage[1]};
    for (int s = 0; s < 2; s++) EXPECT(aclrtAllocatorRegister(streams[s], desc) == ACL_SUCCESS);

    static const size_t sizes[] = {0, 512, 4096, 65536, 1 << 20, 3 << 20};
    for (int i = 0; i < 1000; i++)
        EXPECT(run_operator(streams[i % 2], sizes[i % 6], (unsigned char)i));

    aclallocAllocatorStats st;
    EXPECT(aclallocPluggableGetStats(plugin, &st) == ACL_SUCCESS);
    printf("allocs %llu, frees %llu, live bytes %llu, peak bytes %llu\n",
           (unsigned long long)st.allocCount, (unsigned long long)st.freeCount,
           (unsigned long long)st.allocatedBytesCurrent, (unsigned long long)st.allocatedBytesPeak);
    EXPECT(st.allocCount == 1000 && st.freeCount == 1000);
    EXPECT(st.activeCount == 0 && st.allocatedBytesCurrent == 0);
    EXPECT(st.allocatedBytesPeak == (3 << 20));
    EXPECT(st.failedAllocCount == 0 && st.refusedFreeCount == 0);

    /* The plugin's own view, from the object aclalloc loaded. */
    void *same = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    EXPECT(same != NULL);
    if (same != NULL) {
        void (*counters)(long *) = NULL;
        *(void **)&counters = dlsym(same, "my_plugin_counters");
        long c[10] = {0};
        if (counters != NULL) counters(c);
        printf("plugin: live %ld, allocs %ld, frees %ld, mismatched frees %ld, init(%ld) x%ld\n",
               c[0], c[1], c[2], c[3], c[5], c[4]);
        EXPECT(c[0] == 0 && c[1] == 1000 && c[2] == 1000 && c[3] == 0 && c[4] == 1);
        EXPECT(aclallocPluggableEmptyCache(plugin) == ACL_SUCCESS);
        if (counters != NULL) counters(c);
        EXPECT(c[6] == 1 && c[8] == 0); /* the cache went back to the system */
        printf("plugin: %ld blocks taken from the system for 1000 workspaces\n", c[9]);
        dlclose(same);
    }

    for (int s = 0; s < 2; s++) EXPECT(aclrtAllocatorUnregister(streams[s]) == ACL_SUCCESS);
    EXPECT(aclallocPluggableDestroy(plugin) == ACL_SUCCESS);
    printf("%s\n", failures == 0 ? "pluggable_allocator: OK" : "pluggable_allocator: FAILED");
    return failures == 0 ? 0 : 1;
}
