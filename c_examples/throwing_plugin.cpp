// A pluggable allocator (torch_npu style) written in C++ whose alloc throws:
// what c_examples/throwing_callback.cpp loads to show what happens when a
// plugin function throws.
#include <cstddef>
#include <new>
#include <sys/types.h>

extern "C" {
__attribute__((visibility("default"))) void *throwing_plugin_alloc(ssize_t size, int, void *) {
    if (size > 0) throw std::bad_alloc();
    return nullptr;
}
__attribute__((visibility("default"))) void throwing_plugin_free(void *, ssize_t, int, void *) {}
}
