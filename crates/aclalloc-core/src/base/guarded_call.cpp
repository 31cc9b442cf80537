// Calls a foreign function (an allocator callback, a plugin function, a
// kernel) so that neither a C++ exception nor a forced unwind crosses
// aclalloc's Rust frames (src/base/foreign_call.rs):
// - an exception is caught here and its what() handed back;
// - a forced unwind (pthread_exit, pthread_cancel) is paused here with
//   glibc's cancellation buffer, the one pthread_cleanup_push uses in C:
//   glibc unwinds the frames below, then jumps back into this frame. The
//   library then returns normally, releasing what it holds, and resumes the
//   unwind from the export's own frame (aclalloc_resume_unwind), or a stream
//   worker simply ends.
#include <csetjmp>
#include <cstddef>
#include <cstring>
#include <cxxabi.h>
#include <exception>
#include <pthread.h>
#include <sys/types.h>

#include <type_traits>

extern "C" {
// glibc's ABI behind pthread_cleanup_push in C (declared by <pthread.h>
// only for C).
void __pthread_register_cancel(__pthread_unwind_buf_t *buf);
void __pthread_unregister_cancel(__pthread_unwind_buf_t *buf);
[[noreturn]] void __pthread_unwind_next(__pthread_unwind_buf_t *buf);
}

namespace {
// The paused unwind of this thread: its buffer, whose saved link is where
// glibc goes on from.
thread_local __pthread_unwind_buf_t paused;
thread_local bool is_paused;
// The what() of this thread's last exception caught here.
thread_local char what[256];

void keep(const char *text) {
    std::size_t n = std::strlen(text);
    if (n >= sizeof what) n = sizeof what - 1;
    std::memcpy(what, text, n);
    what[n] = '\0';
}
}  // namespace

namespace {
// Calls fn(args...); *status: 0 returned, 1 threw (aclalloc_exception_text),
// 2 a forced unwind was paused (then the value is R's zero).
template <typename R, typename... A>
R guarded(int *status, R (*fn)(A...), A... args) {
    __pthread_unwind_buf_t buf;
    if (__builtin_expect(__sigsetjmp(reinterpret_cast<__jmp_buf_tag *>(buf.__cancel_jmp_buf), 0),
                         0)) {
        __pthread_unregister_cancel(&buf);
        paused = buf;
        is_paused = true;
        *status = 2;
        return R();
    }
    __pthread_register_cancel(&buf);
    *status = 1;
    try {
        if constexpr (std::is_void_v<R>) {
            fn(args...);
            *status = 0;
        } else {
            R value = fn(args...);
            *status = 0;
            __pthread_unregister_cancel(&buf);
            return value;
        }
    } catch (abi::__forced_unwind &) {
        // Not glibc's (it jumps back above first): let it go on.
        throw;
    } catch (const std::exception &e) {
        keep(e.what());
    } catch (...) {
        keep("an exception that is not a std::exception");
    }
    __pthread_unregister_cancel(&buf);
    return R();
}
}  // namespace

// The hot signatures get their own entry (no thunk); the rest go through a
// thunk that calls a Rust closure.
extern "C" void aclalloc_call_guarded(int *status, void (*thunk)(void *), void *context) {
    guarded(status, thunk, context);
}
extern "C" void *aclalloc_guarded_alloc(int *status, void *(*fn)(void *, size_t), void *obj,
                                        size_t size) {
    return guarded(status, fn, obj, size);
}
extern "C" void *aclalloc_guarded_get_addr(int *status, void *(*fn)(void *), void *block) {
    return guarded(status, fn, block);
}
extern "C" void aclalloc_guarded_free(int *status, void (*fn)(void *, void *), void *obj,
                                      void *block) {
    guarded(status, fn, obj, block);
}
extern "C" void *aclalloc_guarded_plugin_alloc(int *status, void *(*fn)(ssize_t, int, void *),
                                               ssize_t size, int device, void *stream) {
    return guarded(status, fn, size, device, stream);
}
extern "C" void aclalloc_guarded_plugin_free(int *status, void (*fn)(void *, ssize_t, int, void *),
                                             void *ptr, ssize_t size, int device, void *stream) {
    guarded(status, fn, ptr, size, device, stream);
}

// The what() of this thread's last exception caught here.
extern "C" const char *aclalloc_exception_text(void) { return what; }

// True when this thread has a paused unwind.
extern "C" bool aclalloc_unwind_paused(void) { return is_paused; }

// Forgets the paused unwind (a stream worker that ends by returning).
extern "C" void aclalloc_forget_unwind(void) { is_paused = false; }

// Goes on with this thread's paused unwind; never returns.
extern "C" [[noreturn]] void aclalloc_resume_unwind(void) {
    is_paused = false;
    __pthread_unwind_next(&paused);
}
