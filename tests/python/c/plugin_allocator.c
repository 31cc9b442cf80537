/* A pluggable allocator in torch_npu's shape that calls aclrtMalloc/aclrtFree
 * without linking any library (built with `cc -shared`, no -l): the symbols
 * come from the libaclalloc the Python package loaded with RTLD_GLOBAL. It
 * counts its calls and checks that free gets the size alloc got. */
#include <sys/types.h>

#include "acl/acl.h"

static long allocs, frees, size_mismatches;
static void *last_ptr;
static ssize_t last_size;

void *my_malloc(ssize_t size, int device, aclrtStream stream) {
    (void)device;
    (void)stream;
    void *p = NULL;
    if (size < 0 || aclrtMalloc(&p, (size_t)size, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS)
        return NULL;
    __atomic_add_fetch(&allocs, 1, __ATOMIC_SEQ_CST);
    last_ptr = p;
    last_size = size;
    return p;
}

void my_free(void *ptr, ssize_t size, int device, aclrtStream stream) {
    (void)device;
    (void)stream;
    if (ptr == last_ptr && size != last_size)
        __atomic_add_fetch(&size_mismatches, 1, __ATOMIC_SEQ_CST);
    aclrtFree(ptr);
    __atomic_add_fetch(&frees, 1, __ATOMIC_SEQ_CST);
}

long plugin_allocs(void) { return allocs; }
long plugin_frees(void) { return frees; }
long plugin_size_mismatches(void) { return size_mismatches; }
