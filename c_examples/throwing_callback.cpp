// What happens when a C++ allocator callback throws (docs/HARDENING.md,
// "Foreign unwinds and exceptions"): the exception never crosses aclalloc;
// the call is an allocation failure (NULL, an error code) whose message,
// from aclGetRecentErrMsg, names the callback and carries its what().
//
// Each scenario runs in a child (this program again, `--scenario N`, as each
// changes process-wide settings) whose stderr is read through a pipe; the
// parent checks that the child's call failed and returned, and that the
// message names the callback that threw, prints it, and exits 0 when every
// scenario did.
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "aclalloc.h"

namespace {

int object;

void *throwing_alloc(aclrtAllocator, size_t) { throw std::runtime_error("out of blocks"); }
void *plain_alloc(aclrtAllocator, size_t size) { return new char[size]; }
void plain_free(aclrtAllocator, aclrtAllocatorBlock block) { delete[] static_cast<char *>(block); }
void *throwing_advise(aclrtAllocator, size_t, aclrtAllocatorAddr) { throw std::runtime_error("no advice"); }
void *same_addr(aclrtAllocatorBlock block) { return block; }
void *throwing_addr(aclrtAllocatorBlock) { throw std::logic_error("unknown block"); }
void nothing(void *, size_t, void *) {}

aclrtAllocatorDesc descriptor(aclrtAllocatorAllocFunc alloc, aclrtAllocatorGetAddrFromBlockFunc addr) {
    aclrtAllocatorDesc desc = aclrtAllocatorCreateDesc();
    aclrtAllocatorSetObjToDesc(desc, &object);
    aclrtAllocatorSetAllocFuncToDesc(desc, alloc);
    aclrtAllocatorSetFreeFuncToDesc(desc, plain_free);
    aclrtAllocatorSetGetAddrFromBlockFuncToDesc(desc, addr);
    return desc;
}

aclrtStream setup() {
    aclrtStream stream = nullptr;
    if (aclInit(nullptr) != ACL_SUCCESS || aclrtSetDevice(0) != ACL_SUCCESS ||
        aclrtCreateStream(&stream) != ACL_SUCCESS) {
        std::fprintf(stderr, "setup failed: %s\n", aclGetRecentErrMsg());
        _exit(10);
    }
    return stream;
}

// A launch on a stream registered with an allocator whose alloc throws.
bool registered_alloc() {
    aclrtStream stream = setup();
    if (aclrtAllocatorRegister(stream, descriptor(throwing_alloc, same_addr)) != ACL_SUCCESS) _exit(11);
    return aclallocLaunchKernel(stream, 4096, nothing, nullptr) != ACL_SUCCESS;
}

// With tracking on, the user's getAddrFromBlock is called by the tracking layer.
bool tracked_get_addr() {
    aclrtStream stream = setup();
    if (aclallocTrackingSetEnabled(1) != ACL_SUCCESS) _exit(11);
    if (aclrtAllocatorRegister(stream, descriptor(plain_alloc, throwing_addr)) != ACL_SUCCESS) _exit(12);
    return aclallocLaunchKernel(stream, 4096, nothing, nullptr) != ACL_SUCCESS;
}

// With tracking on, a runtime calls the tracking layer's allocAdvise (as
// aclrtAllocatorGetByStream hands it out), which calls the user's.
bool tracked_alloc_advise() {
    aclrtStream stream = setup();
    if (aclallocTrackingSetEnabled(1) != ACL_SUCCESS) _exit(11);
    aclrtAllocatorDesc desc = descriptor(plain_alloc, same_addr);
    aclrtAllocatorSetAllocAdviseFuncToDesc(desc, throwing_advise);
    if (aclrtAllocatorRegister(stream, desc) != ACL_SUCCESS) _exit(12);
    aclrtAllocatorDesc found = nullptr;
    aclrtAllocator obj = nullptr;
    aclrtAllocatorAllocAdviseFunc advise = nullptr;
    if (aclrtAllocatorGetByStream(stream, &found, &obj, nullptr, nullptr, &advise, nullptr) != ACL_SUCCESS ||
        advise == nullptr)
        _exit(13);
    return advise(obj, 4096, nullptr) == nullptr;
}

// An allocator made the default one (aclallocSetDefaultAllocator) whose
// alloc throws, reached by a launch on a stream without a registration.
bool default_alloc() {
    aclrtStream stream = setup();
    if (aclallocSetDefaultAllocator(descriptor(throwing_alloc, same_addr)) != ACL_SUCCESS) _exit(11);
    return aclallocLaunchKernel(stream, 4096, nothing, nullptr) != ACL_SUCCESS;
}

// A pluggable allocator from a C++ shared object whose alloc throws.
bool plugin_alloc() {
    aclrtStream stream = setup();
    aclallocPluggableConfig config;
    std::memset(&config, 0, sizeof config);
    config.path = PLUGIN_PATH;
    config.allocSymbol = "throwing_plugin_alloc";
    config.freeSymbol = "throwing_plugin_free";
    aclallocPluggable plugin = nullptr;
    aclrtAllocatorDesc desc = nullptr;
    if (aclallocPluggableCreate(&config, &plugin, &desc) != ACL_SUCCESS) {
        std::fprintf(stderr, "aclallocPluggableCreate: %s\n", aclGetRecentErrMsg());
        _exit(11);
    }
    void *ptr = nullptr;
    return aclallocPluggableMalloc(plugin, &ptr, 4096, stream) == ACL_ERROR_BAD_ALLOC && ptr == nullptr;
}

struct Scenario {
    const char *name;
    // True when the call failed as an allocation failure.
    bool (*run)();
    // What the message must say: which callback threw, and its what().
    const char *names;
};

const Scenario scenarios[] = {
    {"registered alloc", registered_alloc,
     "The alloc callback (aclrtAllocatorAllocFunc) threw a C++ exception: out of blocks"},
    {"tracked getAddrFromBlock", tracked_get_addr,
     ", called by the tracking layer, threw a C++ exception: unknown block"},
    {"tracked allocAdvise", tracked_alloc_advise,
     "The allocAdvise callback (aclrtAllocatorAllocAdviseFunc) threw a C++ exception: no advice"},
    {"default allocator alloc", default_alloc,
     "The alloc callback (aclrtAllocatorAllocFunc) of the default allocator (set with "
     "aclallocSetDefaultAllocator) threw a C++ exception: out of blocks"},
    {"plugin alloc", plugin_alloc, "threw a C++ exception: std::bad_alloc"},
};

// Runs one scenario in a child; true when the child's call failed and
// returned, with a message naming the callback.
bool check(const char *self, int index) {
    const Scenario &s = scenarios[index];
    int fds[2];
    if (pipe(fds) != 0) return false;
    std::fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) return false;
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], 2);
        alarm(60);  // a hang fails the scenario instead of the whole run
        char number[16];
        std::snprintf(number, sizeof number, "%d", index);
        execl(self, self, "--scenario", number, static_cast<char *>(nullptr));
        std::fprintf(stderr, "could not exec %s\n", self);
        _exit(4);
    }
    close(fds[1]);
    std::string err;
    char buf[4096];
    ssize_t n;
    while ((n = read(fds[0], buf, sizeof buf)) > 0) err.append(buf, static_cast<size_t>(n));
    close(fds[0]);
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) return false;
    const bool failed_and_returned = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    std::string line;
    size_t at = err.find(s.names);
    if (at != std::string::npos) {
        size_t start = err.rfind('\n', at);
        start = start == std::string::npos ? 0 : start + 1;
        line = err.substr(start, err.find('\n', at) - start);
    }
    if (failed_and_returned && !line.empty()) {
        std::printf("%s: failed with\n  %s\n", s.name, line.c_str());
        return true;
    }
    std::printf("%s: FAILED (status %#x, %s)\n  stderr of the child:\n%s\n", s.name, static_cast<unsigned>(status),
                failed_and_returned ? "no message naming the callback" : "not an allocation failure", err.c_str());
    return false;
}

// The child: runs one scenario, whose call must fail and return.
int scenario(int index) {
    bool failed = false;
    try {
        failed = scenarios[index].run();
    } catch (...) {
        std::fprintf(stderr, "the exception escaped the library\n");
        return 3;
    }
    const char *message = aclGetRecentErrMsg();
    std::fprintf(stderr, "%s\n", message != nullptr ? message : "(no message)");
    return failed ? 0 : 2;
}

}  // namespace

int main(int argc, char **argv) {
    const int count = static_cast<int>(sizeof scenarios / sizeof scenarios[0]);
    if (argc == 3 && std::strcmp(argv[1], "--scenario") == 0) {
        const int index = std::atoi(argv[2]);
        return index >= 0 && index < count ? scenario(index) : 5;
    }
    int failed = 0;
    for (int i = 0; i < count; i++) failed += check(argv[0], i) ? 0 : 1;
    std::printf("throwing callbacks: %d failed\n", failed);
    return failed == 0 ? 0 : 1;
}
