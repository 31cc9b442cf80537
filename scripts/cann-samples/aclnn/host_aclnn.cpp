// Host stand-ins for the operator library calls CANN's model samples make
// (aclnnAdd, aclnnMul, tensors and scalars): each operator is queued on its
// stream with aclallocLaunchKernel, so it runs in stream order and a
// capturing stream records it like any kernel; it computes on the device
// memory its tensors name, in float, int32 or int64. Executors stay valid
// until the process exits: a captured model launches them at every replay.
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "aclalloc.h"
#include "aclnn/aclnn_base.h"
#include "aclnnop/aclnn_add.h"
#include "aclnnop/aclnn_mul.h"

struct aclTensor {
    std::vector<int64_t> dims;
    aclDataType type;
    char* data;  // first element, offset applied
};

struct aclScalar {
    aclDataType type;
    double value;
};

struct aclOpExecutor {
    enum Kind { Add, Mul } kind;
    aclDataType type;
    const char* self;
    const char* other;
    char* out;
    int64_t count;
    double alpha;
};

namespace {
constexpr aclnnStatus kOk = 0;
constexpr aclnnStatus kBadParam = 161001;  // ACLNN_ERR_PARAM_NULLPTR
constexpr aclnnStatus kBadType = 161002;   // ACLNN_ERR_PARAM_INVALID

size_t ElementSize(aclDataType type)
{
    switch (type) {
        case ACL_FLOAT:
        case ACL_INT32:
            return 4;
        case ACL_INT64:
        case ACL_DOUBLE:
            return 8;
        default:
            return 0;
    }
}

int64_t Elements(const aclTensor& t)
{
    int64_t n = 1;
    for (int64_t d : t.dims) {
        n *= d;
    }
    return n;
}

double Load(const char* p, aclDataType type, int64_t i)
{
    switch (type) {
        case ACL_FLOAT: {
            float v;
            std::memcpy(&v, p + i * 4, 4);
            return v;
        }
        case ACL_INT32: {
            int32_t v;
            std::memcpy(&v, p + i * 4, 4);
            return v;
        }
        case ACL_INT64: {
            int64_t v;
            std::memcpy(&v, p + i * 8, 8);
            return static_cast<double>(v);
        }
        default: {
            double v;
            std::memcpy(&v, p + i * 8, 8);
            return v;
        }
    }
}

void Store(char* p, aclDataType type, int64_t i, double value)
{
    switch (type) {
        case ACL_FLOAT: {
            float v = static_cast<float>(value);
            std::memcpy(p + i * 4, &v, 4);
            break;
        }
        case ACL_INT32: {
            int32_t v = static_cast<int32_t>(value);
            std::memcpy(p + i * 4, &v, 4);
            break;
        }
        case ACL_INT64: {
            int64_t v = static_cast<int64_t>(value);
            std::memcpy(p + i * 8, &v, 8);
            break;
        }
        default:
            std::memcpy(p + i * 8, &value, 8);
    }
}

// Every executor made, freed when the process exits.
std::mutex g_lock;
std::vector<std::unique_ptr<aclOpExecutor>> g_executors;

aclOpExecutor* Keep(std::unique_ptr<aclOpExecutor> e)
{
    std::lock_guard<std::mutex> hold(g_lock);
    g_executors.push_back(std::move(e));
    return g_executors.back().get();
}

void RunOperator(void* /*workspace*/, size_t /*size*/, void* userData)
{
    const aclOpExecutor* e = static_cast<const aclOpExecutor*>(userData);
    for (int64_t i = 0; i < e->count; ++i) {
        double a = Load(e->self, e->type, i);
        double b = Load(e->other, e->type, i);
        double r = e->kind == aclOpExecutor::Add ? a + b * e->alpha : a * b;
        Store(e->out, e->type, i, e->type == ACL_FLOAT ? static_cast<float>(r) : r);
    }
}

aclnnStatus Prepare(aclOpExecutor::Kind kind, const aclTensor* self, const aclTensor* other, double alpha,
                    aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** executor)
{
    if (self == nullptr || other == nullptr || out == nullptr || workspaceSize == nullptr || executor == nullptr) {
        return kBadParam;
    }
    int64_t n = Elements(*out);
    if (ElementSize(out->type) == 0 || self->type != out->type || other->type != out->type ||
        Elements(*self) != n || Elements(*other) != n) {
        return kBadType;
    }
    std::unique_ptr<aclOpExecutor> e(new aclOpExecutor{kind, out->type, self->data, other->data, out->data, n, alpha});
    *workspaceSize = 0;
    *executor = Keep(std::move(e));
    return kOk;
}

aclnnStatus Launch(aclOpExecutor* executor, aclrtStream stream)
{
    if (executor == nullptr) {
        return kBadParam;
    }
    return aclallocLaunchKernel(stream, 0, RunOperator, executor);
}
}  // namespace

extern "C" {

aclTensor* aclCreateTensor(const int64_t* viewDims, uint64_t viewDimsNum, aclDataType dataType,
                           const int64_t* /*stride*/, int64_t offset, aclFormat /*format*/,
                           const int64_t* /*storageDims*/, uint64_t /*storageDimsNum*/, void* tensorData)
{
    size_t size = ElementSize(dataType);
    if ((viewDims == nullptr && viewDimsNum > 0) || tensorData == nullptr || size == 0) {
        return nullptr;
    }
    aclTensor* t = new aclTensor;
    t->dims.assign(viewDims, viewDims + viewDimsNum);
    t->type = dataType;
    t->data = static_cast<char*>(tensorData) + offset * static_cast<int64_t>(size);
    return t;
}

aclScalar* aclCreateScalar(void* value, aclDataType dataType)
{
    if (value == nullptr || ElementSize(dataType) == 0) {
        return nullptr;
    }
    return new aclScalar{dataType, Load(static_cast<const char*>(value), dataType, 0)};
}

aclnnStatus aclDestroyTensor(const aclTensor* tensor)
{
    delete tensor;
    return kOk;
}

aclnnStatus aclDestroyScalar(const aclScalar* scalar)
{
    delete scalar;
    return kOk;
}

aclnnStatus aclnnAddGetWorkspaceSize(const aclTensor* self, const aclTensor* other, const aclScalar* alpha,
                                     aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** executor)
{
    if (alpha == nullptr) {
        return kBadParam;
    }
    return Prepare(aclOpExecutor::Add, self, other, alpha->value, out, workspaceSize, executor);
}

aclnnStatus aclnnAdd(void* /*workspace*/, uint64_t /*workspaceSize*/, aclOpExecutor* executor, aclrtStream stream)
{
    return Launch(executor, stream);
}

aclnnStatus aclnnMulGetWorkspaceSize(const aclTensor* self, const aclTensor* other, aclTensor* out,
                                     uint64_t* workspaceSize, aclOpExecutor** executor)
{
    return Prepare(aclOpExecutor::Mul, self, other, 1.0, out, workspaceSize, executor);
}

aclnnStatus aclnnMul(void* /*workspace*/, uint64_t /*workspaceSize*/, aclOpExecutor* executor, aclrtStream stream)
{
    return Launch(executor, stream);
}

}  // extern "C"
