/*
 * A pluggable allocator whose other functions are given by address after
 * creation, as torch_npu's allocator object takes them
 * (allocator().set_init_fn(ptr), ...): a serving engine's C++ allocator
 * hands its functions over this way. The program checks that each is called
 * where torch_npu calls it: init at the first use, the reset function by
 * empty cache, its device statistics (torch_npu's DeviceStats layout,
 * returned by value), the peak reset, the stream functions and base
 * allocations for live blocks only.
 *
 * Usage: pluggable_hooks [PLUGIN_PATH]  (default: the one built with it)
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "acl/acl.h"
#include "aclalloc.h"
#include "common/expect.h"

#ifndef PLUGIN_PATH
#define PLUGIN_PATH "libmy_plugin_allocator.so"
#endif

static int inits, init_devices, resets, peak_device = -1, records;
static void *recorded;
static int64_t live_bytes;

static void on_init(int device_count) {
    inits++;
    init_devices = device_count;
}
static void on_reset(bool check_error) { resets += check_error ? 1 : 100; }
static void on_reset_peak(int device) { peak_device = device; }
static void on_record(void *ptr, aclrtStream stream) {
    (void)stream;
    records++;
    recorded = ptr;
}
/* The engine's own accounting, in torch_npu's layout. */
static aclallocPluggableDeviceStats on_device_stats(int device) {
    aclallocPluggableDeviceStats s;
    memset(&s, 0, sizeof s);
    s.allocated_bytes[0].current = live_bytes;
    s.num_alloc_retries = device + 10;
    s.num_device_alloc = 1;
    s.max_split_size = 1 << 20;
    return s;
}
/* The same, built against PyTorch's older 952-byte layout. */
static aclallocPluggableDeviceStatsV1 on_device_stats_v1(int device) {
    aclallocPluggableDeviceStatsV1 s;
    memset(&s, 0, sizeof s);
    s.num_alloc_retries = device + 20;
    s.max_split_size = 1 << 21;
    return s;
}
static void *on_base_alloc(void *ptr, size_t *size) {
    *size = 4096;
    return ptr;
}

int main(int argc, char **argv) {
    aclallocPluggableConfig config;
    memset(&config, 0, sizeof config);
    config.path = argc > 1 ? argv[1] : PLUGIN_PATH;
    config.allocSymbol = "my_malloc";
    config.freeSymbol = "my_free";
    aclallocPluggable plugin = NULL;
    aclrtAllocatorDesc desc = NULL;
    if (aclallocPluggableCreate(&config, &plugin, &desc) != ACL_SUCCESS) {
        fprintf(stderr, "aclallocPluggableCreate: %s\n", aclGetRecentErrMsg());
        return 1;
    }
    EXPECT(aclallocPluggableSetInitFn(plugin, on_init) == ACL_SUCCESS);
    EXPECT(aclallocPluggableSetResetFn(plugin, on_reset) == ACL_SUCCESS);
    EXPECT(aclallocPluggableSetGetDeviceStatsFn(plugin, on_device_stats) == ACL_SUCCESS);
    EXPECT(aclallocPluggableSetResetPeakStatusFn(plugin, on_reset_peak) == ACL_SUCCESS);
    EXPECT(aclallocPluggableSetRecordStreamFn(plugin, on_record) == ACL_SUCCESS);
    EXPECT(aclallocPluggableSetBaseAllocFn(plugin, on_base_alloc) == ACL_SUCCESS);
    EXPECT(inits == 0);

    void *p = NULL;
    EXPECT(aclallocPluggableMalloc(plugin, &p, 4096, NULL) == ACL_SUCCESS);
    live_bytes += 4096;
    EXPECT(inits == 1 && init_devices >= 1);

    aclallocPluggableDeviceStats stats;
    EXPECT(aclallocPluggableGetDeviceStats(plugin, 1, &stats) == ACL_SUCCESS);
    printf("device 1: %lld bytes live, %lld retries\n", (long long)stats.allocated_bytes[0].current,
           (long long)stats.num_alloc_retries);
    EXPECT(stats.allocated_bytes[0].current == 4096 && stats.num_alloc_retries == 11);
    EXPECT(stats.max_split_size == 1 << 20 && stats.num_device_alloc == 1);

    /* A function of the older layout, declared: called with room for the
     * current one, read as the older one. */
    EXPECT(aclallocPluggableSetDeviceStatsLayout(plugin, ACLALLOC_DEVICE_STATS_LAYOUT_V1) ==
           ACL_SUCCESS);
    EXPECT(aclallocPluggableSetGetDeviceStatsFn(
               plugin, (aclallocPluggableGetDeviceStatsFn)(void (*)(void))on_device_stats_v1) ==
           ACL_SUCCESS);
    EXPECT(aclallocPluggableGetDeviceStats(plugin, 1, &stats) == ACL_SUCCESS);
    EXPECT(stats.num_alloc_retries == 21 && stats.max_split_size == 1 << 21);
    EXPECT(stats.num_device_alloc == 0 && stats.num_device_free == 0);
    EXPECT(aclallocPluggableSetDeviceStatsLayout(plugin, 7) == ACL_ERROR_INVALID_PARAM);
    EXPECT(aclallocPluggableSetDeviceStatsLayout(plugin, ACLALLOC_DEVICE_STATS_LAYOUT_CURRENT) ==
           ACL_SUCCESS);
    EXPECT(aclallocPluggableSetGetDeviceStatsFn(plugin, on_device_stats) == ACL_SUCCESS);

    static int stream_storage;
    EXPECT(aclallocPluggableRecordStream(plugin, p, &stream_storage) == ACL_SUCCESS);
    EXPECT(records == 1 && recorded == p);
    void *base = NULL;
    size_t size = 0;
    EXPECT(aclallocPluggableGetBaseAllocation(plugin, p, &base, &size) == ACL_SUCCESS);
    EXPECT(base == p && size == 4096);
    EXPECT(aclallocPluggableResetPeakStatus(plugin, 1) == ACL_SUCCESS && peak_device == 1);
    EXPECT(aclallocPluggableEmptyCache(plugin) == ACL_SUCCESS && resets == 1);

    EXPECT(aclallocPluggableFree(plugin, p) == ACL_SUCCESS);
    live_bytes -= 4096;
    /* A freed block no longer reaches the stream function. */
    EXPECT(aclallocPluggableRecordStream(plugin, p, &stream_storage) == ACL_ERROR_INVALID_PARAM);
    EXPECT(records == 1);
    EXPECT(aclallocPluggableDestroy(plugin) == ACL_SUCCESS);
    printf("%s\n", failures == 0 ? "pluggable hooks: ok" : "pluggable hooks: FAILED");
    return failures == 0 ? 0 : 1;
}
