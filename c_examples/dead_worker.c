/*
 * A stream whose worker thread died (a panic inside aclalloc while it ran the
 * stream's work): every later call on the stream fails with a clear error,
 * synchronizing returns that error instead of waiting forever, work queued
 * behind the panic never runs, and the rest of the runtime keeps working.
 *
 * The worker is made to die through a test-only hook:
 * ACLALLOC_TEST_WORKER_PANIC names a kernel (its address, as %p prints it)
 * after which the worker panics (crates/aclalloc-runtime/src/stream_worker.rs). An alarm
 * turns a hang into a failure.
 */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "acl/acl.h"
#include "aclalloc.h"
#include "common/check.h"
#include "common/expect.h"
#include "common/hang_guard.h"


/* The kernel the hook names: the worker dies right after it. */
static void last_words(void *ws, size_t size, void *data) {
    (void)ws;
    (void)size;
    (void)data;
    ran++;
}

#define DEAD "worker thread died"

int main(void) {
    hang_guard("dead_worker: hung (a synchronize waited for a dead worker)\n", 30);
    char hook[32];
    snprintf(hook, sizeof hook, "%p", (void *)(size_t)last_words);
    setenv("ACLALLOC_TEST_WORKER_PANIC", hook, 1);
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtStream dying, healthy;
    CHECK(aclrtCreateStream(&dying));
    CHECK(aclrtCreateStream(&healthy));
    void *dev = NULL;
    CHECK(aclrtMalloc(&dev, 4096, ACL_MEM_MALLOC_HUGE_FIRST));

    CHECK(aclallocLaunchKernel(dying, 0, count_kernel, NULL));
    CHECK(aclallocLaunchKernel(dying, 0, last_words, NULL));
    /* Queued behind the panic: accepted (the worker may not have died yet)
     * or refused, but never run. */
    aclError queued = aclallocLaunchKernel(dying, 0, count_kernel, NULL);
    EXPECT(queued == ACL_SUCCESS || queued == ACL_ERROR_INVALID_PARAM);

    expect("aclrtSynchronizeStream(dead stream)", aclrtSynchronizeStream(dying),
           ACL_ERROR_INVALID_PARAM, DEAD);
    EXPECT(ran == 2);
    expect("aclallocLaunchKernel(dead stream)", aclallocLaunchKernel(dying, 0, count_kernel, NULL),
           ACL_ERROR_INVALID_PARAM, DEAD);
    expect("aclallocLaunchKernel(dead stream, 4 KiB workspace)",
           aclallocLaunchKernel(dying, 4096, count_kernel, NULL), ACL_ERROR_INVALID_PARAM, DEAD);
    expect("aclrtMemsetAsync(dead stream)", aclrtMemsetAsync(dev, 4096, 1, 4096, dying),
           ACL_ERROR_INVALID_PARAM, DEAD);
    expect("aclrtSynchronizeStream(dead stream), again", aclrtSynchronizeStream(dying),
           ACL_ERROR_INVALID_PARAM, DEAD);
    EXPECT(ran == 2);

    /* What waits for every stream skips the dead one; the others work. */
    CHECK(aclallocLaunchKernel(healthy, 0, count_kernel, NULL));
    CHECK(aclrtSynchronizeDevice());
    EXPECT(ran == 3);
    CHECK(aclrtFree(dev));
    CHECK(aclrtDestroyStream(dying));
    aclrtStream fresh;
    CHECK(aclrtCreateStream(&fresh));
    CHECK(aclallocLaunchKernel(fresh, 4096, count_kernel, NULL));
    CHECK(aclrtSynchronizeStream(fresh));
    EXPECT(ran == 4);

    CHECK(aclrtDestroyStream(fresh));
    CHECK(aclrtDestroyStream(healthy));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("%s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
