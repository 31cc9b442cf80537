// Host stand-in of the samples' add_custom kernel (example/kernel_func/
// add_custom.cpp) for a kernel binary loaded with aclrtBinaryLoadFromFile.
// The kernel adds two fp16 vectors of 8 * 2048 elements, z = x + y, split
// evenly over 8 blocks: block b computes elements [b * 2048, (b + 1) * 2048).
// Its arguments are three device pointers: x, y, z.
#include <cstddef>
#include <cstdint>

#include "aclalloc.h"
#include "fp16_add.h"

namespace {
constexpr size_t kTotalLength = 8 * 2048;
constexpr size_t kCores = 8;
constexpr size_t kBlockLength = kTotalLength / kCores;
} // namespace

extern "C" void aclallocKernel_add_custom(void* args, size_t argsSize, const aclallocKernelBlock* block)
{
    if (argsSize < 3 * sizeof(void*)) {
        return;
    }
    void* const* pointers = static_cast<void* const*>(args);
    const size_t first = kBlockLength * block->blockIdx;
    aclalloc_samples::AddHalves(
        static_cast<const uint16_t*>(pointers[0]) + first, static_cast<const uint16_t*>(pointers[1]) + first,
        static_cast<uint16_t*>(pointers[2]) + first, kBlockLength);
}
