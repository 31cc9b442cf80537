/*
 * An inference-style application for the interposition tests: it registers
 * its own allocator on two streams and launches operators whose workspaces
 * the runtime takes from that allocator, through both executor paths of the
 * runtime (its internal table, and the exported aclrtAllocatorGetByStream).
 * It links against whatever provides the ACL functions: the stand-in vendor
 * runtime, or libaclalloc alone (then the second path is the same launch).
 *
 *   alloc_app [MODE]   MODE: clean (default), leak, double-free, unknown-free,
 *                      cross-stream, overlap, null-address, concurrent,
 *                      stream-reuse, runtime-desc, leak-at-exit, exit:N,
 *                      event-ordered, event-before-free
 *
 * stdout is the same with or without libaclalloc in front; lines starting
 * with '#' carry handles (which differ from run to run). Each fault MODE adds
 * exactly one misuse to the clean run.
 *
 * Built with -DALLOC_APP_LIBRARY, main is the exported alloc_app_main of a
 * shared library (a model plugin, a Python module): the runtime then comes
 * in by dlopen, as a dependency of that library (tests/dlopen_runtime.rs).
 */
#define _GNU_SOURCE
#include "fake_acl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef ALLOC_APP_LIBRARY
#define main alloc_app_main
int alloc_app_main(int argc, char **argv);
#endif

#define NBLOCKS 16
#define BLOCK_BYTES (64 * 1024)

/* ---- the user's allocator: a LIFO slab, tolerant of misuse so that faults
 * can be injected without crashing ---- */
typedef struct {
    char *addr;
    size_t size;
    int in_use;
} user_block;

typedef struct {
    pthread_mutex_t lock;
    char *arena;
    user_block blocks[NBLOCKS];
    user_block alias;   /* overlap mode: a block inside another live block */
    user_block never;   /* a block this allocator never hands out */
    user_block *free_list[NBLOCKS];
    int free_count;
    user_block *last;
    uint64_t allocs, frees, get_addrs, bad_frees;
    int overlap_next, null_addr_next, slow;
} user_allocator;

static void *user_alloc(void *obj, size_t size) {
    user_allocator *u = obj;
    if (u->slow) {
        struct timespec t = {0, 300 * 1000 * 1000};
        nanosleep(&t, NULL);
    }
    pthread_mutex_lock(&u->lock);
    user_block *b = NULL;
    if (size <= BLOCK_BYTES) {
        if (u->overlap_next && u->last != NULL && u->last->in_use) {
            u->overlap_next = 0;
            u->alias.addr = u->last->addr + 2048;
            b = &u->alias;
        } else if (u->free_count > 0) {
            b = u->free_list[--u->free_count];
        }
    }
    if (b != NULL) {
        b->size = size;
        b->in_use = 1;
        u->last = b;
        u->allocs++;
    }
    pthread_mutex_unlock(&u->lock);
    return b;
}

static void user_free(void *obj, void *block) {
    user_allocator *u = obj;
    user_block *b = block;
    pthread_mutex_lock(&u->lock);
    if (b == NULL || !b->in_use) {
        u->bad_frees++;
    } else {
        b->in_use = 0;
        u->frees++;
        if (b != &u->alias) u->free_list[u->free_count++] = b;
    }
    pthread_mutex_unlock(&u->lock);
}

static user_allocator *the_allocator;

static void *user_get_addr(void *block) {
    user_allocator *u = the_allocator;
    pthread_mutex_lock(&u->lock);
    u->get_addrs++;
    int null_now = u->null_addr_next;
    u->null_addr_next = 0;
    pthread_mutex_unlock(&u->lock);
    return null_now ? NULL : ((user_block *)block)->addr;
}

static void user_init(user_allocator *u) {
    memset(u, 0, sizeof *u);
    pthread_mutex_init(&u->lock, NULL);
    u->arena = malloc((size_t)NBLOCKS * BLOCK_BYTES);
    for (int i = 0; i < NBLOCKS; i++) {
        u->blocks[i].addr = u->arena + (size_t)i * BLOCK_BYTES;
        u->free_list[u->free_count++] = &u->blocks[NBLOCKS - 1 - i];
    }
    u->never.addr = u->arena;
}

/* ---- launches ---- */
static atomic_int kernels_run, kernels_bad;

static void kernel(void *workspace, size_t size, void *userData) {
    (void)userData;
    if (workspace == NULL && size != 0) {
        atomic_fetch_add(&kernels_bad, 1);
        return;
    }
    memset(workspace, 0x5A, size);
    atomic_fetch_add(&kernels_run, 1);
}

static fakeExecuteViaGetByStreamFunc execute_exported;
static int launches_ok, launches_failed;

static aclError launch(aclrtStream stream, size_t size, int exported) {
    aclError rc = exported && execute_exported != NULL
                      ? execute_exported(stream, size, kernel, NULL)
                      : aclallocLaunchKernel(stream, size, kernel, NULL);
    if (rc == ACL_SUCCESS)
        launches_ok++;
    else
        launches_failed++;
    return rc;
}

typedef struct {
    aclrtStream stream;
    int delay_ms;
} concurrent_arg;

static void *concurrent_launch(void *p) {
    concurrent_arg *a = p;
    struct timespec t = {0, (long)a->delay_ms * 1000 * 1000};
    nanosleep(&t, NULL);
    aclError rc = aclallocLaunchKernel(a->stream, 4096, kernel, NULL);
    return (void *)(intptr_t)rc;
}

#define CHECK(call)                                                                    \
    do {                                                                               \
        aclError rc_ = (call);                                                         \
        if (rc_ != ACL_SUCCESS) {                                                      \
            const char *m_ = aclGetRecentErrMsg();                                     \
            printf("FAILED: %s -> %d (%s)\n", #call, rc_, m_ ? m_ : "no message");     \
            return 1;                                                                  \
        }                                                                              \
    } while (0)

typedef struct {
    aclrtAllocatorDesc desc;
    aclrtAllocator obj;
    aclrtAllocatorAllocFunc alloc;
    aclrtAllocatorFreeFunc free;
    aclrtAllocatorGetAddrFromBlockFunc get_addr;
} found_allocator;

static aclError lookup(aclrtStream stream, found_allocator *f) {
    return aclrtAllocatorGetByStream(stream, &f->desc, &f->obj, &f->alloc, &f->free, NULL,
                                     &f->get_addr);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "clean";
    int exit_code = strncmp(mode, "exit:", 5) == 0 ? atoi(mode + 5) : 0;
    execute_exported =
        (fakeExecuteViaGetByStreamFunc)dlsym(RTLD_DEFAULT, "fakeExecuteViaGetByStream");
    fakeVendorGetCountersFunc vendor_counters =
        (fakeVendorGetCountersFunc)dlsym(RTLD_DEFAULT, "fakeVendorGetCounters");

    static user_allocator u;
    user_init(&u);
    the_allocator = &u;

    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtStream s1 = NULL, s2 = NULL;
    CHECK(aclrtCreateStream(&s1));
    CHECK(aclrtCreateStream(&s2));
    printf("# stream1=%p stream2=%p allocator=%p\n", s1, s2, (void *)&u);

    aclrtAllocatorDesc desc = aclrtAllocatorCreateDesc();
    if (desc == NULL) {
        printf("FAILED: aclrtAllocatorCreateDesc\n");
        return 1;
    }
    CHECK(aclrtAllocatorSetObjToDesc(desc, &u));
    CHECK(aclrtAllocatorSetAllocFuncToDesc(desc, user_alloc));
    CHECK(aclrtAllocatorSetFreeFuncToDesc(desc, user_free));
    CHECK(aclrtAllocatorSetGetAddrFromBlockFuncToDesc(desc, user_get_addr));
    CHECK(aclrtAllocatorRegister(s1, desc));
    CHECK(aclrtAllocatorRegister(s2, desc));

    found_allocator f;
    CHECK(lookup(s1, &f));
    printf("get_by_stream: the user's descriptor: %s\n", f.desc == desc ? "yes" : "no");

    /* The clean part: each stream in turn, synchronized before the other
     * takes over the allocator. */
    static const size_t sizes[] = {4096, 1024, 65536, 512};
    aclrtStream streams[2] = {s1, s2};
    for (int s = 0; s < 2; s++) {
        for (int i = 0; i < 10; i++) {
            launch(streams[s], sizes[i % 4], 0);
            launch(streams[s], sizes[(i + 1) % 4], 1);
        }
        CHECK(aclrtSynchronizeStream(streams[s]));
    }

    /* One fault, if asked for. */
    if (strcmp(mode, "leak") == 0) {
        CHECK(lookup(s1, &f));
        void *b = f.alloc(f.obj, 3000);
        printf("leaked block has an address: %s\n", f.get_addr(b) != NULL ? "yes" : "no");
    } else if (strcmp(mode, "double-free") == 0) {
        CHECK(lookup(s2, &f));
        void *b = f.alloc(f.obj, 2000);
        f.get_addr(b);
        f.free(f.obj, b);
        f.free(f.obj, b);
    } else if (strcmp(mode, "unknown-free") == 0) {
        CHECK(lookup(s1, &f));
        f.free(f.obj, &u.never);
    } else if (strcmp(mode, "cross-stream") == 0) {
        launch(s1, 8192, 0);
        launch(s2, 8192, 0); /* s1 was not synchronized: its workspace may be in use */
    } else if (strcmp(mode, "event-ordered") == 0) {
        /* s2 waits on an event recorded on s1 after s1's free: ordered. */
        aclrtEvent ev = NULL;
        CHECK(aclrtCreateEvent(&ev));
        launch(s1, 8192, 0);
        CHECK(aclrtRecordEvent(ev, s1));
        CHECK(aclrtStreamWaitEvent(s2, ev));
        launch(s2, 8192, 0);
        CHECK(aclrtDestroyEvent(ev));
    } else if (strcmp(mode, "event-before-free") == 0) {
        /* The record comes before s1's free: the wait orders nothing. */
        aclrtEvent ev = NULL;
        CHECK(aclrtCreateEvent(&ev));
        CHECK(aclrtRecordEvent(ev, s1));
        launch(s1, 8192, 0);
        CHECK(aclrtStreamWaitEvent(s2, ev));
        launch(s2, 8192, 0);
        CHECK(aclrtDestroyEvent(ev));
    } else if (strcmp(mode, "overlap") == 0) {
        CHECK(lookup(s1, &f));
        void *held = f.alloc(f.obj, 4096);
        f.get_addr(held);
        u.overlap_next = 1;
        launch(s1, 4096, 0);
        f.free(f.obj, held);
    } else if (strcmp(mode, "null-address") == 0) {
        u.null_addr_next = 1;
        printf("launch without an address fails: %s\n",
               launch(s1, 1024, 0) != ACL_SUCCESS ? "yes" : "no");
    } else if (strcmp(mode, "concurrent") == 0) {
        u.slow = 1;
        pthread_t a, b;
        concurrent_arg arg_a = {s1, 0}, arg_b = {s2, 50};
        pthread_create(&a, NULL, concurrent_launch, &arg_a);
        pthread_create(&b, NULL, concurrent_launch, &arg_b);
        void *ra, *rb;
        pthread_join(a, &ra);
        pthread_join(b, &rb);
        u.slow = 0;
        printf("concurrent launches succeeded: %s\n", ra == NULL && rb == NULL ? "yes" : "no");
    }
    CHECK(aclrtSynchronizeStream(s1));
    CHECK(aclrtSynchronizeStream(s2));

    if (strcmp(mode, "runtime-desc") == 0) {
        /* A descriptor the runtime made itself, registered on a third stream:
         * its launches go through the user's allocator like the others. */
        fakeCreateFilledDescFunc make =
            (fakeCreateFilledDescFunc)dlsym(RTLD_DEFAULT, "fakeCreateFilledDesc");
        aclrtStream s3 = NULL;
        CHECK(aclrtCreateStream(&s3));
        aclrtAllocatorDesc inner = make != NULL
                                       ? make(&u, user_alloc, user_free, user_get_addr)
                                       : aclrtAllocatorCreateDesc();
        if (make == NULL) {
            CHECK(aclrtAllocatorSetObjToDesc(inner, &u));
            CHECK(aclrtAllocatorSetAllocFuncToDesc(inner, user_alloc));
            CHECK(aclrtAllocatorSetFreeFuncToDesc(inner, user_free));
            CHECK(aclrtAllocatorSetGetAddrFromBlockFuncToDesc(inner, user_get_addr));
        }
        CHECK(aclrtAllocatorRegister(s3, inner));
        CHECK(lookup(s3, &f));
        printf("runtime-made descriptor read back: %s\n", f.desc == inner ? "yes" : "no");
        for (int i = 0; i < 3; i++) {
            launch(s3, 2048, 0);
            launch(s3, 2048, 1);
        }
        CHECK(aclrtSynchronizeStream(s3));
        CHECK(aclrtAllocatorUnregister(s3));
        CHECK(aclrtDestroyStream(s3));
    }

    if (strcmp(mode, "errmsg") == 0) {
        /* aclGetRecentErrMsg returns the most recent failure's message,
         * whichever side failed: first one of aclalloc's own functions (when
         * it is there) fails and its message is left unread, then the
         * runtime fails. */
        typedef aclError (*default_free_fn)(void *);
        default_free_fn own = (default_free_fn)dlsym(RTLD_DEFAULT, "aclallocDefaultFree");
        if (own != NULL) {
            printf("aclalloc's call failed: %s\n", own((void *)0x1000) != ACL_SUCCESS ? "yes" : "no");
        }
        aclError rc = aclrtSetDevice(5);
        const char *m = aclGetRecentErrMsg();
        printf("runtime failed: %d; recent message: %s\n", rc, m ? m : "(none)");
        /* And the other way round: the runtime's message left unread, then
         * aclalloc fails. */
        if (own != NULL) {
            (void)aclrtSetDevice(5);
            (void)own((void *)0x1000);
            m = aclGetRecentErrMsg();
            printf("after both, recent message: %s\n", m ? m : "(none)");
        }
    }

    if (strcmp(mode, "stream-reuse") == 0) {
        /* A stream destroyed while registered, and a new one: does it inherit
         * the allocator? CANN keeps the stale entry; libaclalloc does not. */
        CHECK(aclrtDestroyStream(s1));
        aclrtStream s3 = NULL;
        CHECK(aclrtCreateStream(&s3));
        aclrtAllocatorDesc inherited = NULL;
        aclError rc = aclrtAllocatorGetByStream(s3, &inherited, NULL, NULL, NULL, NULL, NULL);
        (void)aclGetRecentErrMsg();
        printf("# new stream has the old handle: %s; inherits an allocator: %s\n",
               s3 == s1 ? "yes" : "no", rc == ACL_SUCCESS ? "yes" : "no");
        s1 = s3;
    }

    if (strcmp(mode, "vm") == 0) {
        /* CANN's virtual-memory flow; with a runtime behind the library
         * every call must reach it. */
        aclrtPhysicalMemProp prop;
        memset(&prop, 0, sizeof prop);
        prop.memAttr = ACL_HBM_MEM_HUGE;
        prop.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
        size_t granularity = 0;
        void *va = NULL;
        aclrtDrvMemHandle handle = NULL;
        CHECK(aclrtMemGetAllocationGranularity(&prop, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &granularity));
        CHECK(aclrtReserveMemAddress(&va, 2 * granularity, 0, NULL, 0));
        CHECK(aclrtMallocPhysical(&handle, granularity, &prop, 0));
        CHECK(aclrtMapMem(va, granularity, 0, handle, 0));
        ((volatile char *)va)[granularity - 1] = 1;
        CHECK(aclrtUnmapMem(va));
        CHECK(aclrtFreePhysical(handle));
        CHECK(aclrtReleaseMemAddress(va));
        fakeVendorVmCallsFunc vm_calls = (fakeVendorVmCallsFunc)dlsym(RTLD_DEFAULT, "fakeVendorVmCalls");
        printf("vm: granularity %zu, vendor calls %llu\n", granularity,
               vm_calls != NULL ? (unsigned long long)vm_calls() : 0ULL);
    }

    printf("mode: %s\n", mode);
    printf("launches: %d ok, %d failed\n", launches_ok, launches_failed);
    printf("kernels: %d run, %d without workspace\n", atomic_load(&kernels_run),
           atomic_load(&kernels_bad));
    printf("user allocator: allocs=%llu frees=%llu get_addrs=%llu bad_frees=%llu live=%d\n",
           (unsigned long long)u.allocs, (unsigned long long)u.frees,
           (unsigned long long)u.get_addrs, (unsigned long long)u.bad_frees,
           NBLOCKS - u.free_count);
    if (vendor_counters != NULL) {
        fakeVendorCounters c;
        vendor_counters(&c);
        printf("vendor executor: internal=%llu exported=%llu allocs=%llu frees=%llu "
               "get_addrs=%llu\n",
               (unsigned long long)c.launches_internal, (unsigned long long)c.launches_exported,
               (unsigned long long)c.allocs, (unsigned long long)c.frees,
               (unsigned long long)c.get_addrs);
    } else {
        printf("vendor executor: none\n");
    }

    if (strcmp(mode, "leak-at-exit") == 0) {
        /* A block taken and never returned, and no teardown at all. */
        CHECK(lookup(s2, &f));
        f.get_addr(f.alloc(f.obj, 5000));
        printf("result: ok\n");
        fflush(stdout);
        return 0;
    }

    CHECK(aclrtAllocatorUnregister(s1));
    CHECK(aclrtAllocatorUnregister(s2));
    CHECK(aclrtAllocatorDestroyDesc(desc));
    CHECK(aclrtDestroyStream(s1));
    CHECK(aclrtDestroyStream(s2));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("result: ok\n");
    fflush(stdout);
    return exit_code;
}
