/* A pluggable allocator in torch_npu's shape whose other functions are set
 * by address after creation (allocator().set_init_fn(ptr), ...), as serving
 * engines' allocators do. Each function records how it was called; the
 * getters let the tests read that. Its device statistics are returned by
 * value in PyTorch's current DeviceStats layout (aclallocPluggableDeviceStats,
 * 976 bytes), or built with -DHK_DEVICE_STATS_V1 in the older one
 * (aclallocPluggableDeviceStatsV1, 952 bytes), as a hook compiled against
 * an older PyTorch is. */
#include <stdbool.h>
#include <sys/types.h>

#include "aclalloc.h"

static long allocs, frees, inits, init_device_count, resets, reset_check_error;
static long fraction_device = -1, peak_device = -1, stats_device = -1;
static double fraction_value;
static long records, erases;
static void *last_stream_ptr, *last_stream;
static size_t bytes_live;

void *hk_malloc(ssize_t size, int device, aclrtStream stream) {
    (void)device;
    (void)stream;
    void *p = NULL;
    if (size < 0 || aclrtMalloc(&p, (size_t)size, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS)
        return NULL;
    allocs++;
    bytes_live += (size_t)size;
    return p;
}

void hk_free(void *ptr, ssize_t size, int device, aclrtStream stream) {
    (void)device;
    (void)stream;
    aclrtFree(ptr);
    frees++;
    bytes_live -= (size_t)size;
}

void hk_init(int device_count) {
    inits++;
    init_device_count = device_count;
}

void hk_reset(bool check_error) {
    resets++;
    reset_check_error = check_error;
}

void hk_memory_fraction(double fraction, int device) {
    fraction_value = fraction;
    fraction_device = device;
}

/* The allocation of any pointer is the 1 MiB-aligned range around it. */
void *hk_base_alloc(void *ptr, size_t *size) {
    *size = 1 << 20;
    return (void *)((size_t)ptr & ~(size_t)((1 << 20) - 1));
}

void hk_record_stream(void *ptr, aclrtStream stream) {
    records++;
    last_stream_ptr = ptr;
    last_stream = stream;
}

void hk_erase_stream(void *ptr, aclrtStream stream) {
    erases++;
    last_stream_ptr = ptr;
    last_stream = stream;
}

#ifdef HK_DEVICE_STATS_V1
typedef aclallocPluggableDeviceStatsV1 hk_device_stats;
#else
typedef aclallocPluggableDeviceStats hk_device_stats;
#endif

hk_device_stats hk_get_device_stats(int device) {
    hk_device_stats s = {0};
    stats_device = device;
    s.allocated_bytes[0].current = (int64_t)bytes_live;
    s.allocation[0].allocated = allocs;
    s.allocation[0].freed = frees;
    s.reserved_bytes[2].peak = 1 << 30;
    s.num_alloc_retries = 3;
    s.num_ooms = 1;
    s.oversize_segments.current = 2;
#ifndef HK_DEVICE_STATS_V1
    s.num_sync_all_streams = 5;
    s.num_device_alloc = (int64_t)allocs + 100;
    s.num_device_free = (int64_t)frees + 200;
#endif
    s.max_split_size = 4096;
    return s;
}

/* The size of the layout this object was built with. */
long hk_device_stats_size(void) { return (long)sizeof(hk_device_stats); }

void hk_reset_peak_status(int device) { peak_device = device; }

long hk_allocs(void) { return allocs; }
long hk_frees(void) { return frees; }
long hk_inits(void) { return inits; }
long hk_init_device_count(void) { return init_device_count; }
long hk_resets(void) { return resets; }
long hk_reset_check_error(void) { return reset_check_error; }
double hk_fraction_value(void) { return fraction_value; }
long hk_fraction_device(void) { return fraction_device; }
long hk_records(void) { return records; }
long hk_erases(void) { return erases; }
void *hk_last_stream_ptr(void) { return last_stream_ptr; }
void *hk_last_stream(void) { return last_stream; }
long hk_stats_device(void) { return stats_device; }
long hk_peak_device(void) { return peak_device; }
