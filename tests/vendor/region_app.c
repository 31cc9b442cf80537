/*
 * Tagged regions in front of the stand-in vendor runtime: a program that
 * allocates its own device memory (aclrtMalloc, and a torch_npu-style
 * expandable segment: reserve, physical, map) inside aclallocRegionBegin /
 * aclallocRegionEnd, then sleeps and wakes it. Run under `aclalloc run` or
 * with libaclalloc preloaded; the aclalloc* calls are looked up at run time
 * (the program links only the runtime, as torch_npu does).
 *
 * It checks, through the stand-in's counters, that the region's memory is
 * the runtime's virtual memory, that sleep gives all of it back and wake
 * takes it again, that a copy of sleeping memory is refused naming the tag
 * (the stand-in would fault on it), that contents and addresses survive,
 * that a wake short of memory leaves everything asleep and nothing
 * allocated, that frees work asleep, and that 100 cycles end where they
 * began. Prints one line per check; exits non-zero at the first failure.
 */
#define _GNU_SOURCE
#include "fake_acl.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB ((size_t)1 << 20)
#define PAGE (2 * MIB)

typedef aclError (*begin_fn)(const char *);
typedef aclError (*end_fn)(void);
typedef aclError (*sleep_fn)(const char *const *, size_t);

static begin_fn region_begin;
static end_fn region_end;
static sleep_fn acl_sleep, acl_wake;
static size_t (*physical_bytes)(void);
static void (*set_limit)(size_t);
static int (*mappings)(void);
static uint64_t (*device_mallocs)(void);

#define CHECK(cond, what)                                                              \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            printf("FAILED: %s (line %d): %s\n", what, __LINE__, aclGetRecentErrMsg()); \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

static void *lookup(const char *name) {
    void *f = dlsym(RTLD_DEFAULT, name);
    if (f == NULL) {
        printf("FAILED: %s is not loaded (run under aclalloc run)\n", name);
        exit(2);
    }
    return f;
}

static void fill(unsigned char *buf, size_t len, unsigned seed) {
    for (size_t i = 0; i < len; i++) buf[i] = (unsigned char)(i * 31 + seed + (i >> 12));
}

static void put(void *dev, size_t len, unsigned seed) {
    unsigned char *buf = malloc(len);
    fill(buf, len, seed);
    CHECK(aclrtMemcpy(dev, len, buf, len, ACL_MEMCPY_HOST_TO_DEVICE) == ACL_SUCCESS, "write");
    free(buf);
}

/* 1: `dev` holds the pattern of `seed`; 0: it does not; -1: the copy was refused. */
static int holds(void *dev, size_t len, unsigned seed) {
    unsigned char *want = malloc(len), *got = malloc(len);
    fill(want, len, seed);
    int rc = aclrtMemcpy(got, len, dev, len, ACL_MEMCPY_DEVICE_TO_HOST) != ACL_SUCCESS ? -1
             : memcmp(want, got, len) == 0                                          ? 1
                                                                                      : 0;
    free(want);
    free(got);
    return rc;
}

/* A refused copy whose message names the tag. */
static void refused(void *dev, const char *tag) {
    char quoted[64];
    snprintf(quoted, sizeof quoted, "\"%s\"", tag);
    unsigned char byte;
    CHECK(aclrtMemcpy(&byte, 1, dev, 1, ACL_MEMCPY_DEVICE_TO_HOST) != ACL_SUCCESS, "copy refused");
    const char *m = aclGetRecentErrMsg();
    CHECK(m != NULL && strstr(m, quoted) != NULL, "the message names the tag");
}

typedef struct {
    void *va;
    aclrtDrvMemHandle pages[2];
} segment;

static aclrtPhysicalMemProp prop(void) {
    aclrtPhysicalMemProp p;
    memset(&p, 0, sizeof p);
    p.handleType = ACL_MEM_HANDLE_TYPE_NONE;
    p.allocationType = ACL_MEM_ALLOCATION_TYPE_PINNED;
    p.memAttr = ACL_HBM_MEM_HUGE;
    p.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = 0;
    return p;
}

static segment segment_new(void) {
    segment s;
    aclrtPhysicalMemProp p = prop();
    CHECK(aclrtReserveMemAddress(&s.va, 2 * PAGE, 0, NULL, 1) == ACL_SUCCESS, "reserve");
    for (int i = 0; i < 2; i++) {
        CHECK(aclrtMallocPhysical(&s.pages[i], PAGE, &p, 0) == ACL_SUCCESS, "physical");
        CHECK(aclrtMapMem((char *)s.va + i * PAGE, PAGE, 0, s.pages[i], 0) == ACL_SUCCESS, "map");
    }
    return s;
}

static void segment_release(segment s) {
    for (int i = 0; i < 2; i++) {
        CHECK(aclrtUnmapMem((char *)s.va + i * PAGE) == ACL_SUCCESS, "unmap");
        CHECK(aclrtFreePhysical(s.pages[i]) == ACL_SUCCESS, "free physical");
    }
    CHECK(aclrtReleaseMemAddress(s.va) == ACL_SUCCESS, "release");
}

int main(void) {
    region_begin = (begin_fn)lookup("aclallocRegionBegin");
    region_end = (end_fn)lookup("aclallocRegionEnd");
    acl_sleep = (sleep_fn)lookup("aclallocSleep");
    acl_wake = (sleep_fn)lookup("aclallocWakeUp");
    physical_bytes = (size_t (*)(void))lookup("fakeVendorPhysicalBytes");
    set_limit = (void (*)(size_t))lookup("fakeVendorSetPhysicalLimit");
    mappings = (int (*)(void))lookup("fakeVendorMappings");
    device_mallocs = (uint64_t (*)(void))lookup("fakeVendorDeviceMallocs");
    const char *weights[] = {"weights"};

    CHECK(aclInit(NULL) == ACL_SUCCESS, "aclInit");
    CHECK(aclrtSetDevice(0) == ACL_SUCCESS, "aclrtSetDevice");
    CHECK(region_end() != ACL_SUCCESS, "an end without a begin is refused");
    printf("unmatched end refused\n");

    CHECK(region_begin("weights") == ACL_SUCCESS, "begin");
    void *a = NULL;
    CHECK(aclrtMalloc(&a, 3 * MIB, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS, "aclrtMalloc");
    segment seg = segment_new();
    CHECK(region_end() == ACL_SUCCESS, "end");
    CHECK(physical_bytes() == 4 * PAGE, "the region's memory is the runtime's physical memory");
    CHECK(mappings() == 3, "mapped by the runtime");
    CHECK(device_mallocs() == 0, "no aclrtMalloc reached the runtime: its memory could not sleep");
    printf("region memory made with the runtime's virtual-memory calls\n");

    put(a, 3 * MIB, 1);
    put(seg.va, 2 * PAGE, 2);
    CHECK(acl_sleep(weights, 1) == ACL_SUCCESS, "sleep");
    CHECK(physical_bytes() == 0 && mappings() == 0, "sleep gave every page back");
    refused(a, "weights");
    refused((char *)seg.va + PAGE, "weights");
    CHECK(aclrtMemset(a, 16, 0, 16) != ACL_SUCCESS, "a set of sleeping memory is refused");
    printf("asleep: memory given back, copies refused naming the tag\n");
    CHECK(acl_wake(NULL, 0) == ACL_SUCCESS, "wake");
    CHECK(physical_bytes() == 4 * PAGE && mappings() == 3, "wake mapped it again");
    CHECK(holds(a, 3 * MIB, 1) == 1 && holds(seg.va, 2 * PAGE, 2) == 1, "contents restored");
    printf("awake: contents restored at the same addresses\n");

    /* Discarded: fresh memory (the stand-in's is zero), usable. */
    CHECK(acl_sleep(NULL, 0) == ACL_SUCCESS, "sleep, discard");
    CHECK(acl_wake(NULL, 0) == ACL_SUCCESS, "wake, discard");
    CHECK(holds(a, 3 * MIB, 1) == 0, "discarded");
    put(a, 3 * MIB, 3);
    CHECK(holds(a, 3 * MIB, 3) == 1, "usable after a discard");
    printf("discarded: fresh memory\n");

    /* A wake short of memory: room for some of the four pages, never all. */
    put(seg.va, 2 * PAGE, 4);
    CHECK(acl_sleep(weights, 1) == ACL_SUCCESS, "sleep before the short wake");
    set_limit(5 * PAGE / 2);
    CHECK(acl_wake(NULL, 0) != ACL_SUCCESS, "a wake short of memory fails");
    CHECK(physical_bytes() == 0 && mappings() == 0, "the pages woken went back to sleep");
    refused(a, "weights");
    set_limit(0);
    CHECK(acl_wake(NULL, 0) == ACL_SUCCESS, "the wake after");
    CHECK(holds(a, 3 * MIB, 3) == 1 && holds(seg.va, 2 * PAGE, 4) == 1, "contents kept");
    printf("short wake rolled back\n");

    for (unsigned cycle = 0; cycle < 100; cycle++) {
        CHECK(acl_sleep(weights, cycle % 2 == 0 ? 1 : 0) == ACL_SUCCESS, "cycle sleep");
        CHECK(acl_wake(NULL, 0) == ACL_SUCCESS, "cycle wake");
        CHECK(physical_bytes() == 4 * PAGE && mappings() == 3, "no growth");
    }
    CHECK(holds(seg.va, 2 * PAGE, 4) != -1, "usable after the cycles");
    printf("100 cycles\n");

    /* Freed asleep: everything goes back, the handles stay valid for it. */
    CHECK(acl_sleep(weights, 1) == ACL_SUCCESS, "sleep before the frees");
    CHECK(aclrtFree(a) == ACL_SUCCESS, "aclrtFree asleep");
    segment_release(seg);
    CHECK(physical_bytes() == 0 && mappings() == 0, "nothing left");
    CHECK(acl_wake(NULL, 0) == ACL_SUCCESS, "a wake with nothing asleep");
    CHECK(physical_bytes() == 0, "nothing woken");
    printf("freed asleep\n");
    CHECK(aclrtResetDevice(0) == ACL_SUCCESS, "reset");
    CHECK(aclFinalize() == ACL_SUCCESS, "finalize");
    return 0;
}
