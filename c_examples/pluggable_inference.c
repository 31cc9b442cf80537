/*
 * The inference loop with a pluggable allocator: a torch_npu-style plugin
 * (libmy_plugin_allocator.so, loaded by path and symbol names) registered on
 * 4 streams, each driven by its own thread, 10,000 operator launches through
 * aclallocLaunchKernel with a realistic mix of workspace sizes. Then the same
 * plugin becomes the default allocator and serves a stream that has no
 * registration, and a second swap is refused.
 *
 * The launch tells the plugin which stream it serves, so the plugin's
 * stream-ordered cache hands a block freed right after its launch was
 * enqueued only to later work on the same stream. Every kernel checks that
 * its workspace is writable over its requested size and that no other
 * running kernel uses the same memory. Afterwards aclalloc's statistics and
 * the plugin's own counters must balance.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "acl/acl.h"
#include "aclalloc.h"
#include "common/expect.h"
#include "common/workload.h"

#ifndef PLUGIN_PATH
#define PLUGIN_PATH "libmy_plugin_allocator.so"
#endif

#define STREAMS 4
#define LAUNCHES 10000
#define DEFAULT_LAUNCHES 1000
#define PAGE 4096

static atomic_long bad_bytes, kernels_run, with_workspace;

static void kernel(void *workspace, size_t size, void *user_data) {
    unsigned char fill = (unsigned char)(uintptr_t)user_data;
    kernels_run++;
    if (size == 0) return;
    with_workspace++;
    unsigned char *ws = (unsigned char *)workspace;
    int slot = workspace_claim(ws, size);
    bad_bytes += workspace_touch(ws, size, fill, PAGE);
    workspace_release(slot);
}

typedef struct {
    int index, launches, failures;
    aclrtContext context;
    aclrtStream stream;
    long nonzero;
} Worker;

static void *drive(void *arg) {
    Worker *w = (Worker *)arg;
    uint64_t rng = workload_seed(w->index);
    if (aclrtSetCurrentContext(w->context) != ACL_SUCCESS) {
        w->failures++;
        return NULL;
    }
    for (int i = 0; i < w->launches; i++) {
        size_t size = workload_next_size(&rng);
        if (size) w->nonzero++;
        aclError rc = aclallocLaunchKernel(w->stream, size, kernel, (void *)(uintptr_t)(i + 1));
        if (rc != ACL_SUCCESS) {
            fprintf(stderr, "stream %d launch %d (%zu bytes): %d %s\n", w->index, i, size, rc, aclGetRecentErrMsg());
            w->failures++;
            return NULL;
        }
    }
    if (aclrtSynchronizeStream(w->stream) != ACL_SUCCESS) w->failures++;
    return NULL;
}

static void plugin_counters(long c[10]) {
    memset(c, 0, 10 * sizeof c[0]);
    void *same = dlopen(PLUGIN_PATH, RTLD_NOW | RTLD_NOLOAD);
    if (same == NULL) return;
    void (*counters)(long *) = NULL;
    *(void **)&counters = dlsym(same, "my_plugin_counters");
    if (counters != NULL) counters(c);
    dlclose(same);
}

static Worker workers[STREAMS + 1];

int main(void) {
    EXPECT(aclInit(NULL) == ACL_SUCCESS);
    EXPECT(aclrtSetDevice(0) == ACL_SUCCESS);
    aclrtContext context = NULL;
    EXPECT(aclrtGetCurrentContext(&context) == ACL_SUCCESS);

    aclallocPluggableConfig config;
    memset(&config, 0, sizeof config);
    config.path = PLUGIN_PATH;
    config.allocSymbol = "my_malloc";
    config.freeSymbol = "my_free";
    config.initSymbol = "my_init";
    config.emptyCacheSymbol = "my_empty_cache";
    aclallocPluggable plugin = NULL;
    aclrtAllocatorDesc desc = NULL;
    if (aclallocPluggableCreate(&config, &plugin, &desc) != ACL_SUCCESS) {
        fprintf(stderr, "aclallocPluggableCreate: %s\n", aclGetRecentErrMsg());
        return 1;
    }

    /* 4 registered streams, one thread each. */
    for (int s = 0; s < STREAMS; s++) {
        workers[s].index = s;
        workers[s].context = context;
        workers[s].launches = LAUNCHES / STREAMS;
        EXPECT(aclrtCreateStream(&workers[s].stream) == ACL_SUCCESS);
        EXPECT(aclrtAllocatorRegister(workers[s].stream, desc) == ACL_SUCCESS);
    }
    pthread_t threads[STREAMS];
    for (int s = 0; s < STREAMS; s++) pthread_create(&threads[s], NULL, drive, &workers[s]);
    for (int s = 0; s < STREAMS; s++) pthread_join(threads[s], NULL);
    long nonzero = 0;
    for (int s = 0; s < STREAMS; s++) {
        EXPECT(workers[s].failures == 0);
        nonzero += workers[s].nonzero;
    }

    aclallocAllocatorStats st;
    long c[10];
    EXPECT(aclallocPluggableGetStats(plugin, &st) == ACL_SUCCESS);
    plugin_counters(c);
    printf("registered on %d streams: %ld launches, %ld with a workspace\n", STREAMS, (long)kernels_run,
           (long)with_workspace);
    printf("  aclalloc: %llu allocs, %llu frees, peak %llu bytes in %llu blocks\n",
           (unsigned long long)st.allocCount, (unsigned long long)st.freeCount,
           (unsigned long long)st.allocatedBytesPeak, (unsigned long long)st.activePeak);
    printf("  plugin:   %ld allocs, %ld frees, %ld mismatched frees, %ld blocks from the system\n", c[1], c[2],
           c[3], c[9]);
    EXPECT(kernels_run == LAUNCHES && with_workspace == nonzero);
    EXPECT((long)st.allocCount == nonzero && st.freeCount == st.allocCount && st.activeCount == 0);
    EXPECT(c[1] == nonzero && c[2] == nonzero && c[0] == 0 && c[3] == 0);

    /* The same plugin as the default allocator: a stream with no
     * registration takes its workspaces from it. */
    EXPECT(aclallocSetDefaultAllocator(desc) == ACL_SUCCESS);
    Worker *d = &workers[STREAMS];
    d->index = STREAMS;
    d->context = context;
    d->launches = DEFAULT_LAUNCHES;
    EXPECT(aclrtCreateStream(&d->stream) == ACL_SUCCESS);
    drive(d);
    EXPECT(d->failures == 0);
    EXPECT(aclallocPluggableGetStats(plugin, &st) == ACL_SUCCESS);
    plugin_counters(c);
    printf("default allocator on an unregistered stream: %ld more workspaces\n", d->nonzero);
    EXPECT((long)st.allocCount == nonzero + d->nonzero && st.freeCount == st.allocCount);
    EXPECT(c[1] == nonzero + d->nonzero && c[2] == c[1] && c[3] == 0);

    aclError rc = aclallocSetDefaultAllocator(desc);
    const char *msg = aclGetRecentErrMsg();
    printf("swap after use -> %d: %s\n", rc, msg ? msg : "(none)");
    EXPECT(rc == ACL_ERROR_REPEAT_INITIALIZE && msg != NULL &&
           strstr(msg, "can't swap an already initialized allocator") != NULL);
    printf("overlapping workspaces: %ld, unwritable bytes: %ld\n", (long)overlaps, (long)bad_bytes);
    EXPECT(overlaps == 0 && bad_bytes == 0);

    for (int s = 0; s <= STREAMS; s++) EXPECT(aclrtDestroyStream(workers[s].stream) == ACL_SUCCESS);
    EXPECT(aclallocPluggableEmptyCache(plugin) == ACL_SUCCESS);
    plugin_counters(c);
    EXPECT(c[8] == 0);
    EXPECT(aclrtResetDevice(0) == ACL_SUCCESS);
    EXPECT(aclFinalize() == ACL_SUCCESS);
    printf("%s\n", failures == 0 ? "pluggable_inference: OK" : "pluggable_inference: FAILED");
    return failures == 0 ? 0 : 1;
}
