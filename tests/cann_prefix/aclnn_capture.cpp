// Built against scripts/cann-prefix.sh's install as CANN's model samples
// are: an operator of the library's stand-ins (libopapi.so) captured on a
// stream and replayed, computing on device memory.
#include <cstdio>
#include <vector>

#include "acl/acl.h"
#include "aclnnop/aclnn_add.h"

#define CHECK(call)                                                 \
    do {                                                            \
        int rc_ = (call);                                           \
        if (rc_ != 0) {                                             \
            std::fprintf(stderr, "%s: %d\n", #call, rc_);           \
            return 1;                                               \
        }                                                           \
    } while (0)

int main()
{
    const std::vector<int64_t> shape = {2, 2};
    const std::vector<int64_t> strides = {2, 1};
    std::vector<float> a = {1, 2, 3, 4}, b = {10, 20, 30, 40}, out(4, 0);
    const size_t size = a.size() * sizeof(float);
    void *aDev = nullptr, *bDev = nullptr, *outDev = nullptr;
    aclrtStream stream = nullptr;
    aclmdlRI model = nullptr;
    CHECK(aclInit(nullptr));
    CHECK(aclrtSetDevice(0));
    CHECK(aclrtCreateStream(&stream));
    CHECK(aclrtMalloc(&aDev, size, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&bDev, size, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&outDev, size, ACL_MEM_MALLOC_HUGE_FIRST));
    aclTensor* ta = aclCreateTensor(shape.data(), 2, ACL_FLOAT, strides.data(), 0, ACL_FORMAT_ND, shape.data(), 2, aDev);
    aclTensor* tb = aclCreateTensor(shape.data(), 2, ACL_FLOAT, strides.data(), 0, ACL_FORMAT_ND, shape.data(), 2, bDev);
    aclTensor* to = aclCreateTensor(shape.data(), 2, ACL_FLOAT, strides.data(), 0, ACL_FORMAT_ND, shape.data(), 2, outDev);
    float half = 0.5f;
    aclScalar* alpha = aclCreateScalar(&half, ACL_FLOAT);
    uint64_t workspace = 1;
    aclOpExecutor* executor = nullptr;
    CHECK(aclnnAddGetWorkspaceSize(ta, tb, alpha, to, &workspace, &executor));
    CHECK(aclrtMemcpy(bDev, size, b.data(), size, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK(aclmdlRICaptureBegin(stream, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
    CHECK(aclrtMemcpyAsync(aDev, size, a.data(), size, ACL_MEMCPY_HOST_TO_DEVICE, stream));
    CHECK(aclnnAdd(nullptr, workspace, executor, stream));
    CHECK(aclmdlRICaptureEnd(stream, &model));
    for (int round = 0; round < 2; round++) {
        a[0] = 100.0f * (round + 1);  // read by the captured copy at each replay
        CHECK(aclmdlRIExecuteAsync(model, stream));
        CHECK(aclrtSynchronizeStream(stream));
        CHECK(aclrtMemcpy(out.data(), size, outDev, size, ACL_MEMCPY_DEVICE_TO_HOST));
        std::printf("%.1f %.1f %.1f %.1f\n", out[0], out[1], out[2], out[3]);
    }
    CHECK(aclmdlRIDestroy(model));
    CHECK(aclDestroyTensor(ta));
    CHECK(aclDestroyTensor(tb));
    CHECK(aclDestroyTensor(to));
    CHECK(aclDestroyScalar(alpha));
    CHECK(aclrtFree(aDev));
    CHECK(aclrtFree(bDev));
    CHECK(aclrtFree(outDev));
    CHECK(aclrtDestroyStream(stream));
    CHECK(aclFinalize());
    std::printf("aclnn_capture: ok\n");
    return 0;
}
