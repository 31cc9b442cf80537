/*
 * A custom allocator registered on a stream and used the way an inference
 * runtime uses it: the code that launches operators knows only the stream,
 * finds the allocator with aclrtAllocatorGetByStream and takes every
 * workspace through the callbacks it gets back.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acl/acl.h"

/* The user's allocator: a bump arena with a live-block count. */
typedef struct {
    unsigned char *base;
    size_t capacity, used;
    int live, allocs, frees;
} Arena;

typedef struct {
    void *addr;
    size_t size;
} Block;

static void *arena_alloc(aclrtAllocator allocator, size_t size) {
    Arena *a = (Arena *)allocator;
    size_t rounded = (size + 511) & ~(size_t)511;
    if (a->used + rounded > a->capacity) return NULL;
    Block *b = (Block *)malloc(sizeof *b);
    if (b == NULL) return NULL;
    b->addr = a->base + a->used;
    b->size = size;
    a->used += rounded;
    a->live++;
    a->allocs++;
    return b;
}

static void arena_free(aclrtAllocator allocator, aclrtAllocatorBlock block) {
    Arena *a = (Arena *)allocator;
    free(block);
    a->live--;
    a->frees++;
    if (a->live == 0) a->used = 0; /* the arena resets when everything is back */
}

static void *arena_addr(aclrtAllocatorBlock block) { return ((Block *)block)->addr; }

/* What an executor does for one operator with a workspace. */
static int run_operator(aclrtStream stream, size_t workspace_size, unsigned char fill) {
    aclrtAllocatorDesc desc = NULL;
    aclrtAllocator obj = NULL;
    aclrtAllocatorAllocFunc alloc_fn = NULL;
    aclrtAllocatorFreeFunc free_fn = NULL;
    aclrtAllocatorGetAddrFromBlockFunc addr_fn = NULL;
    if (aclrtAllocatorGetByStream(stream, &desc, &obj, &alloc_fn, &free_fn, NULL, &addr_fn) != ACL_SUCCESS)
        return -1;
    aclrtAllocatorBlock block = alloc_fn(obj, workspace_size);
    if (block == NULL) return -2;
    unsigned char *workspace = (unsigned char *)addr_fn(block);
    memset(workspace, fill, workspace_size); /* the "kernel" */
    int ok = workspace[0] == fill && workspace[workspace_size - 1] == fill;
    free_fn(obj, block);
    return ok ? 0 : -3;
}

int main(void) {
    static unsigned char device_memory[1 << 20];
    Arena arena = {device_memory, sizeof device_memory, 0, 0, 0, 0};
    static int stream_storage;
    aclrtStream stream = &stream_storage;

    aclrtAllocatorDesc desc = aclrtAllocatorCreateDesc();
    if (desc == NULL ||
        aclrtAllocatorSetObjToDesc(desc, &arena) != ACL_SUCCESS ||
        aclrtAllocatorSetAllocFuncToDesc(desc, arena_alloc) != ACL_SUCCESS ||
        aclrtAllocatorSetFreeFuncToDesc(desc, arena_free) != ACL_SUCCESS ||
        aclrtAllocatorSetGetAddrFromBlockFuncToDesc(desc, arena_addr) != ACL_SUCCESS ||
        aclrtAllocatorRegister(stream, desc) != ACL_SUCCESS) {
        fprintf(stderr, "setup failed: %s\n", aclGetRecentErrMsg());
        return 1;
    }

    const size_t sizes[] = {4096, 64 * 1024, 1, 512 * 1024, 300};
    for (int step = 0; step < 1000; step++) {
        size_t size = sizes[step % 5];
        int rc = run_operator(stream, size, (unsigned char)step);
        if (rc != 0) {
            fprintf(stderr, "operator %d (%zu bytes) failed: %d\n", step, size, rc);
            return 1;
        }
    }

    if (aclrtAllocatorUnregister(stream) != ACL_SUCCESS || aclrtAllocatorDestroyDesc(desc) != ACL_SUCCESS) {
        fprintf(stderr, "teardown failed: %s\n", aclGetRecentErrMsg());
        return 1;
    }
    printf("1000 operators ran on the custom allocator: %d allocs, %d frees, %d live\n",
           arena.allocs, arena.frees, arena.live);
    return arena.allocs == 1000 && arena.frees == 1000 && arena.live == 0 ? 0 : 1;
}
