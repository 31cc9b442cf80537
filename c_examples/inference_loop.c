/*
 * An inference loop on the host runtime: 4 streams, each driven by its own
 * thread with its own registered allocator, 10,000 operator launches with
 * workspaces drawn from a realistic mix (none, a few KiB, MiB-scale).
 *
 * Every kernel checks that its workspace lies in its stream's allocator
 * arena, is writable over its whole requested size, and is not being used
 * by any other kernel running at the same time. After synchronizing, every
 * allocator must have seen as many frees as allocs.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "acl/acl.h"
#include "aclalloc.h"
#include "common/check.h"
#include "common/workload.h"

#define STREAMS 4
#define LAUNCHES 10000
#define PAGE 4096
#define ARENA_BYTES ((size_t)64 << 20)

/* The user's allocator: a bump arena in device memory that starts over when
 * every block is back. Blocks come back in stream order (right after each
 * launch is enqueued), so the next launch on the stream may get the same
 * memory: legal, because it runs after the previous kernel. */
typedef struct {
    unsigned char *base;
    size_t used;
    int live;
    long allocs, frees, failed;
    pthread_mutex_t lock;
} Arena;

typedef struct {
    unsigned char *addr;
    size_t size;
} Block;

#define MAX_LIVE 8
typedef struct {
    Arena *arena;
    Block blocks[MAX_LIVE];
    int used[MAX_LIVE];
} Pool;

static void *pool_alloc(aclrtAllocator allocator, size_t size) {
    Pool *p = (Pool *)allocator;
    Arena *a = p->arena;
    void *result = NULL;
    pthread_mutex_lock(&a->lock);
    size_t rounded = (size + 511) & ~(size_t)511;
    for (int i = 0; i < MAX_LIVE; i++) {
        if (!p->used[i] && a->used + rounded <= ARENA_BYTES) {
            p->used[i] = 1;
            p->blocks[i].addr = a->base + a->used;
            p->blocks[i].size = size;
            a->used += rounded;
            a->live++;
            a->allocs++;
            result = &p->blocks[i];
            break;
        }
    }
    if (result == NULL) a->failed++;
    pthread_mutex_unlock(&a->lock);
    return result;
}

static void pool_free(aclrtAllocator allocator, aclrtAllocatorBlock block) {
    Pool *p = (Pool *)allocator;
    Arena *a = p->arena;
    pthread_mutex_lock(&a->lock);
    p->used[(Block *)block - p->blocks] = 0;
    a->frees++;
    if (--a->live == 0) a->used = 0;
    pthread_mutex_unlock(&a->lock);
}

static void *pool_addr(aclrtAllocatorBlock block) { return ((Block *)block)->addr; }

static atomic_long out_of_arena, bad_bytes, out_of_order, kernels_run, empty_workspaces;
static long next_seq[STREAMS]; /* written only by each stream's worker */

typedef struct {
    int stream_index;
    long seq;
    unsigned char *arena_base;
    unsigned char fill;
} KernelArgs;

static void kernel(void *workspace, size_t size, void *user_data) {
    KernelArgs *args = (KernelArgs *)user_data;
    kernels_run++;
    if (args->seq != next_seq[args->stream_index]++) out_of_order++;
    if (size == 0) {
        if (workspace != NULL) bad_bytes++;
        empty_workspaces++;
        return;
    }
    unsigned char *ws = (unsigned char *)workspace;
    if (ws < args->arena_base || ws + size > args->arena_base + ARENA_BYTES) {
        out_of_arena++;
        return;
    }
    int slot = workspace_claim(ws, size);
    /* Touch every page and both ends: the whole requested size is writable. */
    bad_bytes += workspace_touch(ws, size, args->fill, PAGE);
    workspace_release(slot);
}

typedef struct {
    int index;
    aclrtContext context;
    aclrtStream stream;
    Arena arena;
    Pool pool;
    KernelArgs args[LAUNCHES / STREAMS];
    int failures;
} Worker;

static void *drive(void *arg) {
    Worker *w = (Worker *)arg;
    uint64_t rng = workload_seed(w->index);
    if (aclrtSetCurrentContext(w->context) != ACL_SUCCESS) {
        w->failures++;
        return NULL;
    }
    for (int i = 0; i < LAUNCHES / STREAMS; i++) {
        KernelArgs *a = &w->args[i];
        a->stream_index = w->index;
        a->seq = i;
        a->arena_base = w->arena.base;
        a->fill = (unsigned char)(i + 1);
        size_t size = workload_next_size(&rng);
        aclError rc = aclallocLaunchKernel(w->stream, size, kernel, a);
        if (rc != ACL_SUCCESS) {
            fprintf(stderr, "stream %d launch %d (%zu bytes): %d %s\n", w->index, i, size, rc, aclGetRecentErrMsg());
            w->failures++;
            return NULL;
        }
    }
    if (aclrtSynchronizeStream(w->stream) != ACL_SUCCESS) w->failures++;
    return NULL;
}

static Worker workers[STREAMS];

int main(void) {
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtContext context = NULL;
    CHECK(aclrtGetCurrentContext(&context));

    aclrtAllocatorDesc descs[STREAMS];
    for (int s = 0; s < STREAMS; s++) {
        Worker *w = &workers[s];
        w->index = s;
        w->context = context;
        pthread_mutex_init(&w->arena.lock, NULL);
        void *base = NULL;
        CHECK(aclrtMalloc(&base, ARENA_BYTES, ACL_MEM_MALLOC_HUGE_FIRST));
        w->arena.base = (unsigned char *)base;
        w->pool.arena = &w->arena;
        CHECK(aclrtCreateStream(&w->stream));
        descs[s] = aclrtAllocatorCreateDesc();
        CHECK(aclrtAllocatorSetObjToDesc(descs[s], &w->pool));
        CHECK(aclrtAllocatorSetAllocFuncToDesc(descs[s], pool_alloc));
        CHECK(aclrtAllocatorSetFreeFuncToDesc(descs[s], pool_free));
        CHECK(aclrtAllocatorSetGetAddrFromBlockFuncToDesc(descs[s], pool_addr));
        CHECK(aclrtAllocatorRegister(w->stream, descs[s]));
    }

    pthread_t threads[STREAMS];
    for (int s = 0; s < STREAMS; s++) pthread_create(&threads[s], NULL, drive, &workers[s]);
    for (int s = 0; s < STREAMS; s++) pthread_join(threads[s], NULL);

    int failed = 0;
    long allocs = 0;
    for (int s = 0; s < STREAMS; s++) {
        Worker *w = &workers[s];
        CHECK(aclrtSynchronizeStream(w->stream));
        printf("stream %d: %ld allocs, %ld frees, %d live, %ld refused\n", s, w->arena.allocs, w->arena.frees,
               w->arena.live, w->arena.failed);
        allocs += w->arena.allocs;
        if (w->failures || w->arena.allocs != w->arena.frees || w->arena.live != 0 || w->arena.failed) failed = 1;
    }
    printf("%ld kernels ran (%ld without workspace, %ld with one from the stream's allocator)\n",
           (long)kernels_run, (long)empty_workspaces, allocs);
    printf("overlapping workspaces: %ld, outside the stream's arena: %ld, unwritable bytes: %ld, out of order: %ld\n",
           (long)overlaps, (long)out_of_arena, (long)bad_bytes, (long)out_of_order);
    if (kernels_run != LAUNCHES || allocs + empty_workspaces != LAUNCHES || overlaps || out_of_arena || bad_bytes ||
        out_of_order)
        failed = 1;

    for (int s = 0; s < STREAMS; s++) {
        CHECK(aclrtDestroyStream(workers[s].stream));
        aclrtAllocatorDesc found = NULL;
        if (aclrtAllocatorGetByStream(workers[s].stream, &found, NULL, NULL, NULL, NULL, NULL) == ACL_SUCCESS) {
            fprintf(stderr, "a destroyed stream kept its allocator registration\n");
            failed = 1;
        }
        (void)aclGetRecentErrMsg();
        CHECK(aclrtAllocatorDestroyDesc(descs[s]));
        CHECK(aclrtFree(workers[s].arena.base));
    }
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    puts(failed ? "FAILED" : "OK");
    return failed;
}
