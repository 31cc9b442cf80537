// What happens when a C++ allocator callback throws (docs/HARDENING.md,
// "Callbacks"): callbacks must return normally, and aclalloc cannot carry on
// after one that throws (its locks and bookkeeping for the allocator would be
// left half-updated), so the process ends at once with SIGABRT and one line
// on stderr that names the callback. Catch exceptions inside your callbacks
// (include/aclalloc/ge_allocator.h does this for GE-style C++ allocators).
//
// Each scenario runs in a child (this program again, `--scenario N`) whose
// stderr is read through a pipe; the parent checks that the child was aborted
// and that the line names the callback that threw, prints the line, and exits
// 0 when every scenario did. The child is exec'd rather than only forked so
// that a memory checker wrapping the parent (valgrind, scripts/sanitize.sh)
// does not follow it: a process aborted mid-exception leaks by design.
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
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
void registered_alloc() {
    aclrtStream stream = setup();
    if (aclrtAllocatorRegister(stream, descriptor(throwing_alloc, same_addr)) != ACL_SUCCESS) _exit(11);
    aclallocLaunchKernel(stream, 4096, nothing, nullptr);
}

// With tracking on, the user's getAddrFromBlock is called by the tracking layer.
void tracked_get_addr() {
    aclrtStream stream = setup();
    if (aclallocTrackingSetEnabled(1) != ACL_SUCCESS) _exit(11);
    if (aclrtAllocatorRegister(stream, descriptor(plain_alloc, throwing_addr)) != ACL_SUCCESS) _exit(12);
    aclallocLaunchKernel(stream, 4096, nothing, nullptr);
}

// With tracking on, a runtime calls the tracking layer's allocAdvise (as
// aclrtAllocatorGetByStream hands it out), which calls the user's.
void tracked_alloc_advise() {
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
    advise(obj, 4096, nullptr);
}

// An allocator made the default one (aclallocSetDefaultAllocator) whose
// alloc throws, reached by a launch on a stream without a registration.
void default_alloc() {
    aclrtStream stream = setup();
    if (aclallocSetDefaultAllocator(descriptor(throwing_alloc, same_addr)) != ACL_SUCCESS) _exit(11);
    aclallocLaunchKernel(stream, 4096, nothing, nullptr);
}

// A pluggable allocator from a C++ shared object whose alloc throws.
void plugin_alloc() {
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
    aclallocPluggableMalloc(plugin, &ptr, 4096, stream);
}

struct Scenario {
    const char *name;
    void (*run)();
    // What the line must say: which callback threw.
    const char *names;
};

const Scenario scenarios[] = {
    {"registered alloc", registered_alloc, "the alloc callback (aclrtAllocatorAllocFunc) of the allocator registered with descriptor"},
    {"tracked getAddrFromBlock", tracked_get_addr,
     "the getAddrFromBlock callback (aclrtAllocatorGetAddrFromBlockFunc) at 0x"},
    {"tracked allocAdvise", tracked_alloc_advise,
     "the allocAdvise callback (aclrtAllocatorAllocAdviseFunc) of the allocator registered with descriptor"},
    {"default allocator alloc", default_alloc,
     "the alloc callback (aclrtAllocatorAllocFunc) of the default allocator (set with aclallocSetDefaultAllocator) for stream 0x"},
    {"plugin alloc", plugin_alloc,
     "the pluggable allocator's alloc function (allocSymbol) throwing_plugin_alloc of "},
};

// Runs one scenario in a child; true when the child aborted with a line
// naming the callback (and, before it, nothing that says the exception
// escaped the library).
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
    const bool aborted = WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
    std::string line;
    size_t at = err.find(s.names);
    if (at != std::string::npos) {
        size_t start = err.rfind('\n', at);
        start = start == std::string::npos ? 0 : start + 1;
        line = err.substr(start, err.find('\n', at) - start);
    }
    const bool named = !line.empty() && line.rfind("aclalloc: ", 0) == 0 &&
                       line.find("did not return normally") != std::string::npos &&
                       line.find("Aborting the process") != std::string::npos;
    if (aborted && named) {
        std::printf("%s: aborted with\n  %s\n", s.name, line.c_str());
        return true;
    }
    std::printf("%s: FAILED (status %#x, %s)\n  stderr of the child:\n%s\n", s.name, static_cast<unsigned>(status),
                aborted ? "aborted, but no line naming the callback" : "not aborted", err.c_str());
    return false;
}

// The child: runs one scenario, which must not return.
int scenario(int index) {
    try {
        scenarios[index].run();
    } catch (...) {
        std::fprintf(stderr, "the exception escaped the library\n");
        return 3;
    }
    std::fprintf(stderr, "the call returned\n");
    return 2;
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
