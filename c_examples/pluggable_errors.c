/*
 * Every failure of a pluggable allocator, with its code and message: a
 * missing shared object, a missing symbol, a plugin that returns NULL, a
 * pointer it never handed out, a double free, destroying it while in use.
 */
#include <stdio.h>
#include <string.h>

#include "acl/acl.h"
#include "aclalloc.h"

#ifndef PLUGIN_PATH
#define PLUGIN_PATH "libmy_plugin_allocator.so"
#endif

static int failures;

/* Checks the code and that the message contains `want`; prints both. */
static void expect(const char *what, aclError got, aclError want_code, const char *want) {
    const char *msg = aclGetRecentErrMsg();
    printf("%-28s -> %d: %s\n", what, got, msg ? msg : "(no message)");
    if (got != want_code || msg == NULL || strstr(msg, want) == NULL) {
        fprintf(stderr, "  expected %d and a message containing \"%s\"\n", want_code, want);
        failures++;
    }
}

static aclallocPluggableConfig config_for(const char *path, const char *alloc_sym) {
    aclallocPluggableConfig c;
    memset(&c, 0, sizeof c);
    c.path = path;
    c.allocSymbol = alloc_sym;
    c.freeSymbol = "my_free";
    return c;
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : PLUGIN_PATH;
    aclallocPluggable plugin = NULL;
    aclrtAllocatorDesc desc = NULL;

    aclallocPluggableConfig missing_file = config_for("/nonexistent/libno_such_plugin.so", "my_malloc");
    expect("missing shared object", aclallocPluggableCreate(&missing_file, &plugin, &desc),
           ACL_ERROR_INVALID_FILE, "libno_such_plugin.so: cannot open shared object file");
    if (plugin != NULL || desc != NULL) failures++; /* nothing written on failure */

    aclallocPluggableConfig missing_symbol = config_for(path, "no_such_malloc");
    expect("missing symbol", aclallocPluggableCreate(&missing_symbol, &plugin, &desc),
           ACL_ERROR_FILE_MISSING_ATTR, "undefined symbol: no_such_malloc");

    aclallocPluggableConfig null_symbol = config_for(path, NULL);
    expect("NULL allocSymbol", aclallocPluggableCreate(&null_symbol, &plugin, &desc),
           ACL_ERROR_INVALID_PARAM, "config->allocSymbol cannot be a NULL pointer");

    aclallocPluggableConfig good = config_for(path, "my_malloc");
    if (aclallocPluggableCreate(&good, &plugin, &desc) != ACL_SUCCESS) {
        fprintf(stderr, "create: %s\n", aclGetRecentErrMsg());
        return 1;
    }

    void *p = NULL;
    expect("plugin returns NULL", aclallocPluggableMalloc(plugin, &p, (size_t)4 << 30, NULL),
           ACL_ERROR_RT_MEMORY_ALLOCATION, "returned NULL for 4294967296 bytes");

    int on_stack = 0;
    expect("foreign pointer", aclallocPluggableFree(plugin, &on_stack), ACL_ERROR_INVALID_PARAM,
           "Trying to free a pointer not allocated here");

    if (aclallocPluggableMalloc(plugin, &p, 4096, NULL) != ACL_SUCCESS) failures++;
    expect("destroy with a live block", aclallocPluggableDestroy(plugin),
           ACL_ERROR_RELATIVE_RESOURCE_NOT_CLEARED, "Blocks it handed out that were not freed: 1");
    if (aclallocPluggableFree(plugin, p) != ACL_SUCCESS) failures++;
    expect("double free", aclallocPluggableFree(plugin, p), ACL_ERROR_INVALID_PARAM,
           "already freed: a double free");

    /* The same refusal through the descriptor's free callback (it returns
     * nothing, so only the message tells). */
    static int stream_storage;
    aclrtStream stream = &stream_storage;
    aclrtAllocator obj;
    aclrtAllocatorFreeFunc free_fn;
    if (aclrtAllocatorRegister(stream, desc) != ACL_SUCCESS ||
        aclrtAllocatorGetByStream(stream, &desc, &obj, NULL, &free_fn, NULL, NULL) != ACL_SUCCESS)
        failures++;
    free_fn(obj, &on_stack);
    expect("foreign block via callback", ACL_ERROR_INVALID_PARAM, ACL_ERROR_INVALID_PARAM,
           "Trying to free a pointer not allocated here");

    expect("destroy while registered", aclallocPluggableDestroy(plugin),
           ACL_ERROR_RELATIVE_RESOURCE_NOT_CLEARED, "Streams registered with it");
    aclallocAllocatorStats st;
    if (aclallocPluggableGetStats(plugin, &st) != ACL_SUCCESS || st.refusedFreeCount != 3 ||
        st.failedAllocCount != 1 || st.activeCount != 0)
        failures++;
    aclrtAllocatorUnregister(stream);
    if (aclallocPluggableDestroy(plugin) != ACL_SUCCESS) failures++;
    expect("use after destroy", aclallocPluggableMalloc(plugin, &p, 16, NULL), ACL_ERROR_INVALID_PARAM,
           "not a live pluggable allocator");

    printf("%s\n", failures == 0 ? "pluggable_errors: OK" : "pluggable_errors: FAILED");
    return failures == 0 ? 0 : 1;
}
