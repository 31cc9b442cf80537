/*
 * Graph memory pools, as serving engines use them with CANN's graph capture:
 * a tagged memory pool serves every allocation on the capturing stream
 * (aclallocMemPoolBeginAllocateToPool, torch_npu's graph pool), so the
 * step's workspaces and its output buffer live in the pool; a second graph
 * shares the pool; the pool's statistics count that memory. Then the pool
 * sleeps (its contents offloaded to host memory) and wakes, and both graphs
 * replay with the same results without being captured again. Destroying the
 * graphs and freeing the outputs gives the pool's memory back to the device.
 * A step's outputs also come from a stream-ordered pool while capturing: the
 * model owns that block until it is destroyed.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "acl/acl.h"
#include "acl/acl_rt_memory_soma.h"
#include "aclalloc.h"
#include "common/check.h"

#define COUNT 64
#define MIB ((size_t)1 << 20)
#define REPLAYS 100

/* One operator: out[i] = in[i] * scale + i, kept in its workspace too. */
typedef struct {
    const int64_t *in;
    int64_t *out;
    int64_t scale;
} Step;

static void step_kernel(void *workspace, size_t size, void *userData) {
    const Step *s = (const Step *)userData;
    int64_t *scratch = (int64_t *)workspace;
    for (int i = 0; i < COUNT; i++) {
        int64_t v = s->in[i] * s->scale;
        if ((size_t)(i + 1) * sizeof(int64_t) <= size) scratch[i] = v; /* the workspace, if any */
        s->out[i] = v + i;
    }
}

static size_t device_free(void) {
    size_t free_b = 0, total = 0;
    aclrtGetMemInfo(ACL_HBM_MEM, &free_b, &total);
    return free_b;
}

static size_t reserved(aclallocMemPool pool) {
    aclallocPool p = NULL;
    size_t bytes = 0;
    if (aclallocMemPoolGetDevicePool(pool, 0, &p) != ACL_SUCCESS || p == NULL) return 0;
    if (aclallocPoolMemoryReserved(p, &bytes) != ACL_SUCCESS) return 0;
    return bytes;
}

/* Captures `step` on `stream`, every allocation on it from `pool`. */
static aclError capture(aclallocMemPool pool, aclrtStream stream, Step *step, aclmdlRI *model) {
    aclError rc = aclallocMemPoolBeginAllocateToPool(pool, 0, stream);
    if (rc != ACL_SUCCESS) return rc;
    rc = aclmdlRICaptureBegin(stream, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL);
    if (rc == ACL_SUCCESS) rc = aclallocLaunchKernel(stream, 2 * MIB, step_kernel, step);
    aclError ended = aclmdlRICaptureEnd(stream, model);
    aclError unrouted = aclallocMemPoolEndAllocateToPool(pool, 0, stream);
    if (rc != ACL_SUCCESS) return rc;
    return ended != ACL_SUCCESS ? ended : unrouted;
}

static int same(const int64_t *a, const int64_t *b) {
    return memcmp(a, b, COUNT * sizeof(int64_t)) == 0;
}

int main(void) {
    aclrtStream s1 = NULL, s2 = NULL, run = NULL;
    aclallocMemPool pool = NULL;
    aclmdlRI g1 = NULL, g2 = NULL;
    void *in = NULL, *out1 = NULL, *out2 = NULL;
    int64_t host_in[COUNT], first1[COUNT], first2[COUNT], now[COUNT];

    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    CHECK(aclrtCreateStream(&s1));
    CHECK(aclrtCreateStream(&s2));
    CHECK(aclrtCreateStream(&run));
    size_t free_start = device_free();

    aclallocMemPoolOptions options;
    memset(&options, 0, sizeof options);
    options.tag = "graphs";
    CHECK(aclallocMemPoolCreate(&options, &pool));

    /* The static input and outputs, allocated on the routed stream. */
    CHECK(aclallocMemPoolBeginAllocateToPool(pool, 0, s1));
    CHECK(aclallocDefaultMalloc(&in, sizeof host_in, s1));
    CHECK(aclallocDefaultMalloc(&out1, sizeof host_in, s1));
    CHECK(aclallocDefaultMalloc(&out2, sizeof host_in, s1));
    CHECK(aclallocMemPoolEndAllocateToPool(pool, 0, s1));
    for (int i = 0; i < COUNT; i++) host_in[i] = 1000 + 7 * i;
    CHECK(aclrtMemcpy(in, sizeof host_in, host_in, sizeof host_in, ACL_MEMCPY_HOST_TO_DEVICE));

    Step step1 = {(const int64_t *)in, (int64_t *)out1, 3};
    Step step2 = {(const int64_t *)in, (int64_t *)out2, 5};
    CHECK(capture(pool, s1, &step1, &g1));
    CHECK(capture(pool, s2, &step2, &g2));
    uint64_t graphs = 0;
    CHECK(aclallocMemPoolGraphCount(pool, &graphs));
    size_t held = reserved(pool);
    printf("two graphs share the pool: %llu graphs, pool reserves %zu MiB\n",
           (unsigned long long)graphs, held / MIB);

    for (int r = 0; r < REPLAYS; r++) {
        CHECK(aclmdlRIExecuteAsync(g1, run));
        CHECK(aclmdlRIExecuteAsync(g2, run));
    }
    CHECK(aclrtSynchronizeStream(run));
    CHECK(aclrtMemcpy(first1, sizeof first1, out1, sizeof first1, ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK(aclrtMemcpy(first2, sizeof first2, out2, sizeof first2, ACL_MEMCPY_DEVICE_TO_HOST));
    int computed = first1[1] == (1000 + 7) * 3 + 1 && first2[COUNT - 1] ==
                   (1000 + 7 * (COUNT - 1)) * 5 + COUNT - 1;

    /* Sleep and wake: the graphs replay without a new capture. */
    const char *tags[1] = {"graphs"};
    size_t free_awake = device_free();
    CHECK(aclallocSleep(tags, 1));
    size_t free_asleep = device_free();
    CHECK(aclallocWakeUp(tags, 1));
    CHECK(aclrtMemset(out1, sizeof now, 0, sizeof now));
    CHECK(aclrtMemset(out2, sizeof now, 0, sizeof now));
    CHECK(aclmdlRIExecuteAsync(g1, run));
    CHECK(aclmdlRIExecuteAsync(g2, run));
    CHECK(aclrtSynchronizeStream(run));
    CHECK(aclrtMemcpy(now, sizeof now, out1, sizeof now, ACL_MEMCPY_DEVICE_TO_HOST));
    int same1 = same(now, first1);
    CHECK(aclrtMemcpy(now, sizeof now, out2, sizeof now, ACL_MEMCPY_DEVICE_TO_HOST));
    int same2 = same(now, first2);
    printf("asleep: %zu MiB given back; after wake the replays match: %s\n",
           (free_asleep - free_awake) / MIB, same1 && same2 ? "yes" : "no");

    /* A stream-ordered pool's block allocated while capturing is the model's. */
    aclrtMemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = ACL_MEM_ALLOCATION_TYPE_PINNED;
    props.handleType = ACL_MEM_HANDLE_TYPE_NONE;
    props.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = 0;
    aclrtMemPool ordered = NULL;
    void *graph_out = NULL;
    aclmdlRI g3 = NULL;
    CHECK(aclrtMemPoolCreate(&ordered, &props));
    CHECK(aclmdlRICaptureBegin(s1, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
    CHECK(aclrtMemPoolMallocAsync(&graph_out, sizeof now, ordered, s1));
    Step step3 = {(const int64_t *)in, (int64_t *)graph_out, 2};
    CHECK(aclallocLaunchKernel(s1, 0, step_kernel, &step3));
    CHECK(aclmdlRICaptureEnd(s1, &g3));
    CHECK(aclmdlRIExecuteAsync(g3, run));
    CHECK(aclrtSynchronizeStream(run));
    CHECK(aclrtMemcpy(now, sizeof now, graph_out, sizeof now, ACL_MEMCPY_DEVICE_TO_HOST));
    int ordered_ok = now[2] == (1000 + 14) * 2 + 2;
    aclError refused = aclrtMemPoolFreeAsync(graph_out, run);
    printf("stream-ordered output of a graph: %s; its free outside the graph: %d\n",
           ordered_ok ? "computed" : "wrong", (int)refused);
    CHECK(aclmdlRIDestroy(g3));
    CHECK(aclrtMemPoolDestroy(ordered));

    /* Destroy the graphs and free the buffers: the pool's memory goes back. */
    CHECK(aclmdlRIDestroy(g1));
    CHECK(aclmdlRIDestroy(g2));
    CHECK(aclallocDefaultFree(in));
    CHECK(aclallocDefaultFree(out1));
    CHECK(aclallocDefaultFree(out2));
    size_t left = reserved(pool);
    printf("graphs destroyed: pool reserves %zu bytes, device free back: %s\n", left,
           device_free() == free_start ? "yes" : "no");
    int released = left == 0 && device_free() == free_start;
    CHECK(aclallocMemPoolDestroy(pool));

    CHECK(aclrtDestroyStream(s1));
    CHECK(aclrtDestroyStream(s2));
    CHECK(aclrtDestroyStream(run));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    int ok = graphs == 2 && held >= 4 * MIB && computed && same1 && same2 &&
             free_asleep - free_awake >= held && ordered_ok && refused == ACL_ERROR_INVALID_PARAM &&
             released;
    if (!ok) {
        fprintf(stderr, "FAILED\n");
        return 1;
    }
    printf("graph_pool: ok\n");
    return 0;
}
