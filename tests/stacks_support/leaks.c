/*
 * Leaks from two call sites, for tests/stacks.rs: load_weights leaks three
 * 4 KiB blocks, make_cache one of 512 bytes. Built with -g, so the report
 * names both with file and line.
 */
#include <stdio.h>
#include <stdlib.h>

#include "acl/acl.h"

static void *user_alloc(aclrtAllocator allocator, size_t size) {
    (void)allocator;
    return malloc(size);
}
static void user_free(aclrtAllocator allocator, aclrtAllocatorBlock block) {
    (void)allocator;
    free(block);
}
static void *user_addr(aclrtAllocatorBlock block) { return block; }

static aclrtAllocator obj;
static aclrtAllocatorAllocFunc alloc_fn;
static aclrtAllocatorGetAddrFromBlockFunc addr_fn;

__attribute__((noinline)) void load_weights(int n) {
    for (int i = 0; i < n; i++) addr_fn(alloc_fn(obj, 4096)); /* site: load_weights */
}

__attribute__((noinline)) void make_cache(void) {
    addr_fn(alloc_fn(obj, 512)); /* site: make_cache */
}

int main(void) {
    static int stream_storage, state;
    aclrtStream stream = &stream_storage; /* any non-NULL handle without a runtime */
    aclrtAllocatorDesc desc = aclrtAllocatorCreateDesc();
    aclrtAllocatorSetObjToDesc(desc, &state);
    aclrtAllocatorSetAllocFuncToDesc(desc, user_alloc);
    aclrtAllocatorSetFreeFuncToDesc(desc, user_free);
    aclrtAllocatorSetGetAddrFromBlockFuncToDesc(desc, user_addr);
    if (aclrtAllocatorRegister(stream, desc) != ACL_SUCCESS) return 1;
    aclrtAllocatorDesc found = NULL;
    aclrtAllocatorFreeFunc release = NULL;
    if (aclrtAllocatorGetByStream(stream, &found, &obj, &alloc_fn, &release, NULL, &addr_fn) !=
        ACL_SUCCESS)
        return 1;
    load_weights(3);
    make_cache();
    puts("done");
    return 0;
}
