/*
 * CANN's virtual-memory API on the host runtime, then a caching pool with
 * expandable segments built on it:
 *
 *   1. query the granularity, reserve address space, allocate physical
 *      memory, map it, use it with aclrtMemset/aclrtMemcpy, unmap, free,
 *      release (the order CANN's documentation gives);
 *   2. misuse gets CANN's error codes and a message, never a crash;
 *   3. a pool with expandable_segments = 1 under a 64 MiB limit reuses
 *      memory freed anywhere for a larger request, and gives its pages back
 *      on aclallocPoolEmptyCache.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define EXPECT_WHAT_WIDTH 44
#include "acl/acl.h"
#include "aclalloc.h"
#include "common/expect.h"

#define MIB ((size_t)1 << 20)

static size_t device_free(void) {
    size_t free_bytes = 0, total = 0;
    if (aclrtGetMemInfo(ACL_HBM_MEM, &free_bytes, &total) != ACL_SUCCESS) return 0;
    return free_bytes;
}

static int virtual_memory_api(void) {
    aclrtPhysicalMemProp prop;
    memset(&prop, 0, sizeof prop);
    prop.handleType = ACL_MEM_HANDLE_TYPE_NONE;
    prop.allocationType = ACL_MEM_ALLOCATION_TYPE_PINNED;
    prop.memAttr = ACL_HBM_MEM_HUGE;
    prop.location.id = 0;
    prop.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;

    size_t granularity = 0;
    expect("aclrtMemGetAllocationGranularity",
           aclrtMemGetAllocationGranularity(&prop, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &granularity),
           ACL_SUCCESS, "");
    EXPECT(granularity == 2 * MIB);

    void *va = NULL;
    expect("aclrtReserveMemAddress(4 granules)", aclrtReserveMemAddress(&va, 4 * granularity, 0, NULL, 0),
           ACL_SUCCESS, "");
    size_t before = device_free();
    aclrtDrvMemHandle handle = NULL;
    expect("aclrtMallocPhysical(2 granules)", aclrtMallocPhysical(&handle, 2 * granularity, &prop, 0), ACL_SUCCESS,
           "");
    EXPECT(device_free() == before - 2 * granularity);

    void *at = (char *)va + granularity;
    expect("aclrtMapMem(granule 1)", aclrtMapMem(at, 2 * granularity, 0, handle, 0), ACL_SUCCESS, "");
    expect("aclrtMemset(mapped range)", aclrtMemset(at, 2 * granularity, 0x42, 2 * granularity), ACL_SUCCESS, "");
    unsigned char host[8] = {0};
    expect("aclrtMemcpy(device to host)",
           aclrtMemcpy(host, sizeof host, (char *)at + 2 * granularity - sizeof host, sizeof host,
                       ACL_MEMCPY_DEVICE_TO_HOST),
           ACL_SUCCESS, "");
    EXPECT(host[0] == 0x42 && host[7] == 0x42);

    /* Misuse: CANN's codes, a message saying what to do, nothing broken. */
    expect("aclrtMapMem(over a live mapping)", aclrtMapMem(va, 2 * granularity, 0, handle, 0),
           ACL_ERROR_INVALID_PARAM, "overlaps a live mapping");
    expect("aclrtMapMem(unaligned address)", aclrtMapMem((char *)va + 4096, 2 * granularity, 0, handle, 0),
           ACL_ERROR_INVALID_PARAM, "multiple of the allocation granularity");
    expect("aclrtMapMem(past the reservation)", aclrtMapMem((char *)va + 3 * granularity, 2 * granularity, 0,
                                                            handle, 0),
           ACL_ERROR_INVALID_PARAM, "past the end of its reservation");
    expect("aclrtReleaseMemAddress(still mapped)", aclrtReleaseMemAddress(va),
           ACL_ERROR_RELATIVE_RESOURCE_NOT_CLEARED, "aclrtUnmapMem");
    expect("aclrtMallocPhysical(unaligned size)", aclrtMallocPhysical(&handle, granularity + 1, &prop, 0),
           ACL_ERROR_INVALID_PARAM, "granularity");
    int local = 0;
    expect("aclrtFreePhysical(foreign handle)", aclrtFreePhysical(&local), ACL_ERROR_INVALID_PARAM,
           "not a live physical memory handle");

    expect("aclrtUnmapMem", aclrtUnmapMem(at), ACL_SUCCESS, "");
    expect("aclrtUnmapMem(again)", aclrtUnmapMem(at), ACL_ERROR_INVALID_PARAM, "not the start of a live mapping");
    expect("aclrtFreePhysical", aclrtFreePhysical(handle), ACL_SUCCESS, "");
    EXPECT(device_free() == before);
    expect("aclrtFreePhysical(again)", aclrtFreePhysical(handle), ACL_ERROR_INVALID_PARAM,
           "already freed");
    expect("aclrtReleaseMemAddress", aclrtReleaseMemAddress(va), ACL_SUCCESS, "");
    expect("aclrtReleaseMemAddress(again)", aclrtReleaseMemAddress(va), ACL_ERROR_INVALID_PARAM,
           "not the start of a live reservation");
    return 0;
}

static int expandable_pool(void) {
    aclallocPoolConfig config;
    expect("aclallocPoolConfigInit", aclallocPoolConfigInit(&config), ACL_SUCCESS, "");
    config.expandable_segments = 1;
    config.memory_limit = 64 * MIB; /* at most 64 MiB mapped */
    aclallocPool pool = NULL;
    aclrtAllocatorDesc desc = NULL;
    expect("aclallocPoolCreate(expandable)", aclallocPoolCreate(&config, &pool, &desc), ACL_SUCCESS, "");
    if (pool == NULL) return 1;

    /* Twelve 4.5 MiB blocks; free every other one: 27 MiB free in holes. */
    void *blocks[12];
    for (int i = 0; i < 12; i++) {
        blocks[i] = aclallocPoolAlloc(pool, 9 * MIB / 2);
        EXPECT(blocks[i] != NULL);
    }
    for (int i = 0; i < 12; i += 2) aclallocPoolFree(pool, blocks[i]);
    /* A 24 MiB block: 54 MiB are mapped, so 24 more would pass the limit.
     * The pool unmaps the pages of the holes and maps pages where the block
     * fits. With fixed segments this fails: no 24 MiB range is free. */
    void *big = aclallocPoolAlloc(pool, 24 * MIB);
    EXPECT(big != NULL);
    expect("aclrtMemset(the 24 MiB block)", aclrtMemset(big, 24 * MIB, 7, 24 * MIB), ACL_SUCCESS, "");

    size_t reserved = 0;
    expect("aclallocPoolMemoryReserved", aclallocPoolMemoryReserved(pool, &reserved), ACL_SUCCESS, "");
    printf("mapped with 51 MiB live: %zu MiB\n", reserved / MIB);
    EXPECT(reserved % (2 * MIB) == 0 && reserved >= 51 * MIB && reserved <= 64 * MIB);

    char snapshot[512];
    expect("aclallocPoolSnapshot", aclallocPoolSnapshot(pool, snapshot, sizeof snapshot, NULL), ACL_SUCCESS, "");
    EXPECT(strstr(snapshot, "\"is_expandable\":true") != NULL);

    aclallocPoolFree(pool, big);
    for (int i = 1; i < 12; i += 2) aclallocPoolFree(pool, blocks[i]);
    expect("aclallocPoolEmptyCache", aclallocPoolEmptyCache(pool), ACL_SUCCESS, "");
    expect("aclallocPoolMemoryReserved", aclallocPoolMemoryReserved(pool, &reserved), ACL_SUCCESS, "");
    EXPECT(reserved == 0);
    expect("aclallocPoolEmptyVirtAddrCache", aclallocPoolEmptyVirtAddrCache(pool), ACL_SUCCESS, "");
    expect("aclallocPoolDestroy", aclallocPoolDestroy(pool), ACL_SUCCESS, "");
    expect("aclrtAllocatorDestroyDesc", aclrtAllocatorDestroyDesc(desc), ACL_SUCCESS, "");
    return 0;
}

int main(void) {
    expect("aclInit", aclInit(NULL), ACL_SUCCESS, "");
    expect("aclrtSetDevice(0)", aclrtSetDevice(0), ACL_SUCCESS, "");
    virtual_memory_api();
    expandable_pool();
    expect("aclrtResetDevice(0)", aclrtResetDevice(0), ACL_SUCCESS, "");
    expect("aclFinalize", aclFinalize(), ACL_SUCCESS, "");
    printf("%d failed\n", failures);
    return failures == 0 ? 0 : 1;
}
