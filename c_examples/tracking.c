/*
 * The allocator tracking layer from C, without any runtime: turn it on, let
 * "executor" code take workspaces through the callbacks
 * aclrtAllocatorGetByStream hands out, read the statistics, provoke two
 * faults, and write the report and the JSON snapshot.
 *
 * The same layer runs in front of a real runtime with
 *   aclalloc run -- ./your_program
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "acl/acl.h"
#include "aclalloc.h"
#include "common/expect.h"

#define NBLOCKS 4
#define BLOCK_BYTES 4096

/* The user's allocator: four fixed blocks, tolerant of a double free. */
typedef struct {
    unsigned char memory[NBLOCKS][BLOCK_BYTES];
    int in_use[NBLOCKS];
    int allocs, frees, bad_frees;
} Slab;

static void *slab_alloc(aclrtAllocator allocator, size_t size) {
    Slab *s = (Slab *)allocator;
    if (size > BLOCK_BYTES) return NULL;
    for (int i = 0; i < NBLOCKS; i++) {
        if (!s->in_use[i]) {
            s->in_use[i] = 1;
            s->allocs++;
            return s->memory[i];
        }
    }
    return NULL;
}

static void slab_free(aclrtAllocator allocator, aclrtAllocatorBlock block) {
    Slab *s = (Slab *)allocator;
    for (int i = 0; i < NBLOCKS; i++) {
        if (block == s->memory[i] && s->in_use[i]) {
            s->in_use[i] = 0;
            s->frees++;
            return;
        }
    }
    s->bad_frees++;
}

static void *slab_addr(aclrtAllocatorBlock block) { return block; }

int main(void) {
    static Slab slab;
    int stream_storage;
    aclrtStream stream = &stream_storage; /* any non-NULL handle without a runtime */

    EXPECT(aclallocTrackingSetEnabled(1) == ACL_SUCCESS);
    EXPECT(aclallocTrackingIsEnabled() == 1);

    aclrtAllocatorDesc desc = aclrtAllocatorCreateDesc();
    aclrtAllocatorSetObjToDesc(desc, &slab);
    aclrtAllocatorSetAllocFuncToDesc(desc, slab_alloc);
    aclrtAllocatorSetFreeFuncToDesc(desc, slab_free);
    aclrtAllocatorSetGetAddrFromBlockFuncToDesc(desc, slab_addr);
    EXPECT(aclrtAllocatorRegister(stream, desc) == ACL_SUCCESS);

    /* What an executor does for each operator. */
    aclrtAllocatorDesc found = NULL;
    aclrtAllocator obj = NULL;
    aclrtAllocatorAllocFunc alloc = NULL;
    aclrtAllocatorFreeFunc release = NULL;
    aclrtAllocatorGetAddrFromBlockFunc addr = NULL;
    EXPECT(aclrtAllocatorGetByStream(stream, &found, &obj, &alloc, &release, NULL, &addr) ==
           ACL_SUCCESS);
    EXPECT(found == desc);              /* the user's descriptor ...         */
    EXPECT(obj != (aclrtAllocator)&slab); /* ... and the tracking object      */
    for (int i = 0; i < 1000; i++) {
        void *block = alloc(obj, (size_t)(i % 8 + 1) * 512);
        unsigned char *workspace = addr(block);
        memset(workspace, i, (size_t)(i % 8 + 1) * 512);
        release(obj, block);
    }
    EXPECT(slab.allocs == 1000 && slab.frees == 1000); /* the user's allocator did the work */

    aclallocTrackingStats stats;
    EXPECT(aclallocTrackingGetStats(&slab, &stats) == ACL_SUCCESS);
    EXPECT(stats.allocation.allocated == 1000 && stats.allocation.freed == 1000);
    EXPECT(stats.allocation.current == 0 && stats.allocation.peak == 1);
    EXPECT(stats.allocated_bytes.peak == 8 * 512);
    EXPECT(aclallocTrackingFaultCount() == 0);

    /* Two faults: a double free, and a block still live at unregister. */
    void *twice = alloc(obj, 100);
    addr(twice);
    release(obj, twice);
    release(obj, twice);
    EXPECT(slab.bad_frees == 1); /* passed through, as the user's own free would see it */
    EXPECT(aclallocTrackingFaultCount() == 1);
    void *leaked = alloc(obj, 300);
    addr(leaked);
    EXPECT(aclallocTrackingWriteSnapshot("tracking_snapshot.json") == ACL_SUCCESS);
    EXPECT(aclrtAllocatorUnregister(stream) == ACL_SUCCESS);
    EXPECT(aclallocTrackingFaultCount() == 2);
    EXPECT(aclallocTrackingWriteReport(NULL) == ACL_SUCCESS);

    /* Errors are CANN-shaped. */
    EXPECT(aclallocTrackingGetStats(&slab, NULL) == ACL_ERROR_INVALID_PARAM);
    EXPECT(aclallocTrackingGetStats(&stream_storage, &stats) == ACL_ERROR_INVALID_PARAM);
    EXPECT(aclallocTrackingWriteSnapshot(NULL) == ACL_ERROR_INVALID_PARAM);
    const char *message = aclGetRecentErrMsg();
    EXPECT(message != NULL && strstr(message, "aclallocTrackingWriteSnapshot failed") != NULL);

    /* Off again: GetByStream hands out exactly what was registered. */
    EXPECT(aclallocTrackingSetEnabled(0) == ACL_SUCCESS);
    EXPECT(aclrtAllocatorRegister(stream, desc) == ACL_SUCCESS);
    EXPECT(aclrtAllocatorGetByStream(stream, &found, &obj, &alloc, &release, NULL, &addr) ==
           ACL_SUCCESS);
    EXPECT(obj == (aclrtAllocator)&slab && alloc == slab_alloc && release == slab_free &&
           addr == slab_addr);
    aclrtAllocatorUnregister(stream);
    aclrtAllocatorDestroyDesc(desc);

    printf("tracking: %s\n", failures == 0 ? "all checks passed" : "FAILED");
    return failures == 0 ? 0 : 1;
}
