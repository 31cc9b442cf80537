// A pluggable allocator whose functions throw a C++ exception on the call
// THROWING_CALL names (counted over alloc and free together), for
// tests/plugin_throwing.rs: the library takes it as an allocation failure
// with the exception's text, never lets it cross, and keeps working.
#include <cstdlib>
#include <stdexcept>
#include <sys/types.h>

static long calls;
static char memory[64 * 1024];
static size_t next_block;

static void maybe_throw() {
    const char *at = std::getenv("THROWING_CALL");
    if (at != nullptr && ++calls == std::atol(at)) throw std::runtime_error("the plugin gives up");
}

extern "C" void *throwing_malloc(ssize_t size, int, void *) {
    maybe_throw();
    void *block = memory + (next_block % 64) * 1024;
    next_block++;
    return size <= 1024 ? block : nullptr;
}

extern "C" void throwing_free(void *, ssize_t, int, void *) { maybe_throw(); }
