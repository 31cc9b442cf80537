// Host stand-in of the samples' add_custom kernel whose sizes come as
// arguments (example/kernel_func/add_custom_tiling.cpp), for a kernel binary
// loaded with aclrtBinaryLoadFromFile. Its arguments are x, y, z (device
// pointers to fp16 vectors) and two pointers to int32 values, the total
// length and the number of tiles (placeholders in the launch_kernel sample).
// The kernel adds z = x + y over the total length split evenly over 8
// blocks: block b starts at element b * (len / 8) and computes its share
// in tiles of len / 8 / tiles / 2 elements, two per tile (double
// buffering), so what does not divide evenly is left as it was; a tile
// count of 0 computes nothing.
#include <cstddef>
#include <cstdint>

#include "aclalloc.h"
#include "fp16_add.h"

namespace {
constexpr uint32_t kCores = 8;
} // namespace

extern "C" void aclallocKernel_add_custom(void* args, size_t argsSize, const aclallocKernelBlock* block)
{
    if (argsSize < 5 * sizeof(void*)) {
        return;
    }
    void* const* pointers = static_cast<void* const*>(args);
    const int32_t* totalLength = static_cast<const int32_t*>(pointers[3]);
    const int32_t* tileNum = static_cast<const int32_t*>(pointers[4]);
    if (totalLength == nullptr || tileNum == nullptr || *tileNum == 0 || *totalLength <= 0) {
        return;
    }
    const uint32_t tiles = static_cast<uint32_t>(*tileNum);
    const size_t blockLength = static_cast<uint32_t>(*totalLength) / kCores;
    const size_t tileLength = blockLength / tiles / 2;
    const size_t first = blockLength * block->blockIdx;
    aclalloc_samples::AddHalves(
        static_cast<const uint16_t*>(pointers[0]) + first, static_cast<const uint16_t*>(pointers[1]) + first,
        static_cast<uint16_t*>(pointers[2]) + first, tiles * 2 * tileLength);
}
