/*
 * A decode step captured once and replayed many times, as serving engines
 * do with CANN's graph capture (aclmdlRICaptureBegin / aclmdlRICaptureEnd /
 * aclmdlRIExecuteAsync): each operator of the step takes a workspace from
 * the allocator registered on the capturing stream. The model holds those
 * workspaces for every replay and gives them back when it is destroyed:
 * across 1,000 replays the allocator sees one alloc and one free per
 * workspace, and each kernel finds its own workspace every time.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acl/acl.h"
#include "aclalloc.h"
#include "common/check.h"

#define OPERATORS 4
#define REPLAYS 1000

/* The user's allocator: counts its calls, serves blocks from the heap. */
typedef struct {
    int allocs, frees, live;
} Counting;

static void *counting_alloc(aclrtAllocator allocator, size_t size) {
    Counting *c = (Counting *)allocator;
    c->allocs++;
    c->live++;
    return malloc(size);
}

static void counting_free(aclrtAllocator allocator, aclrtAllocatorBlock block) {
    Counting *c = (Counting *)allocator;
    c->frees++;
    c->live--;
    free(block);
}

static void *block_addr(aclrtAllocatorBlock block) { return block; }

/* One operator: a running sum in device memory, and a stamp in its workspace
 * that must still be there at the next replay (the same workspace serves
 * every replay of the model). */
typedef struct {
    int64_t *acc;
    int64_t add;
    void *seen_workspace; /* the workspace of the first run */
    int changed;          /* runs that found another workspace */
} Operator;

static void op_kernel(void *workspace, size_t size, void *userData) {
    Operator *op = (Operator *)userData;
    if (op->seen_workspace == NULL) {
        op->seen_workspace = workspace;
    } else if (op->seen_workspace != workspace) {
        op->changed++;
    }
    memset(workspace, (int)op->add, size);
    *op->acc += op->add;
}

int main(void) {
    Counting counts = {0, 0, 0};
    aclrtStream step_stream = NULL, run_stream = NULL;
    aclrtAllocatorDesc desc = NULL;
    aclmdlRI model = NULL;
    void *acc_dev = NULL;
    int64_t result = 0;

    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    CHECK(aclrtCreateStream(&step_stream));
    CHECK(aclrtCreateStream(&run_stream));
    desc = aclrtAllocatorCreateDesc();
    if (desc == NULL) return 1;
    CHECK(aclrtAllocatorSetObjToDesc(desc, &counts));
    CHECK(aclrtAllocatorSetAllocFuncToDesc(desc, counting_alloc));
    CHECK(aclrtAllocatorSetFreeFuncToDesc(desc, counting_free));
    CHECK(aclrtAllocatorSetGetAddrFromBlockFuncToDesc(desc, block_addr));
    CHECK(aclrtAllocatorRegister(step_stream, desc));
    CHECK(aclrtMalloc(&acc_dev, sizeof(int64_t), ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMemset(acc_dev, sizeof(int64_t), 0, sizeof(int64_t)));

    Operator ops[OPERATORS];
    for (int i = 0; i < OPERATORS; i++) {
        ops[i] = (Operator){(int64_t *)acc_dev, i + 1, NULL, 0};
    }

    /* Capture the step: nothing runs, each workspace is taken once. */
    CHECK(aclmdlRICaptureBegin(step_stream, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
    for (int i = 0; i < OPERATORS; i++) {
        CHECK(aclallocLaunchKernel(step_stream, 4096 * (size_t)(i + 1), op_kernel, &ops[i]));
    }
    CHECK(aclmdlRICaptureEnd(step_stream, &model));
    printf("captured: %d operators, allocator: %d allocs, %d frees\n", OPERATORS, counts.allocs,
           counts.frees);

    /* Replay it: the allocator is not called. */
    for (int r = 0; r < REPLAYS; r++) {
        CHECK(aclmdlRIExecuteAsync(model, run_stream));
    }
    CHECK(aclrtSynchronizeStream(run_stream));
    CHECK(aclrtMemcpy(&result, sizeof result, acc_dev, sizeof result, ACL_MEMCPY_DEVICE_TO_HOST));
    int changed = 0;
    for (int i = 0; i < OPERATORS; i++) changed += ops[i].changed;
    printf("replayed %d times: sum %lld, workspaces changed %d times, allocator: %d allocs, %d frees\n",
           REPLAYS, (long long)result, changed, counts.allocs, counts.frees);
    int held_ok = counts.allocs == OPERATORS && counts.frees == 0 && changed == 0;

    /* Destroy it: every workspace goes back, once. */
    CHECK(aclmdlRIDestroy(model));
    printf("destroyed: allocator: %d allocs, %d frees, %d live\n", counts.allocs, counts.frees,
           counts.live);
    int freed_ok = counts.allocs == OPERATORS && counts.frees == OPERATORS && counts.live == 0;
    int64_t want = (int64_t)REPLAYS * OPERATORS * (OPERATORS + 1) / 2;

    CHECK(aclrtFree(acc_dev));
    CHECK(aclrtAllocatorUnregister(step_stream));
    CHECK(aclrtAllocatorDestroyDesc(desc));
    CHECK(aclrtDestroyStream(step_stream));
    CHECK(aclrtDestroyStream(run_stream));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    if (!held_ok || !freed_ok || result != want) {
        fprintf(stderr, "FAILED: held %d, freed %d, sum %lld (want %lld)\n", held_ok, freed_ok,
                (long long)result, (long long)want);
        return 1;
    }
    printf("graph_workspace: ok\n");
    return 0;
}
