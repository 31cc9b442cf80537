// A GE-style pool allocator (aclalloc/ge_allocator.h) registered on two
// runtime streams, each driven from its own thread with operator launches
// (aclallocLaunchKernel) that take their workspaces from it. The pool caches
// blocks by size class, so after warm-up no request reaches the "device";
// the kernels check that no two running kernels share memory. Also shown:
// MemBlock reference counts, an allocator that throws (the exception is
// caught in the adapter and the launch fails cleanly), one allocator kept
// alive by its registrations on both streams, and unregistering.
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "aclalloc/ge_allocator.h"

namespace ge = aclalloc::ge;

namespace {

// Device memory stands in as host memory here.
class PoolAllocator : public ge::Allocator {
 public:
  static constexpr size_t kMaxBytes = size_t{256} << 20;

  ~PoolAllocator() override {
    for (auto &entry : cached_) {
      for (ge::MemBlock *b : entry.second) Release(b);
    }
  }

  ge::MemBlock *Malloc(size_t size) override {
    size_t rounded = Round(size);
    if (rounded > kMaxBytes) throw std::length_error("PoolAllocator: request larger than the pool");
    std::lock_guard<std::mutex> lock(mutex_);
    mallocs_++;
    auto &bucket = cached_[rounded];
    if (!bucket.empty()) {
      ge::MemBlock *b = bucket.back();
      bucket.pop_back();
      b->AddCount();  // cached blocks sit at count 0
      live_++;
      return b;
    }
    void *mem = std::aligned_alloc(512, rounded);
    if (mem == nullptr) return nullptr;
    device_allocs_++;
    live_++;
    return new ge::MemBlock(*this, mem, rounded);
  }

  void Free(ge::MemBlock *block) override {
    std::lock_guard<std::mutex> lock(mutex_);
    frees_++;
    live_--;
    cached_[block->GetSize()].push_back(block);
  }

  long mallocs() { std::lock_guard<std::mutex> l(mutex_); return mallocs_; }
  long frees() { std::lock_guard<std::mutex> l(mutex_); return frees_; }
  long live() { std::lock_guard<std::mutex> l(mutex_); return live_; }
  long device_allocs() { std::lock_guard<std::mutex> l(mutex_); return device_allocs_; }

 private:
  static size_t Round(size_t size) {
    size_t r = 512;
    while (r < size) r <<= 1;
    return r;
  }
  static void Release(ge::MemBlock *b) {
    std::free(b->GetAddr());
    delete b;
  }

  std::mutex mutex_;
  std::map<size_t, std::vector<ge::MemBlock *>> cached_;
  long mallocs_ = 0, frees_ = 0, live_ = 0, device_allocs_ = 0;
};

int failures = 0;
#define CHECK(cond)                                                                  \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      failures++;                                                                    \
    }                                                                                \
  } while (0)

// Workspace ranges of the kernels running right now, on either stream.
std::mutex running_mutex;
std::vector<std::pair<uintptr_t, uintptr_t>> running;
std::atomic<long> overlaps{0}, kernels{0};

void Kernel(void *workspace, size_t size, void *user_data) {
  kernels++;
  auto lo = reinterpret_cast<uintptr_t>(workspace);
  auto hi = lo + size;
  {
    std::lock_guard<std::mutex> lock(running_mutex);
    for (auto &r : running)
      if (lo < r.second && r.first < hi) overlaps++;
    running.emplace_back(lo, hi);
  }
  std::memset(workspace, static_cast<int>(reinterpret_cast<uintptr_t>(user_data) & 0xff), size);
  std::lock_guard<std::mutex> lock(running_mutex);
  for (auto it = running.begin(); it != running.end(); ++it) {
    if (it->first == lo && it->second == hi) {
      running.erase(it);
      break;
    }
  }
}

}  // namespace

int main() {
  if (aclInit(nullptr) != ACL_SUCCESS || aclrtSetDevice(0) != ACL_SUCCESS) {
    std::fprintf(stderr, "init: %s\n", aclGetRecentErrMsg());
    return 1;
  }
  aclrtContext context = nullptr;
  CHECK(aclrtGetCurrentContext(&context) == ACL_SUCCESS);

  // One GE-style pool per stream: CANN gives a block back right after its
  // launch is enqueued, so a pool may hand it out again only to later work on
  // the same stream. Each pool is registered on its stream.
  aclrtStream streams[2] = {nullptr, nullptr};
  std::shared_ptr<PoolAllocator> pools[2];
  for (int s = 0; s < 2; s++) {
    CHECK(aclrtCreateStream(&streams[s]) == ACL_SUCCESS);
    pools[s] = std::make_shared<PoolAllocator>();
    CHECK(ge::RegisterExternalAllocator(streams[s], pools[s]) == ACL_SUCCESS);
  }

  // Two executor threads, one per stream, launching through the runtime.
  const size_t sizes[] = {512, 4096, 64 << 10, 1 << 20, 3 << 20};
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; t++) {
    threads.emplace_back([&, t] {
      if (aclrtSetCurrentContext(context) != ACL_SUCCESS) bad++;
      for (int i = 0; i < 5000; i++) {
        void *tag = reinterpret_cast<void *>(static_cast<uintptr_t>(i));
        if (aclallocLaunchKernel(streams[t], sizes[(i + t) % 5], Kernel, tag) != ACL_SUCCESS) bad++;
      }
      if (aclrtSynchronizeStream(streams[t]) != ACL_SUCCESS) bad++;
    });
  }
  for (auto &th : threads) th.join();
  CHECK(bad == 0 && kernels == 10000 && overlaps == 0);
  for (int s = 0; s < 2; s++) {
    std::printf("stream %d: %ld mallocs, %ld frees, %ld live, %ld device allocations\n", s,
                pools[s]->mallocs(), pools[s]->frees(), pools[s]->live(), pools[s]->device_allocs());
    CHECK(pools[s]->mallocs() == 5000 && pools[s]->frees() == 5000 && pools[s]->live() == 0);
    CHECK(pools[s]->device_allocs() == 5);  // one per size class: the cache serves the rest
  }

  // Reference counts: a block shared by two users returns on the last Free.
  ge::MemBlock *b = pools[0]->Malloc(1000);
  CHECK(b->GetCount() == 1 && b->AddCount() == 2);
  b->Free();
  CHECK(pools[0]->live() == 1 && b->GetCount() == 1);
  b->Free();
  CHECK(pools[0]->live() == 0 && b->GetCount() == 0);

  // A throwing allocator: the launch fails cleanly, nothing escapes.
  aclError rc = aclallocLaunchKernel(streams[0], PoolAllocator::kMaxBytes + 1, Kernel, nullptr);
  const char *msg = aclGetRecentErrMsg();
  std::printf("a throwing Malloc: launch -> %d: %s\n  (the exception: %s)\n", rc, msg ? msg : "",
              ge::LastAllocatorError());
  CHECK(rc == ACL_ERROR_RT_MEMORY_ALLOCATION);
  CHECK(std::strstr(ge::LastAllocatorError(), "larger than the pool") != nullptr);

  // One allocator on both streams: the registrations keep it alive, the last
  // unregister releases it.
  std::weak_ptr<PoolAllocator> watch = pools[0];
  CHECK(ge::RegisterExternalAllocator(streams[1], pools[0]) == ACL_SUCCESS);
  pools[0].reset();
  pools[1].reset();
  CHECK(!watch.expired());
  CHECK(ge::UnregisterExternalAllocator(streams[0]) == ACL_SUCCESS);
  CHECK(!watch.expired());
  CHECK(aclallocLaunchKernel(streams[1], 4096, Kernel, nullptr) == ACL_SUCCESS);
  CHECK(aclrtSynchronizeStream(streams[1]) == ACL_SUCCESS);
  CHECK(ge::UnregisterExternalAllocator(streams[1]) == ACL_SUCCESS);
  CHECK(watch.expired());

  // Bad arguments.
  CHECK(ge::RegisterExternalAllocator(streams[0], nullptr) == ACL_ERROR_INVALID_PARAM);
  CHECK(ge::RegisterExternalAllocator(nullptr, std::make_shared<PoolAllocator>()) ==
        ACL_ERROR_INVALID_PARAM);
  msg = aclGetRecentErrMsg();
  CHECK(msg != nullptr && std::strstr(msg, "stream cannot be a NULL pointer") != nullptr);

  for (aclrtStream s : streams) CHECK(aclrtDestroyStream(s) == ACL_SUCCESS);
  CHECK(aclrtResetDevice(0) == ACL_SUCCESS);
  CHECK(aclFinalize() == ACL_SUCCESS);
  std::printf("%s\n", failures == 0 ? "ge_pool_allocator: OK" : "ge_pool_allocator: FAILED");
  return failures == 0 ? 0 : 1;
}
