/*
 * A pool shared by the stages of a pipeline, one stream per stage, each
 * stage waiting on an event the previous one recorded after its launch.
 * Each launch takes an 8 MiB workspace from the pool and gives it back in
 * stream order. Because every stage waits on an event recorded after the
 * previous stage freed its workspace, the pool hands that memory on to the
 * next stage (no synchronize): the pipeline runs on one segment. The same
 * stages without the waits are not ordered, so each keeps a segment of its
 * own.
 */
#include <stdio.h>
#include <string.h>

#include "acl/acl.h"
#include "aclalloc.h"
#include "common/check.h"
#include "common/expect.h"

#define STAGES 4
#define ROUNDS 50
#define WORKSPACE ((size_t)8 << 20)

/* A stage's work: fills its workspace. */
static void stage(void *workspace, size_t size, void *data) {
    memset(workspace, *(const int *)data, size);
}

/* Runs ROUNDS rounds of the pipeline on a new pool; its reserved bytes after
 * the first launch and at the end. */
static int pipeline(int ordered, size_t *first, size_t *last) {
    aclallocPool pool = NULL;
    aclrtAllocatorDesc desc = NULL;
    CHECK(aclallocPoolCreate(NULL, &pool, &desc));
    aclrtStream streams[STAGES];
    aclrtEvent done[STAGES];
    int fill[STAGES];
    for (int k = 0; k < STAGES; k++) {
        fill[k] = k + 1;
        CHECK(aclrtCreateStream(&streams[k]));
        CHECK(aclrtAllocatorRegister(streams[k], desc));
        CHECK(aclrtCreateEvent(&done[k]));
    }
    for (int round = 0; round < ROUNDS; round++) {
        for (int k = 0; k < STAGES; k++) {
            int previous = (k + STAGES - 1) % STAGES;
            if (ordered && (round > 0 || k > 0)) {
                /* After the previous stage's launch, its free included. */
                CHECK(aclrtStreamWaitEvent(streams[k], done[previous]));
            }
            CHECK(aclallocLaunchKernel(streams[k], WORKSPACE, stage, &fill[k]));
            CHECK(aclrtRecordEvent(done[k], streams[k]));
            if (round == 0 && k == 0) CHECK(aclallocPoolMemoryReserved(pool, first));
        }
    }
    for (int k = 0; k < STAGES; k++) CHECK(aclrtSynchronizeStream(streams[k]));
    CHECK(aclallocPoolMemoryReserved(pool, last));
    for (int k = 0; k < STAGES; k++) {
        CHECK(aclrtDestroyEvent(done[k]));
        CHECK(aclrtAllocatorUnregister(streams[k]));
        CHECK(aclrtDestroyStream(streams[k]));
    }
    CHECK(aclallocPoolDestroy(pool));
    CHECK(aclrtAllocatorDestroyDesc(desc));
    return 0;
}

int main(void) {
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));

    size_t first = 0, last = 0;
    if (pipeline(1, &first, &last)) return 1;
    printf("%d stages waiting on events, %d launches: %zu MiB reserved (%zu after the first)\n",
           STAGES, STAGES * ROUNDS, last >> 20, first >> 20);
    EXPECT(first > 0);
    EXPECT(last == first);

    size_t unordered_first = 0, unordered = 0;
    if (pipeline(0, &unordered_first, &unordered)) return 1;
    printf("the same stages without the waits: %zu MiB reserved\n", unordered >> 20);
    EXPECT(unordered == (size_t)STAGES * first);

    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("%s\n", failures == 0 ? "event ordered pool reuse: ok" : "event ordered pool reuse: FAILED");
    return failures == 0 ? 0 : 1;
}
