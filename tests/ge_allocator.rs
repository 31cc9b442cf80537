//! The header-only C++ interface (include/aclalloc/ge_allocator.h): it
//! compiles with -std=c++17 -Wall -Wextra -Werror (and -Wpedantic, -Wshadow),
//! and its behaviour through the C ABI: MallocAdvise's default, reference
//! counts, exceptions caught in the adapter, the allocator's lifetime.

mod common;

use std::process::Command;

const PROGRAM: &str = r#"
#include "aclalloc/ge_allocator.h"
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace ge = aclalloc::ge;
static int failures = 0;
#define CHECK(c) do { if (!(c)) { std::fprintf(stderr, "line %d: %s\n", __LINE__, #c); failures++; } } while (0)

struct Counting : ge::Allocator {
  static int alive;
  int mallocs = 0, frees = 0;
  bool throw_in_free = false, throw_odd = false;
  Counting() { alive++; }
  ~Counting() override { alive--; }
  ge::MemBlock *Malloc(size_t size) override {
    mallocs++;
    if (size == 7) throw std::runtime_error("seven is unlucky");
    if (size == 9) throw 9;
    return new ge::MemBlock(*this, std::malloc(size), size);
  }
  void Free(ge::MemBlock *b) override {
    frees++;
    if (throw_in_free) throw std::logic_error("free refused");
    std::free(b->GetAddr());
    delete b;
  }
};
int Counting::alive = 0;

int main() {
  static int s1;
  void *stream = &s1;
  {
    auto a = std::make_shared<Counting>();
    CHECK(ge::RegisterExternalAllocator(stream, a) == ACL_SUCCESS);
    aclrtAllocatorDesc d; aclrtAllocator obj; aclrtAllocatorAllocFunc al; aclrtAllocatorFreeFunc fr;
    aclrtAllocatorAllocAdviseFunc adv; aclrtAllocatorGetAddrFromBlockFunc ga;
    CHECK(aclrtAllocatorGetByStream(stream, &d, &obj, &al, &fr, &adv, &ga) == ACL_SUCCESS);
    CHECK(adv != nullptr);
    // MallocAdvise defaults to Malloc.
    void *blk = adv(obj, 64, reinterpret_cast<void *>(0x1000));
    CHECK(blk != nullptr && a->mallocs == 1);
    auto *mb = static_cast<ge::MemBlock *>(blk);
    CHECK(ga(blk) == mb->GetAddr() && mb->GetSize() == 64 && &mb->GetAllocator() == a.get());
    // The executor's free drops one reference; a second holder keeps it.
    mb->AddCount();
    fr(obj, blk);
    CHECK(a->frees == 0 && mb->GetCount() == 1);
    fr(obj, blk);
    CHECK(a->frees == 1);
    // SubCount never goes below zero.
    ge::MemBlock local(*a, nullptr, 0);
    CHECK(local.SubCount() == 0 && local.SubCount() == 0 && local.GetCount() == 0);
    // Exceptions: caught, NULL, message kept.
    CHECK(al(obj, 7) == nullptr);
    CHECK(std::strcmp(ge::LastAllocatorError(), "seven is unlucky") == 0);
    CHECK(al(obj, 9) == nullptr);
    CHECK(std::strstr(ge::LastAllocatorError(), "non-standard exception") != nullptr);
    a->throw_in_free = true;
    void *b2 = al(obj, 32);
    fr(obj, b2);  // throws inside; must not escape
    CHECK(std::strcmp(ge::LastAllocatorError(), "free refused") == 0);
    a->throw_in_free = false;
    std::free(static_cast<ge::MemBlock *>(b2)->GetAddr());
    delete static_cast<ge::MemBlock *>(b2);
    // Re-registering replaces; the old allocator lives while we hold it.
    auto b = std::make_shared<Counting>();
    CHECK(ge::RegisterExternalAllocator(stream, b) == ACL_SUCCESS);
    CHECK(aclrtAllocatorGetByStream(stream, &d, &obj, &al, nullptr, nullptr, nullptr) == ACL_SUCCESS);
    void *b3 = al(obj, 16);
    CHECK(b->mallocs == 1 && a->mallocs == 4);
    static_cast<ge::MemBlock *>(b3)->Free();
    CHECK(b->frees == 1);
  }
  CHECK(Counting::alive == 1);  // b: still registered
  CHECK(ge::UnregisterExternalAllocator(stream) == ACL_SUCCESS);
  CHECK(Counting::alive == 0);
  CHECK(ge::UnregisterExternalAllocator(stream) == ACL_SUCCESS);  // nothing registered: fine
  std::printf("%d failures\n", failures);
  return failures == 0 ? 0 : 1;
}
"#;

#[test]
fn the_cpp_header_compiles_strictly_and_behaves() {
    let dir = common::scratch("ge_allocator");
    let source = dir.join("ge.cpp");
    std::fs::write(&source, PROGRAM).unwrap();
    let mut compilers = vec!["c++"];
    if Command::new("clang++").arg("--version").output().is_ok() {
        compilers.push("clang++");
    }
    for compiler in compilers {
        let binary = dir.join(format!("ge-{compiler}"));
        common::compile(
            compiler,
            "c++17",
            &[&source],
            &binary,
            &["-Wpedantic", "-Wshadow", "-Wconversion", "-Wold-style-cast"],
        );
        let out = Command::new(&binary).output().unwrap();
        assert!(
            out.status.success(),
            "{compiler}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn the_ge_pool_example_runs() {
    let dir = common::scratch("ge_pool_example");
    let binary = dir.join("ge_pool_allocator");
    common::compile(
        "c++",
        "c++17",
        &[&common::root().join("c_examples/ge_pool_allocator.cpp")],
        &binary,
        &[],
    );
    let out = Command::new(&binary).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("ge_pool_allocator: OK"),
        "{stdout}"
    );
}
