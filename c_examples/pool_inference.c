/*
 * One caching pool registered on two streams, serving an inference loop on
 * the host runtime.
 *
 * Every operator is launched with aclallocLaunchKernel, which takes the
 * workspace from the stream's allocator as CANN's executor does (alloc,
 * getAddrFromBlock, enqueue, free right after enqueueing: stream order).
 * Both streams decode at once, one thread each. The kernels check that no
 * two kernels running at the same time share workspace bytes: the pool keeps
 * each stream's freed blocks for that stream. After the first token the pool
 * makes no device allocation. At the end a KV cache stays allocated, the
 * cache is emptied, and reserved memory must fall to exactly what is still
 * allocated.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acl/acl.h"
#include "aclalloc.h"
#include "common/check.h"
#include "common/workload.h"

#define LAYERS 12
#define TOKENS 16
#define OPS 4
#define STREAMS 2

static const size_t per_layer[OPS] = {16u << 10, 1536u << 10, 256u << 10, 11u << 20};

static atomic_long kernels_run;

/* Claims its workspace while it runs (common/workload.h counts overlaps with
 * any other running kernel) and writes to every 64 KiB of it. */
static void kernel(void *workspace, size_t size, void *user_data) {
    unsigned char fill = (unsigned char)(uintptr_t)user_data;
    int slot = workspace_claim(workspace, size);
    workspace_fill((unsigned char *)workspace, size, fill, 64 << 10);
    kernels_run++;
    workspace_release(slot);
}

typedef struct {
    aclrtContext context;
    aclrtStream stream;
    int tokens;
    int failed;
} Worker;

/* Decode: the same per-layer workspaces every token. */
static void *decode(void *arg) {
    Worker *w = (Worker *)arg;
    if (aclrtSetCurrentContext(w->context) != ACL_SUCCESS) {
        w->failed = 1;
        return NULL;
    }
    for (int token = 0; token < w->tokens; token++)
        for (int layer = 0; layer < LAYERS; layer++)
            for (int k = 0; k < OPS; k++) {
                size_t size = per_layer[k] + 1000 * (size_t)layer;
                aclError rc = aclallocLaunchKernel(w->stream, size, kernel, (void *)(uintptr_t)(token + 1));
                if (rc != ACL_SUCCESS) {
                    fprintf(stderr, "launch of %zu bytes: %d %s\n", size, rc, aclGetRecentErrMsg());
                    w->failed = 1;
                    return NULL;
                }
            }
    if (aclrtSynchronizeStream(w->stream) != ACL_SUCCESS) w->failed = 1;
    return NULL;
}

static int64_t stat(aclallocPool pool, const char *key) {
    int64_t value = -1;
    if (aclallocPoolGetStat(pool, key, &value) != ACL_SUCCESS) {
        fprintf(stderr, "%s: %s\n", key, aclGetRecentErrMsg());
        exit(1);
    }
    return value;
}

int main(void) {
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtContext context = NULL;
    CHECK(aclrtGetCurrentContext(&context));

    aclallocPoolConfig config;
    CHECK(aclallocPoolConfigInit(&config));
    config.max_split_size = 32u << 20; /* the KV cache below is oversize: never split */
    aclallocPool pool = NULL;
    aclrtAllocatorDesc desc = NULL;
    CHECK(aclallocPoolCreate(&config, &pool, &desc));

    aclrtStream streams[STREAMS];
    for (int i = 0; i < STREAMS; i++) {
        CHECK(aclrtCreateStream(&streams[i]));
        CHECK(aclrtAllocatorRegister(streams[i], desc));
    }

    /* The first token on each stream. */
    for (int i = 0; i < STREAMS; i++) {
        Worker first = {context, streams[i], 1, 0};
        decode(&first);
        if (first.failed) return 1;
    }
    int64_t device_allocs = stat(pool, "num_device_alloc");

    /* The rest: both streams at once, one thread each. */
    pthread_t threads[STREAMS];
    Worker workers[STREAMS];
    for (int i = 0; i < STREAMS; i++) {
        workers[i] = (Worker){context, streams[i], TOKENS - 1, 0};
        if (pthread_create(&threads[i], NULL, decode, &workers[i]) != 0) return 1;
    }
    for (int i = 0; i < STREAMS; i++) pthread_join(threads[i], NULL);
    for (int i = 0; i < STREAMS; i++)
        if (workers[i].failed) return 1;
    int64_t more = stat(pool, "num_device_alloc") - device_allocs;
    printf("%ld kernels on %d streams; device allocations: %" PRId64 " for the first token, %" PRId64
           " after; overlapping workspaces: %ld\n",
           (long)kernels_run, STREAMS, device_allocs, more, (long)overlaps);

    /* A KV cache that outlives the loop, taken outside any launch. */
    aclrtAllocator obj = NULL;
    aclrtAllocatorAllocFunc alloc_fn = NULL;
    aclrtAllocatorFreeFunc free_fn = NULL;
    CHECK(aclrtAllocatorGetByStream(streams[0], &desc, &obj, &alloc_fn, &free_fn, NULL, NULL));
    aclrtAllocatorBlock kv_cache = alloc_fn(obj, 40u << 20);
    if (kv_cache == NULL) return 1;

    size_t length = 0;
    CHECK(aclallocPoolSummary(pool, NULL, 0, &length));
    char *text = (char *)malloc(length + 1);
    if (text == NULL) return 1;
    CHECK(aclallocPoolSummary(pool, text, length + 1, NULL));
    fputs(text, stdout);
    free(text);

    /* The snapshot names each workspace segment's stream. */
    CHECK(aclallocPoolSnapshot(pool, NULL, 0, &length));
    char *json = (char *)malloc(length + 1);
    if (json == NULL) return 1;
    CHECK(aclallocPoolSnapshot(pool, json, length + 1, NULL));
    int streams_named = 0;
    for (int i = 0; i < STREAMS; i++) {
        char needle[64];
        snprintf(needle, sizeof needle, "\"stream\":\"0x%" PRIxPTR "\"", (uintptr_t)streams[i]);
        streams_named += strstr(json, needle) != NULL;
    }
    free(json);

    CHECK(aclallocPoolEmptyCache(pool));
    aclallocPoolStats stats;
    CHECK(aclallocPoolGetStats(pool, &stats));
    int64_t reserved = stats.reserved_bytes[ACLALLOC_STAT_ALL].current;
    int64_t allocated = stats.allocated_bytes[ACLALLOC_STAT_ALL].current;
    printf("after empty_cache: %" PRId64 " bytes reserved, %" PRId64 " bytes allocated (peak reserved %" PRId64
           ")\n",
           reserved, allocated, stats.reserved_bytes[ACLALLOC_STAT_ALL].peak);

    free_fn(obj, kv_cache);
    for (int i = 0; i < STREAMS; i++) {
        CHECK(aclrtAllocatorUnregister(streams[i]));
        CHECK(aclrtDestroyStream(streams[i]));
    }
    CHECK(aclrtAllocatorDestroyDesc(desc));
    CHECK(aclallocPoolEmptyCache(pool));
    CHECK(aclallocPoolDestroy(pool));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());

    int ok = more == 0 && overlaps == 0 && streams_named == STREAMS && reserved == allocated &&
             allocated == (40 << 20) && kernels_run == (long)STREAMS * TOKENS * LAYERS * OPS;
    printf("%s\n", ok ? "pool_inference: OK" : "pool_inference: FAILED");
    return ok ? 0 : 1;
}
