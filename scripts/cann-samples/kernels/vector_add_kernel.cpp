// Host stand-in of 0_quickstart/4_custom_kernel_launch's kernel
// (vector_add_kernel.cpp, declared by the sample's vector_add_kernel.h):
// dst[i] = srcA[i] + alpha * srcB[i] over elementCount floats, as the
// kernel's one block computes it. VectorAddDo queues it on the stream as a
// kernel (aclallocLaunchKernel) and returns what the launch returned, as
// the <<<>>> launch's value.
#include <cstddef>
#include <cstdint>

#include "acl/acl.h"
#include "aclalloc.h"
#include "vector_add_kernel.h"

namespace {
struct VectorAddArgs {
    const float* srcA;
    const float* srcB;
    float* dst;
    float alpha;
    uint32_t elementCount;
};

void VectorAdd(void*, size_t, void* userData)
{
    const VectorAddArgs* a = static_cast<const VectorAddArgs*>(userData);
    for (uint32_t i = 0; i < a->elementCount; ++i) {
        a->dst[i] = a->srcA[i] + a->alpha * a->srcB[i];
    }
    delete a;
}
} // namespace

int32_t VectorAddDo(uint32_t, void* stream, float* srcA, float* srcB, float* dst, float alpha, uint32_t elementCount)
{
    VectorAddArgs* args = new VectorAddArgs{srcA, srcB, dst, alpha, elementCount};
    const aclError ret = aclallocLaunchKernel(static_cast<aclrtStream>(stream), 0, VectorAdd, args);
    if (ret != ACL_SUCCESS) {
        delete args;
    }
    return static_cast<int32_t>(ret);
}
