// Drives a pluggable allocator whose functions throw (throwing_plugin.cpp,
// loaded from argv[1]) through the C functions ("c") or through its
// descriptor's callbacks as a launch calls them ("launch"), a few pairs in
// a row: a thread's first call and the hot path after it. Prints each step
// before it, so the test sees how far the program got.
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "aclalloc.h"

static void nothing(void *, size_t, void *) {}

int main(int argc, char **argv) {
    if (argc != 3) return 10;
    aclallocPluggableConfig config;
    std::memset(&config, 0, sizeof config);
    config.path = argv[1];
    config.allocSymbol = "throwing_malloc";
    config.freeSymbol = "throwing_free";
    aclallocPluggable plugin = nullptr;
    aclrtAllocatorDesc desc = nullptr;
    if (aclallocPluggableCreate(&config, &plugin, &desc) != ACL_SUCCESS) return 11;
    aclrtStream stream = nullptr;
    const bool launch = std::strcmp(argv[2], "launch") == 0;
    if (launch) {
        if (aclInit(nullptr) != ACL_SUCCESS || aclrtSetDevice(0) != ACL_SUCCESS) return 12;
        if (aclrtCreateStream(&stream) != ACL_SUCCESS) return 13;
        if (aclrtAllocatorRegister(stream, desc) != ACL_SUCCESS) return 14;
    }
    try {
        for (int pair = 1; pair <= 4; pair++) {
            std::printf("pair %d\n", pair);
            std::fflush(stdout);
            if (launch) {
                if (aclallocLaunchKernel(stream, 512, nothing, nullptr) != ACL_SUCCESS) return 15;
                if (aclrtSynchronizeStream(stream) != ACL_SUCCESS) return 16;
            } else {
                void *block = nullptr;
                if (aclallocPluggableMalloc(plugin, &block, 512, nullptr) != ACL_SUCCESS) return 17;
                if (aclallocPluggableFree(plugin, block) != ACL_SUCCESS) return 18;
            }
        }
    } catch (const std::exception &e) {
        // Reaching here would mean the exception crossed the library.
        std::printf("caught after the library: %s\n", e.what());
        return 3;
    }
    std::printf("every pair returned\n");
    return 0;
}
