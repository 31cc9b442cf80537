/*
 * Streams ordered by events instead of synchronizes. One allocator object
 * serves two streams with a single block, so every launch on stream b
 * reuses what a launch on stream a freed. The tracking layer reports that
 * reuse unless b waits on an event recorded on a after the free (PyTorch's
 * record_stream discipline). Then a wait that could only end after a kernel
 * which waits for the waiting stream: one of the two is refused, nothing
 * hangs.
 */
#define _POSIX_C_SOURCE 200809L
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acl/acl.h"
#include "aclalloc.h"
#include "common/check.h"
#include "common/expect.h"
#include "common/hang_guard.h"

static unsigned char block[256];
static void *one_block(aclrtAllocator a, size_t size) {
    (void)a;
    return size <= sizeof block ? block : NULL;
}
static void give_back(aclrtAllocator a, aclrtAllocatorBlock b) {
    (void)a;
    (void)b;
}
static void *address_of(aclrtAllocatorBlock b) { return b; }
static void nothing(void *ws, size_t size, void *data) {
    (void)ws;
    (void)size;
    (void)data;
}

/* Cross-stream reuses in the tracking report. */
static int reuses(const char *path) {
    if (aclallocTrackingWriteReport(path) != ACL_SUCCESS) return -1;
    FILE *f = fopen(path, "r");
    if (f == NULL) return -1;
    char line[1024];
    int n = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        if (strstr(line, "fault cross-stream-reuse") != NULL) n++;
    }
    fclose(f);
    return n;
}

struct waiter {
    aclrtStream other;
    atomic_int go;
    aclError rc;
};
static void synchronize_other(void *ws, size_t size, void *data) {
    (void)ws;
    (void)size;
    struct waiter *w = data;
    while (!atomic_load(&w->go)) sched_yield();
    w->rc = aclrtSynchronizeStream(w->other);
}

int main(void) {
    hang_guard("event_ordered_reuse: a stream hung", 60);
    char path[] = "/tmp/aclalloc-event-reuse-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return 1;
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    CHECK(aclallocTrackingSetEnabled(1));
    aclrtAllocatorDesc desc = aclrtAllocatorCreateDesc();
    CHECK(aclrtAllocatorSetObjToDesc(desc, (aclrtAllocator)block));
    CHECK(aclrtAllocatorSetAllocFuncToDesc(desc, one_block));
    CHECK(aclrtAllocatorSetFreeFuncToDesc(desc, give_back));
    CHECK(aclrtAllocatorSetGetAddrFromBlockFuncToDesc(desc, address_of));
    aclrtStream a = NULL, b = NULL;
    CHECK(aclrtCreateStream(&a));
    CHECK(aclrtCreateStream(&b));
    CHECK(aclrtAllocatorRegister(a, desc));
    CHECK(aclrtAllocatorRegister(b, desc));
    aclrtEvent freed = NULL;
    CHECK(aclrtCreateEvent(&freed));

    /* No ordering: reported. */
    CHECK(aclallocLaunchKernel(a, 64, nothing, NULL));
    CHECK(aclallocLaunchKernel(b, 64, nothing, NULL));
    EXPECT(reuses(path) == 1);
    CHECK(aclrtSynchronizeDevice());

    /* b waits on a's record made after the free: the reuse is ordered. */
    CHECK(aclallocLaunchKernel(a, 64, nothing, NULL));
    CHECK(aclrtRecordEvent(freed, a));
    CHECK(aclrtStreamWaitEvent(b, freed));
    CHECK(aclallocLaunchKernel(b, 64, nothing, NULL));
    EXPECT(reuses(path) == 1);
    CHECK(aclrtSynchronizeDevice());

    /* A record made before the free orders nothing after it. */
    CHECK(aclrtRecordEvent(freed, a));
    CHECK(aclallocLaunchKernel(a, 64, nothing, NULL));
    CHECK(aclrtStreamWaitEvent(b, freed));
    CHECK(aclallocLaunchKernel(b, 64, nothing, NULL));
    EXPECT(reuses(path) == 2);
    CHECK(aclrtSynchronizeDevice());

    /* a: [kernel synchronizing b] [record]; b: [wait for that record]. */
    struct waiter w = {b, 0, ACL_SUCCESS};
    aclrtEvent behind = NULL;
    CHECK(aclrtCreateEvent(&behind));
    CHECK(aclallocLaunchKernel(a, 0, synchronize_other, &w));
    CHECK(aclrtRecordEvent(behind, a));
    CHECK(aclrtStreamWaitEvent(b, behind));
    atomic_store(&w.go, 1);
    CHECK(aclrtSynchronizeStream(a));
    CHECK(aclrtSynchronizeStream(b));
    aclrtEventWaitStatus waited = ACL_EVENT_WAIT_STATUS_NOT_READY;
    CHECK(aclrtQueryEventWaitStatus(behind, &waited));
    EXPECT(waited == ACL_EVENT_WAIT_STATUS_COMPLETE);
    printf("kernel's synchronize of the waiting stream: %d (refused if the wait came first)\n", w.rc);

    CHECK(aclrtDestroyEvent(behind));
    CHECK(aclrtDestroyEvent(freed));
    CHECK(aclrtAllocatorUnregister(a));
    CHECK(aclrtAllocatorUnregister(b));
    CHECK(aclrtDestroyStream(a));
    CHECK(aclrtDestroyStream(b));
    aclrtAllocatorDestroyDesc(desc);
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    remove(path);
    printf("%s\n", failures == 0 ? "event ordered reuse: ok" : "event ordered reuse: FAILED");
    return failures == 0 ? 0 : 1;
}
