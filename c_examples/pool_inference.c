/*
 * One caching pool registered on two streams, serving an inference loop.
 *
 * For every operator the executor finds the stream's allocator with
 * aclrtAllocatorGetByStream and takes the workspace through the registered
 * callbacks. After the first token the decode loop is served from the cache
 * (no device allocations); then both streams decode at once on two threads.
 * At the end a KV cache stays allocated, the cache is emptied, and
 * reserved memory must fall to exactly what is still allocated.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acl/acl.h"

#define LAYERS 24
#define TOKENS 32

static int check(aclError rc, const char *what) {
    if (rc != ACL_SUCCESS) {
        const char *msg = aclGetRecentErrMsg();
        fprintf(stderr, "%s failed (%d): %s\n", what, rc, msg ? msg : "");
        return 0;
    }
    return 1;
}

/* What an executor does for one operator: workspace from the stream's allocator. */
static int run_operator(aclrtStream stream, size_t workspace, unsigned char fill) {
    aclrtAllocatorDesc desc = NULL;
    aclrtAllocator obj = NULL;
    aclrtAllocatorAllocFunc alloc_fn = NULL;
    aclrtAllocatorFreeFunc free_fn = NULL;
    aclrtAllocatorGetAddrFromBlockFunc addr_fn = NULL;
    if (!check(aclrtAllocatorGetByStream(stream, &desc, &obj, &alloc_fn, &free_fn, NULL, &addr_fn),
               "aclrtAllocatorGetByStream"))
        return 0;
    aclrtAllocatorBlock block = alloc_fn(obj, workspace);
    if (block == NULL) {
        fprintf(stderr, "workspace of %zu bytes: %s\n", workspace, aclGetRecentErrMsg());
        return 0;
    }
    unsigned char *mem = (unsigned char *)addr_fn(block);
    size_t head = workspace < 4096 ? workspace : 4096;
    memset(mem, fill, head); /* the "kernel" touches both ends */
    mem[workspace - 1] = fill;
    int ok = mem[0] == fill && mem[workspace - 1] == fill;
    free_fn(obj, block);
    return ok;
}

typedef struct {
    aclrtStream stream;
    int tokens;
    int ok;
} Worker;

/* Decode: the same per-layer workspaces every token. */
static void *decode(void *arg) {
    Worker *w = (Worker *)arg;
    static const size_t per_layer[] = {3u << 20, 512u << 10, 96u << 10, 12u << 20};
    w->ok = 1;
    for (int token = 0; token < w->tokens && w->ok; token++)
        for (int layer = 0; layer < LAYERS && w->ok; layer++)
            for (size_t k = 0; k < sizeof per_layer / sizeof *per_layer && w->ok; k++)
                w->ok = run_operator(w->stream, per_layer[k] + 1000 * (size_t)layer, (unsigned char)token);
    return NULL;
}

static int64_t stat(aclallocPool pool, const char *key) {
    int64_t value = -1;
    if (!check(aclallocPoolGetStat(pool, key, &value), key)) exit(1);
    return value;
}

int main(void) {
    aclallocPoolConfig config;
    aclallocPool pool = NULL;
    aclrtAllocatorDesc desc = NULL;
    static int stream_storage[2];
    aclrtStream streams[2] = {&stream_storage[0], &stream_storage[1]};

    if (!check(aclallocPoolConfigInit(&config), "aclallocPoolConfigInit")) return 1;
    config.max_split_size = 32u << 20; /* the KV cache below is oversize: never split */
    if (!check(aclallocPoolCreate(&config, &pool, &desc), "aclallocPoolCreate")) return 1;
    for (int i = 0; i < 2; i++)
        if (!check(aclrtAllocatorRegister(streams[i], desc), "aclrtAllocatorRegister")) return 1;

    /* The first token, then the decode loop alternating the two streams. */
    Worker first = {streams[0], 1, 0};
    decode(&first);
    if (!first.ok) return 1;
    int64_t device_allocs = stat(pool, "num_device_alloc");
    for (int token = 1; token < TOKENS; token++) {
        Worker w = {streams[token % 2], 1, 0};
        decode(&w);
        if (!w.ok) return 1;
    }
    int64_t after = stat(pool, "num_device_alloc");
    printf("device allocations: %" PRId64 " for the first token, %" PRId64 " for the next %d\n",
           device_allocs, after - device_allocs, TOKENS - 1);

    /* Both streams at once, one thread each, sharing the pool. */
    pthread_t threads[2];
    Worker workers[2] = {{streams[0], TOKENS, 0}, {streams[1], TOKENS, 0}};
    for (int i = 0; i < 2; i++)
        if (pthread_create(&threads[i], NULL, decode, &workers[i]) != 0) return 1;
    for (int i = 0; i < 2; i++) pthread_join(threads[i], NULL);
    if (!workers[0].ok || !workers[1].ok) return 1;
    printf("two streams in parallel: %" PRId64 " more device allocations for %d tokens\n",
           stat(pool, "num_device_alloc") - after, 2 * TOKENS);

    /* A KV cache that outlives the loop: oversize, so it gets its own segment. */
    aclrtAllocator obj = NULL;
    aclrtAllocatorAllocFunc alloc_fn = NULL;
    aclrtAllocatorFreeFunc free_fn = NULL;
    if (!check(aclrtAllocatorGetByStream(streams[1], &desc, &obj, &alloc_fn, &free_fn, NULL, NULL),
               "aclrtAllocatorGetByStream"))
        return 1;
    aclrtAllocatorBlock output = alloc_fn(obj, 40u << 20);
    if (output == NULL) return 1;

    size_t length = 0;
    if (!check(aclallocPoolSummary(pool, NULL, 0, &length), "aclallocPoolSummary")) return 1;
    char *text = (char *)malloc(length + 1);
    if (text == NULL || !check(aclallocPoolSummary(pool, text, length + 1, NULL), "aclallocPoolSummary"))
        return 1;
    fputs(text, stdout);
    free(text);

    if (!check(aclallocPoolEmptyCache(pool), "aclallocPoolEmptyCache")) return 1;
    aclallocPoolStats stats;
    if (!check(aclallocPoolGetStats(pool, &stats), "aclallocPoolGetStats")) return 1;
    int64_t reserved = stats.reserved_bytes[ACLALLOC_STAT_ALL].current;
    int64_t allocated = stats.allocated_bytes[ACLALLOC_STAT_ALL].current;
    printf("after empty_cache: %" PRId64 " bytes reserved, %" PRId64 " bytes allocated (peak reserved %" PRId64 ")\n",
           reserved, allocated, stats.reserved_bytes[ACLALLOC_STAT_ALL].peak);

    free_fn(obj, output);
    for (int i = 0; i < 2; i++)
        if (!check(aclrtAllocatorUnregister(streams[i]), "aclrtAllocatorUnregister")) return 1;
    if (!check(aclrtAllocatorDestroyDesc(desc), "aclrtAllocatorDestroyDesc")) return 1;
    if (!check(aclallocPoolEmptyCache(pool), "aclallocPoolEmptyCache") ||
        !check(aclallocPoolDestroy(pool), "aclallocPoolDestroy"))
        return 1;

    int ok = after == device_allocs && reserved == allocated && allocated == (40 << 20);
    printf("%s\n", ok ? "pool_inference: OK" : "pool_inference: FAILED");
    return ok ? 0 : 1;
}
