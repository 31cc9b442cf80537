// Host stand-ins for the AI Core kernels of CANN's runtime samples
// (example/kernel_func/kernel_ops.h): the same names and arguments, each
// enqueued on the stream with aclrtLaunchHostFunc so it runs in stream
// order, with the effect of the kernel on device memory. One block per
// blockDim, as block_idx indexes the kernels' arrays.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

#include "acl/acl.h"
#include "aclalloc.h"
#include "kernel_func/kernel_ops.h"

namespace {
// AscendC::printf: what a kernel prints is kept in a device buffer and
// written out when the runtime tears the device down, after everything the
// host printed (the samples' documented outputs show it there). Kept here,
// written at exit, after the program's own output.
class DevicePrintBuffer {
public:
    ~DevicePrintBuffer()
    {
        std::lock_guard<std::mutex> lock(mutex_);
        std::fputs(text_.c_str(), stdout);
        std::fflush(stdout);
    }
    void Append(const char* line)
    {
        std::lock_guard<std::mutex> lock(mutex_);
        text_ += line;
    }

private:
    std::mutex mutex_;
    std::string text_;
};
DevicePrintBuffer g_devicePrints;

void DevicePrint(const char* format, int value)
{
    char line[128];
    std::snprintf(line, sizeof line, format, value);
    g_devicePrints.Append(line);
}

struct Args {
    uint32_t blockDim;
    uint32_t* x;
    int* devPtr;
    int value;
};

template <void (*Body)(const Args&)>
void Run(void* p)
{
    Args* a = static_cast<Args*>(p);
    Body(*a);
    delete a;
}

template <void (*Body)(const Args&)>
void Launch(void* stream, Args a)
{
    Args* heap = new Args(a);
    if (aclrtLaunchHostFunc(static_cast<aclrtStream>(stream), Run<Body>, heap) != ACL_SUCCESS) {
        delete heap;
    }
}

void Easy(const Args& a)
{
    for (uint32_t i = 0; i < a.blockDim; ++i) {
        a.x[i] += 1;
    }
}

void Short(const Args& a)
{
    for (uint32_t i = 0; i < a.blockDim; ++i) {
        a.x[i] *= 2;
    }
}

// The kernel runs for seconds on a device (250 million dependent steps per
// block), longer than the samples' 1000 ms timeouts; then adds 1. Stopped
// or aborted (aclrtStreamStop, aclrtStreamAbort), it ends at once without
// its effect, as the device ends a kernel it stops.
void Long(const Args& a)
{
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
    while (std::chrono::steady_clock::now() < end) {
        if (aclallocCurrentTaskCancelled()) {
            return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    for (uint32_t i = 0; i < a.blockDim; ++i) {
        a.x[i] += 1;
    }
}

void Write(const Args& a)
{
    for (uint32_t i = 0; i < a.blockDim; ++i) {
        a.devPtr[i] = a.value;
        DevicePrint("Source data: %d\n", a.value);
    }
}

void Read(const Args& a)
{
    for (uint32_t i = 0; i < a.blockDim; ++i) {
        DevicePrint("Destination data: %d\n", a.devPtr[i]);
    }
}

void Print(const Args& a)
{
    for (uint32_t i = 0; i < a.blockDim; ++i) {
        g_devicePrints.Append("Hello World\n");
    }
}

// The kernel traps: the task fails as a vector core exception does on the
// device (ACL_ERROR_RT_VECTOR_CORE_EXCEPTION in CANN's rt_error_codes.h).
constexpr aclError kVectorCoreException = 507035;
void Trap(void*, size_t, void*) { aclallocFailCurrentTask(kVectorCoreException); }
} // namespace

void EasyOP(uint32_t blockDim, void* stream, uint32_t* x) { Launch<Easy>(stream, {blockDim, x, nullptr, 0}); }
void ShortOP(uint32_t blockDim, void* stream, uint32_t* x) { Launch<Short>(stream, {blockDim, x, nullptr, 0}); }
void LongOP(uint32_t blockDim, void* stream, uint32_t* x) { Launch<Long>(stream, {blockDim, x, nullptr, 0}); }
void WriteDo(uint32_t blockDim, void* stream, int* devPtr, int value)
{
    Launch<Write>(stream, {blockDim, nullptr, devPtr, value});
}
void ReadDo(uint32_t blockDim, void* stream, int* devPtr) { Launch<Read>(stream, {blockDim, nullptr, devPtr, 0}); }
void PrintDo(uint32_t blockDim, void* stream) { Launch<Print>(stream, {blockDim, nullptr, nullptr, 0}); }
void ErrorOP(uint32_t, void* stream) { aclallocLaunchKernel(static_cast<aclrtStream>(stream), 0, Trap, nullptr); }

// kernel_func/kernel_add.h: dst[i] = srcA[i] + srcB[i] over totalSize floats.
namespace {
struct AddArgs {
    float* srcA;
    float* srcB;
    float* dst;
    uint32_t totalSize;
};

void RunAdd(void* p)
{
    AddArgs* a = static_cast<AddArgs*>(p);
    for (uint32_t i = 0; i < a->totalSize; ++i) {
        a->dst[i] = a->srcA[i] + a->srcB[i];
    }
    delete a;
}
} // namespace

void AddDo(uint32_t, void* stream, float* srcA, float* srcB, float* dst, uint32_t totalSize)
{
    AddArgs* heap = new AddArgs{srcA, srcB, dst, totalSize};
    if (aclrtLaunchHostFunc(static_cast<aclrtStream>(stream), RunAdd, heap) != ACL_SUCCESS) {
        delete heap;
    }
}
