/*
 * A kernel binary for the host runtime (loaded by kernel_binary.c and by
 * tests/kernel_binary.rs with aclrtBinaryLoadFromFile): a shared object that
 * exports, for each kernel NAME, its host stand-in aclallocKernel_NAME
 * (aclallocKernelStandIn in aclalloc.h), called once per block with the
 * argument list as CANN lays it out: each appended value at the next
 * 8-byte-aligned offset, each placeholder a pointer to its data.
 */
#define _POSIX_C_SOURCE 200809L
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "aclalloc.h"

/* Reads the argument at `offset` of the list (a value of `size` bytes). */
static void arg(const void *args, size_t offset, void *out, size_t size)
{
    memcpy(out, (const char *)args + offset, size);
}

/*
 * scale(const float *x, float *y, uint32_t n, const float *factor):
 * y[i] = x[i] * *factor for i < n, split evenly over the blocks (the last
 * block takes the rest). x and y are appended pointers, n an appended
 * 4-byte value, factor a placeholder.
 */
void aclallocKernel_scale(void *args, size_t argsSize, const aclallocKernelBlock *block)
{
    const float *x;
    float *y;
    uint32_t n;
    const float *factor;
    if (argsSize < 32) {
        return;
    }
    arg(args, 0, &x, sizeof x);
    arg(args, 8, &y, sizeof y);
    arg(args, 16, &n, sizeof n);
    arg(args, 24, &factor, sizeof factor);
    uint32_t share = n / block->numBlocks;
    uint32_t first = share * block->blockIdx;
    uint32_t last = block->blockIdx + 1 == block->numBlocks ? n : first + share;
    for (uint32_t i = first; i < last; ++i) {
        y[i] = x[i] * *factor;
    }
}

/*
 * blocks(uint32_t *seen): seen[blockIdx] = numBlocks * 1000 + blockIdx + 1,
 * so a test sees which blocks ran and what they were told.
 */
void aclallocKernel_blocks(void *args, size_t argsSize, const aclallocKernelBlock *block)
{
    uint32_t *seen;
    if (argsSize < 8) {
        return;
    }
    arg(args, 0, &seen, sizeof seen);
    seen[block->blockIdx] = block->numBlocks * 1000 + block->blockIdx + 1;
}

/*
 * wait_for(const atomic_int *flag, int *done): spins until *flag is set,
 * then sets *done. Holds its stream, so that a test can unload the binary
 * while launches are queued behind it.
 */
void aclallocKernel_wait_for(void *args, size_t argsSize, const aclallocKernelBlock *block)
{
    const atomic_int *flag;
    int *done;
    (void)block;
    if (argsSize < 16) {
        return;
    }
    arg(args, 0, &flag, sizeof flag);
    arg(args, 8, &done, sizeof done);
    while (atomic_load(flag) == 0) {
        sched_yield();
    }
    *done += 1;
}
