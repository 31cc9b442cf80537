// A C++ allocator callback that throws through a launch (callbacks must not
// throw: docs/HARDENING.md). The process must end at once with SIGABRT and
// a message naming the callback (tests/service.rs), never carry on with the
// library's state half-updated (a lock held, the next launch deadlocked).
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "aclalloc.h"

static int object;
static void *throwing_alloc(aclrtAllocator, size_t) { throw std::runtime_error("out of blocks"); }
static void plain_free(aclrtAllocator, aclrtAllocatorBlock) {}
static void *same_addr(aclrtAllocatorBlock block) { return block; }
static void nothing(void *, size_t, void *) {}

int main() {
    if (aclInit(nullptr) != ACL_SUCCESS || aclrtSetDevice(0) != ACL_SUCCESS) return 1;
    aclrtStream stream = nullptr;
    if (aclrtCreateStream(&stream) != ACL_SUCCESS) return 1;
    aclrtAllocatorDesc desc = aclrtAllocatorCreateDesc();
    aclrtAllocatorSetObjToDesc(desc, &object);
    aclrtAllocatorSetAllocFuncToDesc(desc, throwing_alloc);
    aclrtAllocatorSetFreeFuncToDesc(desc, plain_free);
    aclrtAllocatorSetGetAddrFromBlockFuncToDesc(desc, same_addr);
    if (aclrtAllocatorRegister(stream, desc) != ACL_SUCCESS) return 1;
    std::printf("stream %p\ndescriptor %p\n", stream, desc);
    std::printf("launching\n");
    std::fflush(stdout);
    try {
        aclallocLaunchKernel(stream, 4096, nothing, nullptr);
    } catch (const std::exception &e) {
        // Reaching here would mean the exception crossed the library.
        std::printf("caught after the library: %s\n", e.what());
        return 3;
    }
    std::printf("the launch returned\n");
    return 2;
}
