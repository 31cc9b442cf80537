/*
 * aclalloc: a C++ allocator interface in the shape of GE's (ge::Allocator,
 * ge::MemBlock, RegisterExternalAllocator), built on CANN's descriptor API.
 * Header-only, C++17. Hand-written (include/aclalloc.h is generated).
 * SPDX-License-Identifier: MIT OR Apache-2.0
 *
 *   #include "aclalloc/ge_allocator.h"
 *   namespace ge = aclalloc::ge;        // GE-style code then reads as usual
 *
 *   class MyPool : public ge::Allocator {
 *     ge::MemBlock *Malloc(size_t size) override;
 *     void Free(ge::MemBlock *block) override;
 *   };
 *   auto pool = std::make_shared<MyPool>();
 *   ge::RegisterExternalAllocator(stream, pool);   // aclError
 *   ...                                            // launches on `stream` use the pool
 *   ge::UnregisterExternalAllocator(stream);
 *
 * The names live in aclalloc::ge, not ge, so this header can sit beside GE's
 * own headers in one program.
 *
 * Contract, as for CANN's aclrtAllocatorRegister:
 * - The allocator is kept alive (a shared_ptr is held) while it is registered
 *   on at least one stream. Blocks still outstanding when it is unregistered
 *   refer to it: free them first, or keep a shared_ptr of your own.
 * - Unregister (or re-register) a stream only when no launch on it is
 *   pending: a launch uses the registration it found when it started.
 * - Destroying a stream drops its registration in the runtime, but this
 *   header still holds the allocator until UnregisterExternalAllocator(stream)
 *   is called; that call succeeds after the destroy too, so call it either way.
 * - A C++ exception thrown by Malloc, MallocAdvise or Free never reaches the
 *   caller of the callbacks (C, Rust): it is caught, the allocation fails
 *   (NULL, which a launch reports as ACL_ERROR_RT_MEMORY_ALLOCATION), and
 *   its what() is kept for LastAllocatorError() on the throwing thread.
 */
#ifndef ACLALLOC_GE_ALLOCATOR_H
#define ACLALLOC_GE_ALLOCATOR_H

#if !defined(__cplusplus) || __cplusplus < 201703L
#error "aclalloc/ge_allocator.h needs C++17"
#endif

#include <atomic>
#include <cstddef>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>

#include "../aclalloc.h"

namespace aclalloc {
namespace ge {

class MemBlock;

/// An allocator of device memory blocks, as GE's ge::Allocator.
class Allocator {
 public:
  Allocator() = default;
  virtual ~Allocator() = default;
  Allocator(const Allocator &) = delete;
  Allocator &operator=(const Allocator &) = delete;

  /// A block of at least `size` bytes with a reference count of 1, or
  /// nullptr. May throw: the adapter turns that into a failed allocation.
  virtual MemBlock *Malloc(size_t size) = 0;

  /// Takes back a block whose count has dropped to zero.
  virtual void Free(MemBlock *block) = 0;

  /// As Malloc, preferably at `addr`. By default, Malloc.
  virtual MemBlock *MallocAdvise(size_t size, void *addr) {
    (void)addr;
    return Malloc(size);
  }
};

/// A block of device memory with the allocator it came from and a reference
/// count, as GE's ge::MemBlock. Free() drops one reference and returns the
/// block to its allocator when none is left.
class MemBlock {
 public:
  MemBlock(Allocator &allocator, void *addr, size_t size) noexcept
      : allocator_(&allocator), addr_(addr), size_(size), count_(1U) {}
  virtual ~MemBlock() = default;
  MemBlock(const MemBlock &) = delete;
  MemBlock &operator=(const MemBlock &) = delete;

  void *GetAddr() noexcept { return addr_; }
  const void *GetAddr() const noexcept { return addr_; }
  size_t GetSize() const noexcept { return size_; }
  void SetSize(size_t size) noexcept { size_ = size; }
  Allocator &GetAllocator() const noexcept { return *allocator_; }

  /// Adds a reference; returns the new count.
  size_t AddCount() noexcept { return count_.fetch_add(1U, std::memory_order_relaxed) + 1U; }

  /// Drops a reference (never below zero); returns the new count.
  size_t SubCount() noexcept {
    size_t count = count_.load(std::memory_order_relaxed);
    while (count > 0U &&
           !count_.compare_exchange_weak(count, count - 1U, std::memory_order_acq_rel)) {
    }
    return count > 0U ? count - 1U : 0U;
  }

  size_t GetCount() const noexcept { return count_.load(std::memory_order_acquire); }

  /// Drops a reference; the last one returns the block to its allocator.
  void Free() {
    size_t count = count_.load(std::memory_order_relaxed);
    while (count > 0U &&
           !count_.compare_exchange_weak(count, count - 1U, std::memory_order_acq_rel)) {
    }
    if (count == 1U) allocator_->Free(this);
  }

 private:
  Allocator *allocator_;
  void *addr_;
  size_t size_;
  std::atomic<size_t> count_;
};

namespace detail {

inline std::string &LastErrorSlot() noexcept {
  thread_local std::string slot;
  return slot;
}

inline void Remember(const char *what) noexcept {
  try {
    LastErrorSlot() = what;
  } catch (...) {
  }
}

/// Runs `f`; an exception is kept for LastAllocatorError() and `fallback` returned.
template <typename F, typename R>
R Guarded(F &&f, R fallback) noexcept {
  try {
    return f();
  } catch (const std::exception &e) {
    Remember(e.what());
  } catch (...) {
    Remember("a non-standard exception was thrown by the allocator");
  }
  return fallback;
}

/// What a descriptor's allocator object points to: the registered allocator.
struct Adapter {
  std::shared_ptr<Allocator> allocator;

  static void *Alloc(aclrtAllocator obj, size_t size) noexcept {
    Allocator *a = static_cast<Adapter *>(obj)->allocator.get();
    return Guarded([&]() -> void * { return a->Malloc(size); }, static_cast<void *>(nullptr));
  }

  static void *AllocAdvise(aclrtAllocator obj, size_t size, aclrtAllocatorAddr addr) noexcept {
    Allocator *a = static_cast<Adapter *>(obj)->allocator.get();
    return Guarded([&]() -> void * { return a->MallocAdvise(size, addr); },
                   static_cast<void *>(nullptr));
  }

  static void Free(aclrtAllocator obj, aclrtAllocatorBlock block) noexcept {
    (void)obj;
    if (block == nullptr) return;
    Guarded(
        [&]() -> int {
          static_cast<MemBlock *>(block)->Free();
          return 0;
        },
        0);
  }

  static void *GetAddr(aclrtAllocatorBlock block) noexcept {
    return block == nullptr ? nullptr : static_cast<MemBlock *>(block)->GetAddr();
  }
};

struct Registry {
  std::mutex mutex;
  std::map<const void *, std::shared_ptr<Adapter>> adapters;
};

inline Registry &Registered() {
  static Registry registry;
  return registry;
}

}  // namespace detail

/// The what() of the last exception an allocator threw on this thread
/// through a callback ("" if none), as the callbacks cannot return it.
inline const char *LastAllocatorError() noexcept { return detail::LastErrorSlot().c_str(); }

/// Registers `allocator` on `stream` (replacing what was registered there):
/// launches on the stream take their workspaces from it. Returns
/// ACL_SUCCESS, ACL_ERROR_INVALID_PARAM (NULL stream or allocator; the
/// former also leaves a message for aclGetRecentErrMsg), or
/// ACL_ERROR_BAD_ALLOC.
inline aclError RegisterExternalAllocator(const void *stream, std::shared_ptr<Allocator> allocator) {
  if (!allocator) return ACL_ERROR_INVALID_PARAM;
  std::shared_ptr<detail::Adapter> adapter;
  try {
    adapter = std::make_shared<detail::Adapter>();
  } catch (const std::bad_alloc &) {
    return ACL_ERROR_BAD_ALLOC;
  }
  adapter->allocator = std::move(allocator);

  detail::Registry &registry = detail::Registered();
  std::lock_guard<std::mutex> lock(registry.mutex);
  aclrtAllocatorDesc desc = aclrtAllocatorCreateDesc();
  if (desc == nullptr) return ACL_ERROR_BAD_ALLOC;
  aclError rc = aclrtAllocatorSetObjToDesc(desc, adapter.get());
  if (rc == ACL_SUCCESS) rc = aclrtAllocatorSetAllocFuncToDesc(desc, &detail::Adapter::Alloc);
  if (rc == ACL_SUCCESS) rc = aclrtAllocatorSetFreeFuncToDesc(desc, &detail::Adapter::Free);
  if (rc == ACL_SUCCESS)
    rc = aclrtAllocatorSetAllocAdviseFuncToDesc(desc, &detail::Adapter::AllocAdvise);
  if (rc == ACL_SUCCESS)
    rc = aclrtAllocatorSetGetAddrFromBlockFuncToDesc(desc, &detail::Adapter::GetAddr);
  if (rc == ACL_SUCCESS) rc = aclrtAllocatorRegister(const_cast<void *>(stream), desc);
  // The registration keeps a copy; the descriptor itself is no longer needed.
  (void)aclrtAllocatorDestroyDesc(desc);
  if (rc != ACL_SUCCESS) return rc;
  try {
    registry.adapters[stream] = std::move(adapter);
  } catch (const std::bad_alloc &) {
    (void)aclrtAllocatorUnregister(const_cast<void *>(stream));
    return ACL_ERROR_BAD_ALLOC;
  }
  return ACL_SUCCESS;
}

/// Drops the registration of `stream` and, with it, this header's reference
/// to its allocator. A stream registered with nothing: ACL_SUCCESS.
inline aclError UnregisterExternalAllocator(const void *stream) {
  detail::Registry &registry = detail::Registered();
  std::lock_guard<std::mutex> lock(registry.mutex);
  aclError rc = aclrtAllocatorUnregister(const_cast<void *>(stream));
  if (rc == ACL_SUCCESS) registry.adapters.erase(stream);
  return rc;
}

}  // namespace ge
}  // namespace aclalloc

#endif /* ACLALLOC_GE_ALLOCATOR_H */
