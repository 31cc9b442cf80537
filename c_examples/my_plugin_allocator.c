/*
 * A pluggable allocator in torch_npu's shape, built as a shared object:
 *
 *   void *my_malloc(ssize_t size, int device, aclrtStream stream);
 *   void  my_free(void *ptr, ssize_t size, int device, aclrtStream stream);
 *   void  my_init(int device_count);
 *   void  my_empty_cache(void);
 *   void  my_set_memory_fraction(double fraction, int device);
 *
 * It knows nothing of aclalloc (a plugin needs no header of ours). Each block
 * carries a small header with the size, device and stream it was allocated
 * for, so my_free can check that it is given them back. Requests above the
 * limit (1 GiB, or the memory fraction of it) return NULL.
 */
#define _POSIX_C_SOURCE 200112L
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/types.h>

#define PLUGIN_EXPORT __attribute__((visibility("default")))

typedef void *aclrtStream;

typedef struct {
    ssize_t size;
    int device;
    aclrtStream stream;
    uint64_t magic;
} Header;

#define MAGIC 0x706c7567696e21ULL
#define HEADER_SPACE 64 /* keeps the user's pointer 64-byte aligned */
#define LIMIT ((ssize_t)1 << 30)

static atomic_long live_blocks, allocs, frees, mismatches, init_calls, empty_cache_calls;
static atomic_long live_bytes, init_device_count;
static _Atomic double fraction = 1.0;

PLUGIN_EXPORT void *my_malloc(ssize_t size, int device, aclrtStream stream) {
    if (size < 0 || (double)size > (double)LIMIT * atomic_load(&fraction)) return NULL;
    unsigned char *raw = NULL;
    if (posix_memalign((void **)&raw, HEADER_SPACE, HEADER_SPACE + (size_t)size) != 0) return NULL;
    Header *h = (Header *)raw;
    h->size = size;
    h->device = device;
    h->stream = stream;
    h->magic = MAGIC;
    atomic_fetch_add(&live_blocks, 1);
    atomic_fetch_add(&allocs, 1);
    atomic_fetch_add(&live_bytes, (long)size);
    return raw + HEADER_SPACE;
}

PLUGIN_EXPORT void my_free(void *ptr, ssize_t size, int device, aclrtStream stream) {
    Header *h = (Header *)((unsigned char *)ptr - HEADER_SPACE);
    if (h->magic != MAGIC || h->size != size || h->device != device || h->stream != stream)
        atomic_fetch_add(&mismatches, 1);
    h->magic = 0;
    atomic_fetch_sub(&live_blocks, 1);
    atomic_fetch_add(&frees, 1);
    atomic_fetch_sub(&live_bytes, (long)size);
    free(h);
}

PLUGIN_EXPORT void my_init(int device_count) {
    atomic_fetch_add(&init_calls, 1);
    atomic_store(&init_device_count, device_count);
}

PLUGIN_EXPORT void my_empty_cache(void) { atomic_fetch_add(&empty_cache_calls, 1); }

PLUGIN_EXPORT void my_set_memory_fraction(double f, int device) {
    (void)device;
    atomic_store(&fraction, f);
}

/* For tests: the plugin's own view, to compare with aclalloc's statistics.
 * out: live blocks, allocs, frees, size/device/stream mismatches on free,
 * init calls, init's device count, empty-cache calls, live bytes. */
PLUGIN_EXPORT void my_plugin_counters(long out[8]) {
    out[0] = atomic_load(&live_blocks);
    out[1] = atomic_load(&allocs);
    out[2] = atomic_load(&frees);
    out[3] = atomic_load(&mismatches);
    out[4] = atomic_load(&init_calls);
    out[5] = atomic_load(&init_device_count);
    out[6] = atomic_load(&empty_cache_calls);
    out[7] = atomic_load(&live_bytes);
}
