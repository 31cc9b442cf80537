/*
 * A pluggable allocator in torch_npu's shape, built as a shared object:
 *
 *   void *my_malloc(ssize_t size, int device, aclrtStream stream);
 *   void  my_free(void *ptr, ssize_t size, int device, aclrtStream stream);
 *   void  my_init(int device_count);
 *   void  my_empty_cache(void);
 *   void  my_set_memory_fraction(double fraction, int device);
 *
 * It knows nothing of aclalloc (a plugin needs no header of ours).
 *
 * Like the caching allocators torch_npu plugins usually are, it is stream
 * ordered: a freed block is cached and handed out again only for the same
 * stream and size class, so a block freed right after its launch was
 * enqueued (CANN's executor contract) is reused only by later work on that
 * stream. my_empty_cache returns the cached blocks to the system; call it
 * only when the streams are idle.
 *
 * Each block carries a header with the size, device and stream it was
 * allocated for, so my_free can check that it is given them back. Requests
 * above the limit (1 GiB, or the memory fraction of it) return NULL.
 */
#define _POSIX_C_SOURCE 200112L
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/types.h>

#define PLUGIN_EXPORT __attribute__((visibility("default")))

typedef void *aclrtStream;

typedef struct Header {
    ssize_t size;      /* as requested by the current user */
    size_t capacity;   /* size class: the bytes after the header */
    int device;
    aclrtStream stream;
    uint64_t magic;
    struct Header *next; /* in the cache */
} Header;

#define MAGIC_LIVE 0x706c7567696e21ULL
#define MAGIC_CACHED 0x636163686564ULL
#define HEADER_SPACE 64 /* keeps the user's pointer 64-byte aligned */
#define LIMIT ((ssize_t)1 << 30)

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static Header *cache; /* freed blocks, any stream */

static atomic_long live_blocks, allocs, frees, mismatches, init_calls, empty_cache_calls;
static atomic_long live_bytes, init_device_count, cached_blocks, system_allocs;
static _Atomic double fraction = 1.0;

static size_t size_class(ssize_t size) {
    size_t c = 512;
    while (c < (size_t)size) c <<= 1;
    return c;
}

/* A cached block of this class for this stream and device, or NULL. */
static Header *take_cached(size_t capacity, int device, aclrtStream stream) {
    pthread_mutex_lock(&cache_lock);
    Header **link = &cache;
    Header *found = NULL;
    for (Header *h = cache; h != NULL; link = &h->next, h = h->next) {
        if (h->capacity == capacity && h->stream == stream && h->device == device) {
            *link = h->next;
            found = h;
            break;
        }
    }
    pthread_mutex_unlock(&cache_lock);
    if (found != NULL) atomic_fetch_sub(&cached_blocks, 1);
    return found;
}

PLUGIN_EXPORT void *my_malloc(ssize_t size, int device, aclrtStream stream) {
    if (size < 0 || (double)size > (double)LIMIT * atomic_load(&fraction)) return NULL;
    size_t capacity = size_class(size);
    Header *h = take_cached(capacity, device, stream);
    if (h == NULL) {
        void *raw = NULL;
        if (posix_memalign(&raw, HEADER_SPACE, HEADER_SPACE + capacity) != 0) return NULL;
        atomic_fetch_add(&system_allocs, 1);
        h = (Header *)raw;
        h->capacity = capacity;
        h->device = device;
        h->stream = stream;
    }
    h->size = size;
    h->magic = MAGIC_LIVE;
    h->next = NULL;
    atomic_fetch_add(&live_blocks, 1);
    atomic_fetch_add(&allocs, 1);
    atomic_fetch_add(&live_bytes, (long)size);
    return (unsigned char *)h + HEADER_SPACE;
}

PLUGIN_EXPORT void my_free(void *ptr, ssize_t size, int device, aclrtStream stream) {
    Header *h = (Header *)((unsigned char *)ptr - HEADER_SPACE);
    if (h->magic != MAGIC_LIVE || h->size != size || h->device != device || h->stream != stream)
        atomic_fetch_add(&mismatches, 1);
    h->magic = MAGIC_CACHED;
    atomic_fetch_sub(&live_blocks, 1);
    atomic_fetch_add(&frees, 1);
    atomic_fetch_sub(&live_bytes, (long)size);
    pthread_mutex_lock(&cache_lock);
    h->next = cache;
    cache = h;
    pthread_mutex_unlock(&cache_lock);
    atomic_fetch_add(&cached_blocks, 1);
}

PLUGIN_EXPORT void my_init(int device_count) {
    atomic_fetch_add(&init_calls, 1);
    atomic_store(&init_device_count, device_count);
}

PLUGIN_EXPORT void my_empty_cache(void) {
    atomic_fetch_add(&empty_cache_calls, 1);
    pthread_mutex_lock(&cache_lock);
    Header *h = cache;
    cache = NULL;
    pthread_mutex_unlock(&cache_lock);
    while (h != NULL) {
        Header *next = h->next;
        free(h);
        atomic_fetch_sub(&cached_blocks, 1);
        h = next;
    }
}

/* aclallocPluggableDestroy unloads this object (dlclose): the cached blocks
 * must go back to the system then, or the list that holds them is unmapped
 * and they leak (LeakSanitizer reported exactly that in scripts/sanitize.sh). */
__attribute__((destructor)) static void release_cache_at_unload(void) {
    Header *h = cache;
    cache = NULL;
    while (h != NULL) {
        Header *next = h->next;
        free(h);
        h = next;
    }
}

PLUGIN_EXPORT void my_set_memory_fraction(double f, int device) {
    (void)device;
    atomic_store(&fraction, f);
}

/* For tests: the plugin's own view, to compare with aclalloc's statistics.
 * out: [0] live blocks, [1] allocs, [2] frees, [3] frees whose size, device
 * or stream differed from the alloc's, [4] init calls, [5] init's device
 * count, [6] empty-cache calls, [7] live bytes, [8] cached blocks,
 * [9] blocks taken from the system. */
#define PLUGIN_COUNTERS 10
PLUGIN_EXPORT void my_plugin_counters(long out[PLUGIN_COUNTERS]) {
    out[0] = atomic_load(&live_blocks);
    out[1] = atomic_load(&allocs);
    out[2] = atomic_load(&frees);
    out[3] = atomic_load(&mismatches);
    out[4] = atomic_load(&init_calls);
    out[5] = atomic_load(&init_device_count);
    out[6] = atomic_load(&empty_cache_calls);
    out[7] = atomic_load(&live_bytes);
    out[8] = atomic_load(&cached_blocks);
    out[9] = atomic_load(&system_allocs);
}
