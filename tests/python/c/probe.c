/* C code in the same process as the Python package: reads what Python did
 * through the C API (the default pool's statistics, a stream's registered
 * descriptor), to show that both see one library and one state. Built with
 * `cc -shared` and no -l: the symbols come from the already loaded library. */
#include <stdint.h>

#include "aclalloc.h"

/* A statistic of the default pool by its PyTorch key; -1: no default pool yet. */
int64_t probe_default_pool_stat(const char *key) {
    aclrtAllocator pool = NULL;
    int64_t value = 0;
    if (aclallocGetDefaultAllocator(&pool) != ACL_SUCCESS) {
        (void)aclGetRecentErrMsg();
        return -1;
    }
    if (aclallocPoolGetStat(pool, key, &value) != ACL_SUCCESS)
        return -2;
    return value;
}

/* The descriptor registered for a stream (NULL: none). */
void *probe_registered_desc(void *stream) {
    aclrtAllocatorDesc desc = NULL;
    if (aclrtAllocatorGetByStream(stream, &desc, NULL, NULL, NULL, NULL, NULL) != ACL_SUCCESS) {
        (void)aclGetRecentErrMsg();
        return NULL;
    }
    return desc;
}
