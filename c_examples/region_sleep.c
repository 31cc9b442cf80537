/*
 * Sleep and wake of memory the program allocates itself: inside
 * aclallocRegionBegin("weights") / aclallocRegionEnd, an aclrtMalloc buffer
 * and a torch_npu-style expandable segment (aclrtReserveMemAddress, then
 * aclrtMallocPhysical + aclrtMapMem per 2 MiB page) belong to the tag.
 * aclallocSleep gives their physical memory back (the device's free memory
 * returns to what it was before them) and keeps the addresses; a copy of
 * that memory is refused, the tag in the message. aclallocWakeUp maps new
 * memory at the same addresses and restores the contents byte-exact.
 * Then the frees: aclrtFree and the segment's aclrtUnmapMem /
 * aclrtFreePhysical / aclrtReleaseMemAddress, with the program's own
 * physical handles, work after sleep and wake and while asleep.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acl/acl.h"
#include "aclalloc.h"
#include "common/check.h"
#include "common/expect.h"

#define MIB ((size_t)1 << 20)
#define PAGE (2 * MIB)
#define PAGES 4

static size_t device_free(void) {
    size_t free_b = 0, total = 0;
    aclrtGetMemInfo(ACL_HBM_MEM, &free_b, &total);
    return free_b;
}

static void fill(unsigned char *buf, size_t len, unsigned seed) {
    for (size_t i = 0; i < len; i++) buf[i] = (unsigned char)(i * 7 + seed);
}

/* 1 when `dev` holds the pattern of `seed`. */
static int holds(void *dev, size_t len, unsigned seed) {
    unsigned char *want = malloc(len), *got = malloc(len);
    fill(want, len, seed);
    int ok = aclrtMemcpy(got, len, dev, len, ACL_MEMCPY_DEVICE_TO_HOST) == ACL_SUCCESS &&
             memcmp(want, got, len) == 0;
    free(want);
    free(got);
    return ok;
}

static aclError put(void *dev, size_t len, unsigned seed) {
    unsigned char *buf = malloc(len);
    fill(buf, len, seed);
    aclError rc = aclrtMemcpy(dev, len, buf, len, ACL_MEMCPY_HOST_TO_DEVICE);
    free(buf);
    return rc;
}

int main(void) {
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    const size_t before = device_free();

    aclrtPhysicalMemProp prop;
    memset(&prop, 0, sizeof prop);
    prop.handleType = ACL_MEM_HANDLE_TYPE_NONE;
    prop.allocationType = ACL_MEM_ALLOCATION_TYPE_PINNED;
    prop.memAttr = ACL_HBM_MEM_HUGE;
    prop.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;

    void *buffer = NULL, *segment = NULL;
    aclrtDrvMemHandle pages[PAGES];
    CHECK(aclallocRegionBegin("weights"));
    CHECK(aclrtMalloc(&buffer, 6 * MIB, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtReserveMemAddress(&segment, PAGES * PAGE, 0, NULL, 1));
    for (int i = 0; i < PAGES; i++) {
        CHECK(aclrtMallocPhysical(&pages[i], PAGE, &prop, 0));
        CHECK(aclrtMapMem((char *)segment + i * PAGE, PAGE, 0, pages[i], 0));
    }
    CHECK(aclallocRegionEnd());
    expect("aclallocRegionEnd with no region open", aclallocRegionEnd(), ACL_ERROR_FAILURE,
           "no aclallocRegionBegin");
    CHECK(put(buffer, 6 * MIB, 1));
    CHECK(put(segment, PAGES * PAGE, 2));
    const size_t held = before - device_free();
    printf("region \"weights\": %zu MiB of device memory\n", held / MIB);

    const char *offload[] = {"weights"};
    CHECK(aclallocSleep(offload, 1));
    EXPECT(device_free() == before);
    printf("asleep: the device has its %zu MiB back\n", held / MIB);
    unsigned char byte = 0;
    expect("aclrtMemcpy from sleeping memory",
           aclrtMemcpy(&byte, 1, (char *)segment + PAGE, 1, ACL_MEMCPY_DEVICE_TO_HOST),
           ACL_ERROR_INVALID_PARAM, "\"weights\"");

    CHECK(aclallocWakeUp(NULL, 0));
    EXPECT(before - device_free() == held);
    EXPECT(holds(buffer, 6 * MIB, 1));
    EXPECT(holds(segment, PAGES * PAGE, 2));
    printf("awake: contents restored at the same addresses\n");

    /* Freed while asleep: the program's handles still work for it. */
    CHECK(aclallocSleep(offload, 1));
    CHECK(aclrtFree(buffer));
    for (int i = 0; i < PAGES; i++) {
        CHECK(aclrtUnmapMem((char *)segment + i * PAGE));
        CHECK(aclrtFreePhysical(pages[i]));
    }
    CHECK(aclrtReleaseMemAddress(segment));
    CHECK(aclallocWakeUp(NULL, 0));
    EXPECT(device_free() == before);
    printf("freed while asleep: nothing left\n");

    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    return failures == 0 ? 0 : 1;
}
