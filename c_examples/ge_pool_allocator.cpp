// A GE-style pool allocator (aclalloc/ge_allocator.h) registered on two
// streams. Each stream is driven from its own thread the way an executor
// does it: look the allocator up by stream, allocate a workspace, use it,
// give it back. The pool caches blocks by size class, so after warm-up no
// request reaches the "device". Also shown: MemBlock reference counts, an
// allocator that throws (the exception is caught in the adapter and the
// allocation fails cleanly), and unregistering.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <thread>
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
#define CHECK(cond)                                                         \
  do {                                                                      \
    if (!(cond)) {                                                          \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      failures++;                                                           \
    }                                                                       \
  } while (0)

// One operator launch as an executor performs it, through the C callbacks.
bool RunOperator(aclrtStream stream, size_t workspace, unsigned char fill) {
  aclrtAllocatorDesc desc = nullptr;
  aclrtAllocator obj = nullptr;
  aclrtAllocatorAllocFunc alloc = nullptr;
  aclrtAllocatorFreeFunc free_fn = nullptr;
  aclrtAllocatorGetAddrFromBlockFunc addr = nullptr;
  if (aclrtAllocatorGetByStream(stream, &desc, &obj, &alloc, &free_fn, nullptr, &addr) != ACL_SUCCESS)
    return false;
  aclrtAllocatorBlock block = alloc(obj, workspace);
  if (block == nullptr) return false;
  auto *p = static_cast<unsigned char *>(addr(block));
  std::memset(p, fill, workspace);
  bool ok = p[0] == fill && p[workspace - 1] == fill;
  free_fn(obj, block);
  return ok;
}

}  // namespace

int main() {
  static int stream_storage[2];
  aclrtStream streams[2] = {&stream_storage[0], &stream_storage[1]};

  auto pool = std::make_shared<PoolAllocator>();
  std::weak_ptr<PoolAllocator> watch = pool;
  for (aclrtStream s : streams) CHECK(ge::RegisterExternalAllocator(s, pool) == ACL_SUCCESS);

  // Two "executor" threads, one per stream, sharing the pool.
  const size_t sizes[] = {512, 4096, 64 << 10, 1 << 20, 3 << 20};
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; t++) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 5000; i++) {
        if (!RunOperator(streams[t], sizes[(i + t) % 5], static_cast<unsigned char>(i))) bad++;
      }
    });
  }
  for (auto &th : threads) th.join();
  CHECK(bad == 0);
  CHECK(pool->mallocs() == 10000 && pool->frees() == 10000 && pool->live() == 0);
  CHECK(pool->device_allocs() <= 10);  // at most one per size class per thread
  std::printf("10000 launches on 2 streams: %ld mallocs, %ld frees, %ld device allocations\n",
              pool->mallocs(), pool->frees(), pool->device_allocs());

  // Reference counts: a block shared by two users returns on the last Free.
  ge::MemBlock *b = pool->Malloc(1000);
  CHECK(b->GetCount() == 1 && b->AddCount() == 2);
  b->Free();
  CHECK(pool->live() == 1 && b->GetCount() == 1);
  b->Free();
  CHECK(pool->live() == 0 && b->GetCount() == 0);

  // A throwing allocator: the callback returns NULL, nothing escapes.
  aclrtAllocatorDesc desc = nullptr;
  aclrtAllocator obj = nullptr;
  aclrtAllocatorAllocFunc alloc = nullptr;
  CHECK(aclrtAllocatorGetByStream(streams[0], &desc, &obj, &alloc, nullptr, nullptr, nullptr) ==
        ACL_SUCCESS);
  CHECK(alloc(obj, PoolAllocator::kMaxBytes + 1) == nullptr);
  CHECK(std::strstr(ge::LastAllocatorError(), "larger than the pool") != nullptr);
  std::printf("a throwing Malloc became a failed allocation: %s\n", ge::LastAllocatorError());

  // The registrations keep the pool alive; the last unregister releases it.
  pool.reset();
  CHECK(!watch.expired());
  CHECK(ge::UnregisterExternalAllocator(streams[0]) == ACL_SUCCESS);
  CHECK(!watch.expired());
  CHECK(RunOperator(streams[1], 4096, 7));
  CHECK(ge::UnregisterExternalAllocator(streams[1]) == ACL_SUCCESS);
  CHECK(watch.expired());
  CHECK(aclrtAllocatorGetByStream(streams[1], &desc, nullptr, nullptr, nullptr, nullptr, nullptr) ==
        ACL_ERROR_INVALID_PARAM);
  (void)aclGetRecentErrMsg();

  // Bad arguments.
  CHECK(ge::RegisterExternalAllocator(streams[0], nullptr) == ACL_ERROR_INVALID_PARAM);
  CHECK(ge::RegisterExternalAllocator(nullptr, std::make_shared<PoolAllocator>()) ==
        ACL_ERROR_INVALID_PARAM);
  const char *msg = aclGetRecentErrMsg();
  CHECK(msg != nullptr && std::strstr(msg, "stream cannot be a NULL pointer") != nullptr);

  std::printf("%s\n", failures == 0 ? "ge_pool_allocator: OK" : "ge_pool_allocator: FAILED");
  return failures == 0 ? 0 : 1;
}
