// Drives a pluggable allocator whose functions throw (throwing_plugin.cpp,
// loaded from argv[1]) through the C functions ("c") or through its
// descriptor's callbacks as a launch calls them ("launch"), a few pairs in
// a row: a thread's first call and the hot path after it. Prints each
// pair's two codes and the message left, then the live block count.
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>

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
            int first, second = -1;
            if (launch) {
                first = aclallocLaunchKernel(stream, 512, nothing, nullptr);
                second = aclrtSynchronizeStream(stream);
            } else {
                void *block = nullptr;
                first = aclallocPluggableMalloc(plugin, &block, 512, nullptr);
                if (block != nullptr) second = aclallocPluggableFree(plugin, block);
            }
            const char *m = aclGetRecentErrMsg();
            std::string message = m != nullptr ? m : "";
            for (char &c : message) c = c == '\n' ? '|' : c;
            std::printf("pair %d: %d %d %s\n", pair, first, second, message.c_str());
        }
    } catch (const std::exception &e) {
        // Reaching here would mean the exception crossed the library.
        std::printf("caught after the library: %s\n", e.what());
        return 3;
    }
    if (launch && aclrtDestroyStream(stream) != ACL_SUCCESS) return 15;
    aclallocAllocatorStats stats;
    if (aclallocPluggableGetStats(plugin, &stats) != ACL_SUCCESS) return 16;
    std::printf("live %llu\n", (unsigned long long)stats.activeCount);
    return 0;
}
