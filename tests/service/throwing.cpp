// A C++ allocator callback that throws through a launch, once: the launch
// fails with the exception's text in its message (tests/service.rs), and the
// library, its locks and (with tracking on) the allocator's record are left
// as after a NULL: the next launch on the same stream succeeds.
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "aclalloc.h"

static int object;
static int calls;
static void *throwing_once(aclrtAllocator, size_t size) {
    if (calls++ == 0) throw std::runtime_error("out of blocks");
    return std::malloc(size);
}
static void plain_free(aclrtAllocator, aclrtAllocatorBlock block) { std::free(block); }
static void *same_addr(aclrtAllocatorBlock block) { return block; }
static void nothing(void *, size_t, void *) {}

int main() {
    if (aclInit(nullptr) != ACL_SUCCESS || aclrtSetDevice(0) != ACL_SUCCESS) return 1;
    aclrtStream stream = nullptr;
    if (aclrtCreateStream(&stream) != ACL_SUCCESS) return 1;
    aclrtAllocatorDesc desc = aclrtAllocatorCreateDesc();
    aclrtAllocatorSetObjToDesc(desc, &object);
    aclrtAllocatorSetAllocFuncToDesc(desc, throwing_once);
    aclrtAllocatorSetFreeFuncToDesc(desc, plain_free);
    aclrtAllocatorSetGetAddrFromBlockFuncToDesc(desc, same_addr);
    if (aclrtAllocatorRegister(stream, desc) != ACL_SUCCESS) return 1;
    try {
        int first = aclallocLaunchKernel(stream, 4096, nothing, nullptr);
        const char *m = aclGetRecentErrMsg();
        std::string message = m != nullptr ? m : "";
        for (char &c : message) c = c == '\n' ? '|' : c;
        std::printf("first launch %d: %s\n", first, message.c_str());
        int second = aclallocLaunchKernel(stream, 4096, nothing, nullptr);
        std::printf("second launch %d\n", second);
        std::printf("synchronize %d\n", aclrtSynchronizeStream(stream));
    } catch (const std::exception &e) {
        // Reaching here would mean the exception crossed the library.
        std::printf("caught after the library: %s\n", e.what());
        return 3;
    }
    return 0;
}
