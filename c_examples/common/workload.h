/*
 * The inference workload the examples share: a realistic mix of workspace
 * sizes, and what a kernel checks on the workspace it is given.
 *
 * Every kernel claims its workspace's byte range while it runs; a range that
 * meets another running kernel's counts in `overlaps`: two kernels running at
 * once were given the same memory. Kernels of every stream share the table,
 * so two kernels of one stream running at once would show up too.
 */
#ifndef ACLALLOC_EXAMPLES_WORKLOAD_H
#define ACLALLOC_EXAMPLES_WORKLOAD_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* The first state of stream `index`'s sequence of workspace sizes. */
static inline uint64_t workload_seed(int index) { return 0x9E3779B97F4A7C15ull * (uint64_t)(index + 1); }

/* Workspace sizes: 20% none, 60% a few KiB, 20% 1-4 MiB. */
static inline size_t workload_next_size(uint64_t *state) {
    uint64_t x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *state = x;
    unsigned pick = (unsigned)(x % 10);
    if (pick < 2) return 0;
    if (pick < 8) return (size_t)(1 + (x >> 8) % 16) * 1024 - (size_t)((x >> 20) % 100);
    return (size_t)(1 + (x >> 8) % 4) << 20;
}

#define RUNNING_SLOTS 64
static pthread_mutex_t running_lock = PTHREAD_MUTEX_INITIALIZER;
static struct { uintptr_t lo, hi; } running[RUNNING_SLOTS];
static atomic_long overlaps;

/* Marks [ws, ws + size) as used by a running kernel and counts every running
 * kernel it meets. Returns the slot for workspace_release, or -1 when more
 * kernels run than the table holds (that range goes unchecked). */
static inline int workspace_claim(const void *ws, size_t size) {
    uintptr_t lo = (uintptr_t)ws, hi = lo + size;
    int mine = -1;
    pthread_mutex_lock(&running_lock);
    for (int i = 0; i < RUNNING_SLOTS; i++) {
        if (running[i].hi == 0) {
            if (mine < 0) mine = i;
        } else if (lo < running[i].hi && running[i].lo < hi) {
            overlaps++;
        }
    }
    if (mine >= 0) {
        running[mine].lo = lo;
        running[mine].hi = hi;
    }
    pthread_mutex_unlock(&running_lock);
    return mine;
}

static inline void workspace_release(int slot) {
    if (slot < 0) return;
    pthread_mutex_lock(&running_lock);
    running[slot].lo = running[slot].hi = 0;
    pthread_mutex_unlock(&running_lock);
}

/* Writes `fill` every `stride` bytes and at the last byte: touches the whole
 * requested size (size > 0). */
static inline void workspace_fill(unsigned char *ws, size_t size, unsigned char fill, size_t stride) {
    for (size_t off = 0; off < size; off += stride) ws[off] = fill;
    ws[size - 1] = fill;
}

/* workspace_fill, then reads the same bytes back: how many are not `fill`. */
static inline long workspace_touch(unsigned char *ws, size_t size, unsigned char fill, size_t stride) {
    workspace_fill(ws, size, fill, stride);
    long bad = 0;
    for (size_t off = 0; off < size; off += stride)
        if (ws[off] != fill) bad++;
    if (ws[size - 1] != fill) bad++;
    return bad;
}

#endif
