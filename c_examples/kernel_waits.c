/*
 * Kernels that wait: two kernels on two streams calling aclrtFree at the
 * same moment (each free waits for every stream, so each would wait for the
 * other's kernel), and a kernel calling aclFinalize / aclrtResetDevice.
 * Nothing may hang (an alarm bounds the run) and nothing may return 0 while
 * leaving the runtime broken.
 */
#define _POSIX_C_SOURCE 200809L
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "acl/acl.h"
#include "aclalloc.h"
#include "common/check.h"
#include "common/expect.h"
#include "common/hang_guard.h"

static atomic_int arrived;

struct freeing {
    void *ptr;
    aclError rc;
    char msg[512];
};

static void free_together(void *ws, size_t size, void *data) {
    (void)ws;
    (void)size;
    struct freeing *f = data;
    atomic_fetch_add(&arrived, 1);
    /* Both kernels are running before either frees. The wait yields: under
     * valgrind, which runs one thread at a time, a bare spin can keep the
     * other stream's worker from starting its kernel for a long time. */
    while (atomic_load(&arrived) < 2) {
        sched_yield();
    }
    f->rc = aclrtFree(f->ptr);
    const char *m = aclGetRecentErrMsg();
    snprintf(f->msg, sizeof f->msg, "%s", m ? m : "");
}

struct teardown {
    aclError finalize_rc;
    aclError reset_rc;
    char msg[512];
};

static void teardown_from_kernel(void *ws, size_t size, void *data) {
    (void)ws;
    (void)size;
    struct teardown *t = data;
    t->finalize_rc = aclFinalize();
    const char *m = aclGetRecentErrMsg();
    snprintf(t->msg, sizeof t->msg, "%s", m ? m : "");
    t->reset_rc = aclrtResetDevice(0);
}


int main(void) {
    hang_guard("kernel_waits: hung (deadlock between kernels)\n", 30);
    setenv("ACLALLOC_DEVICE_MEMORY", "256MiB", 1);
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtStream a, b;
    CHECK(aclrtCreateStream(&a));
    CHECK(aclrtCreateStream(&b));
    size_t free0, total;
    CHECK(aclrtGetMemInfo(ACL_HBM_MEM, &free0, &total));

    for (int round = 0; round < 20; round++) {
        struct freeing fa = {0}, fb = {0};
        CHECK(aclrtMalloc(&fa.ptr, 1 << 20, ACL_MEM_MALLOC_HUGE_FIRST));
        CHECK(aclrtMalloc(&fb.ptr, 1 << 20, ACL_MEM_MALLOC_HUGE_FIRST));
        atomic_store(&arrived, 0);
        CHECK(aclallocLaunchKernel(a, 0, free_together, &fa));
        CHECK(aclallocLaunchKernel(b, 0, free_together, &fb));
        CHECK(aclrtSynchronizeStream(a));
        CHECK(aclrtSynchronizeStream(b));
        /* Either free may be refused (never both hang); a refused one says
         * why and leaves the memory live for the host to free. */
        for (struct freeing *f = &fa; f; f = f == &fa ? &fb : NULL) {
            if (f->rc != ACL_SUCCESS) {
                if (round == 0) {
                    printf("refused: %d %s\n", f->rc, f->msg);
                }
                EXPECT(f->rc == ACL_ERROR_INVALID_PARAM);
                EXPECT(strstr(f->msg, "wait for each other") != NULL);
                CHECK(aclrtFree(f->ptr));
            }
        }
        EXPECT(fa.rc == ACL_SUCCESS || fb.rc == ACL_SUCCESS);
    }
    size_t free1;
    CHECK(aclrtGetMemInfo(ACL_HBM_MEM, &free1, &total));
    EXPECT(free1 == free0);

    /* aclFinalize or aclrtResetDevice from a kernel: refused, and the
     * runtime (the kernel's stream and context) keeps working. */
    struct teardown t = {0};
    CHECK(aclallocLaunchKernel(a, 0, teardown_from_kernel, &t));
    CHECK(aclrtSynchronizeStream(a));
    printf("aclFinalize from a kernel: %d %s\n", t.finalize_rc, t.msg);
    EXPECT(t.finalize_rc == ACL_ERROR_FAILURE);
    EXPECT(strstr(t.msg, "kernel") != NULL);
    EXPECT(t.reset_rc == ACL_ERROR_FAILURE);
    CHECK(aclallocLaunchKernel(a, 0, count_kernel, NULL));
    CHECK(aclallocLaunchKernel(NULL, 0, count_kernel, NULL));
    CHECK(aclrtSynchronizeStream(a));
    CHECK(aclrtSynchronizeStream(NULL));
    EXPECT(ran == 2);
    int32_t dev = -1;
    CHECK(aclrtGetDevice(&dev));
    EXPECT(dev == 0);

    CHECK(aclrtDestroyStream(a));
    CHECK(aclrtDestroyStream(b));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("%s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
