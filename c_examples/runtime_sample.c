/*
 * CANN's custom-allocator sample flow, end to end, on the host runtime:
 * init, device, context, stream, descriptor, register, GetByStream, use the
 * callbacks (directly and through operator launches), unregister, destroy
 * everything, finalize.
 */
#include <stdio.h>
#include <string.h>

#include "acl/acl.h"
#include "aclalloc.h"
#include "common/check.h"

/* The user's allocator: fixed-size blocks carved from one device buffer. */
#define BLOCKS 16
#define BLOCK_BYTES (256 * 1024)
typedef struct {
    void *device_base;
    int in_use[BLOCKS];
    int allocs, frees;
} BlockPool;

typedef struct {
    BlockPool *pool;
    int index;
} Block;

static Block block_table[BLOCKS];

static void *pool_alloc(aclrtAllocator allocator, size_t size) {
    BlockPool *p = (BlockPool *)allocator;
    if (size > BLOCK_BYTES) return NULL;
    for (int i = 0; i < BLOCKS; i++) {
        if (!p->in_use[i]) {
            p->in_use[i] = 1;
            p->allocs++;
            block_table[i].pool = p;
            block_table[i].index = i;
            return &block_table[i];
        }
    }
    return NULL;
}

static void pool_free(aclrtAllocator allocator, aclrtAllocatorBlock block) {
    BlockPool *p = (BlockPool *)allocator;
    p->in_use[((Block *)block)->index] = 0;
    p->frees++;
}

static void *pool_addr(aclrtAllocatorBlock block) {
    Block *b = (Block *)block;
    return (char *)b->pool->device_base + (size_t)b->index * BLOCK_BYTES;
}

/* A "kernel": sums its input into the workspace, then writes the result. */
typedef struct {
    const unsigned char *input;
    size_t n;
    unsigned long *result;
} SumArgs;

static void sum_kernel(void *workspace, size_t size, void *user_data) {
    SumArgs *a = (SumArgs *)user_data;
    unsigned long *acc = (unsigned long *)workspace;
    if (size < sizeof *acc) return;
    *acc = 0;
    for (size_t i = 0; i < a->n; i++) *acc += a->input[i];
    memset((char *)workspace + sizeof *acc, 0xEE, size - sizeof *acc); /* the whole workspace is ours */
    *a->result = *acc;
}

int main(void) {
    CHECK(aclInit(NULL));
    uint32_t devices = 0;
    CHECK(aclrtGetDeviceCount(&devices));
    CHECK(aclrtSetDevice(0));
    aclrtContext context = NULL;
    CHECK(aclrtCreateContext(&context, 0));
    aclrtStream stream = NULL;
    CHECK(aclrtCreateStream(&stream));
    size_t free_bytes = 0, total_bytes = 0;
    CHECK(aclrtGetMemInfo(ACL_HBM_MEM, &free_bytes, &total_bytes));
    printf("%u device(s); device 0: %zu of %zu bytes free\n", devices, free_bytes, total_bytes);

    /* The allocator's memory comes from the device. */
    BlockPool pool = {0};
    CHECK(aclrtMalloc(&pool.device_base, BLOCKS * BLOCK_BYTES, ACL_MEM_MALLOC_HUGE_FIRST));

    aclrtAllocatorDesc desc = aclrtAllocatorCreateDesc();
    if (desc == NULL) return 1;
    CHECK(aclrtAllocatorSetObjToDesc(desc, &pool));
    CHECK(aclrtAllocatorSetAllocFuncToDesc(desc, pool_alloc));
    CHECK(aclrtAllocatorSetFreeFuncToDesc(desc, pool_free));
    CHECK(aclrtAllocatorSetGetAddrFromBlockFuncToDesc(desc, pool_addr));
    CHECK(aclrtAllocatorRegister(stream, desc));

    /* What a framework does with GetByStream: use the callbacks directly. */
    aclrtAllocatorDesc found = NULL;
    aclrtAllocator obj = NULL;
    aclrtAllocatorAllocFunc alloc_fn = NULL;
    aclrtAllocatorFreeFunc free_fn = NULL;
    aclrtAllocatorGetAddrFromBlockFunc addr_fn = NULL;
    CHECK(aclrtAllocatorGetByStream(stream, &found, &obj, &alloc_fn, &free_fn, NULL, &addr_fn));
    if (found != desc || obj != &pool) return 1;
    aclrtAllocatorBlock block = alloc_fn(obj, 4096);
    void *dev = addr_fn(block);
    unsigned char host_in[4096], host_out[4096];
    for (int i = 0; i < 4096; i++) host_in[i] = (unsigned char)(i * 7);
    CHECK(aclrtMemcpy(dev, 4096, host_in, sizeof host_in, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK(aclrtMemsetAsync((char *)dev + 2048, 2048, 0x5A, 2048, stream));
    CHECK(aclrtMemcpyAsync(host_out, sizeof host_out, dev, 4096, ACL_MEMCPY_DEVICE_TO_HOST, stream));
    CHECK(aclrtSynchronizeStream(stream));
    free_fn(obj, block);
    if (memcmp(host_out, host_in, 2048) != 0 || host_out[2048] != 0x5A || host_out[4095] != 0x5A) {
        fprintf(stderr, "device round trip corrupted data\n");
        return 1;
    }

    /* What CANN's executor does: operator launches take their workspace
     * from the stream's allocator. */
    unsigned long results[100];
    SumArgs args[100];
    for (int i = 0; i < 100; i++) {
        args[i].input = host_in;
        args[i].n = (size_t)(i + 1) * 40;
        args[i].result = &results[i];
        CHECK(aclallocLaunchKernel(stream, 1024 + (size_t)i * 1000, sum_kernel, &args[i]));
    }
    CHECK(aclrtSynchronizeStream(stream));
    for (int i = 0; i < 100; i++) {
        unsigned long want = 0;
        for (size_t k = 0; k < args[i].n; k++) want += host_in[k];
        if (results[i] != want) {
            fprintf(stderr, "launch %d computed %lu, wanted %lu\n", i, results[i], want);
            return 1;
        }
    }

    CHECK(aclrtAllocatorUnregister(stream));
    CHECK(aclrtAllocatorDestroyDesc(desc));
    CHECK(aclrtDestroyStream(stream));
    CHECK(aclrtFree(pool.device_base));
    CHECK(aclrtDestroyContext(context));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("101 workspaces from the registered allocator: %d allocs, %d frees\n", pool.allocs, pool.frees);
    return pool.allocs == 101 && pool.frees == 101 ? 0 : 1;
}
