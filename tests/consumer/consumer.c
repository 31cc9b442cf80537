/* A program built against an installed aclalloc (tests/install.rs builds it
 * through pkg-config and through find_package): CANN's include path, the
 * header's version macros, and one register / look-up round trip. */
#include <acl/acl_rt_allocator.h>
#include <aclalloc.h>
#include <stdio.h>

#if !defined(ACLALLOC_VERSION_MAJOR) || !defined(ACLALLOC_VERSION_STRING)
#error "aclalloc.h lacks its version macros"
#endif

static void *alloc_block(aclrtAllocator allocator, size_t size) { (void)allocator; (void)size; return NULL; }
static void free_block(aclrtAllocator allocator, aclrtAllocatorBlock block) { (void)allocator; (void)block; }
static void *block_addr(aclrtAllocatorBlock block) { return block; }

int main(void) {
    int pool = 0, stream = 0;
    aclrtAllocatorDesc desc = aclrtAllocatorCreateDesc();
    aclrtAllocatorDesc found = NULL;
    aclrtAllocator obj = NULL;
    if (desc == NULL) return 1;
    if (aclrtAllocatorSetObjToDesc(desc, &pool) != ACL_SUCCESS ||
        aclrtAllocatorSetAllocFuncToDesc(desc, alloc_block) != ACL_SUCCESS ||
        aclrtAllocatorSetFreeFuncToDesc(desc, free_block) != ACL_SUCCESS ||
        aclrtAllocatorSetGetAddrFromBlockFuncToDesc(desc, block_addr) != ACL_SUCCESS ||
        aclrtAllocatorRegister(&stream, desc) != ACL_SUCCESS)
        return 2;
    if (aclrtAllocatorGetByStream(&stream, &found, &obj, NULL, NULL, NULL, NULL) != ACL_SUCCESS ||
        found != desc || obj != &pool)
        return 3;
    if (aclrtAllocatorUnregister(&stream) != ACL_SUCCESS || aclrtAllocatorDestroyDesc(desc) != ACL_SUCCESS)
        return 4;
    if (aclrtAllocatorUnregister(NULL) != ACL_ERROR_INVALID_PARAM || aclGetRecentErrMsg() == NULL)
        return 5;
    printf("aclalloc %s (%d.%d.%d) ok\n", ACLALLOC_VERSION_STRING, ACLALLOC_VERSION_MAJOR,
           ACLALLOC_VERSION_MINOR, ACLALLOC_VERSION_PATCH);
    return 0;
}
