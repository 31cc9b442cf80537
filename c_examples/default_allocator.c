/*
 * The default allocator: what serves memory when nothing is registered, and
 * the raw alloc/free (PyTorch's caching_allocator_alloc / _delete).
 *
 *   default_allocator swap   swaps in a pluggable allocator from C (like
 *                            change_current_allocator), uses it, then shows
 *                            that a second swap is refused.
 *   default_allocator env    expects ACLALLOC_DEFAULT_ALLOCATOR to name the
 *                            test plugin (plugin:PATH:my_malloc:my_free).
 */
#include <stdio.h>
#include <string.h>

#include "acl/acl.h"
#include "aclalloc.h"
#include "common/expect.h"

#ifndef PLUGIN_PATH
#define PLUGIN_PATH "libmy_plugin_allocator.so"
#endif

static void use_raw_functions(void) {
    static int stream_storage;
    void *ptrs[8];
    for (int i = 0; i < 8; i++) {
        EXPECT(aclallocDefaultMalloc(&ptrs[i], (size_t)1 << (10 + i), &stream_storage) == ACL_SUCCESS);
        memset(ptrs[i], i, (size_t)1 << (10 + i));
    }
    for (int i = 0; i < 8; i++) EXPECT(aclallocDefaultFree(ptrs[i]) == ACL_SUCCESS);
    aclError rc = aclallocDefaultFree(ptrs[0]);
    const char *msg = aclGetRecentErrMsg();
    printf("double free            -> %d: %s\n", rc, msg);
    EXPECT(rc == ACL_ERROR_INVALID_PARAM && strstr(msg, "Trying to free a pointer not allocated here"));
    aclallocAllocatorStats st;
    EXPECT(aclallocDefaultGetStats(&st) == ACL_SUCCESS);
    EXPECT(st.allocCount == 8 && st.freeCount == 8 && st.allocatedBytesCurrent == 0);
    EXPECT(st.allocatedBytesPeak == ((size_t)1 << 18) - 1024); /* all 8 live at once */
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "swap";
    if (strcmp(mode, "env") == 0) {
        const char *name = aclallocGetDefaultAllocatorName();
        printf("default allocator from the environment: %s\n", name ? name : "(invalid)");
        EXPECT(name != NULL && strcmp(name, "plugin") == 0);
        use_raw_functions();
    } else {
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
        EXPECT(aclallocSetDefaultAllocator(desc) == ACL_SUCCESS);
        printf("default allocator after the swap: %s\n", aclallocGetDefaultAllocatorName());
        use_raw_functions();
        aclError rc = aclallocSetDefaultAllocator(desc);
        const char *msg = aclGetRecentErrMsg();
        printf("swap after use         -> %d: %s\n", rc, msg);
        EXPECT(rc == ACL_ERROR_REPEAT_INITIALIZE &&
               strstr(msg, "can't swap an already initialized allocator") != NULL);
        rc = aclallocPluggableDestroy(plugin);
        msg = aclGetRecentErrMsg();
        printf("destroy the default    -> %d: %s\n", rc, msg);
        EXPECT(rc == ACL_ERROR_RELATIVE_RESOURCE_NOT_CLEARED);
        aclallocAllocatorStats st;
        EXPECT(aclallocPluggableGetStats(plugin, &st) == ACL_SUCCESS);
        /* The double free was refused by the default allocator: the plugin never saw it. */
        EXPECT(st.allocCount == 8 && st.freeCount == 8 && st.refusedFreeCount == 0);
    }
    printf("%s\n", failures == 0 ? "default_allocator: OK" : "default_allocator: FAILED");
    return failures == 0 ? 0 : 1;
}
