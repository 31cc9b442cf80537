//! The library's own threads (a stream's worker, the tracking clock, the
//! report-on-signal watcher) take no process-directed signal: a service
//! that blocks a signal in all of its threads and takes it with `sigwait`
//! gets every one. A C program, as a service is written: it starts the
//! three threads, then blocks SIGUSR1 and SIGTERM in its own threads and
//! waits for each signal it sends to its own process. A library thread
//! that left them unblocked would take the signal instead, and its default
//! action ends the process.

mod common;

use std::process::Command;

const PROGRAM: &str = r#"
#define _GNU_SOURCE
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "acl/acl.h"
#include "aclalloc.h"

static void *user_alloc(aclrtAllocator allocator, size_t size) {
    (void)allocator;
    return malloc(size);
}
static void user_free(aclrtAllocator allocator, aclrtAllocatorBlock block) {
    (void)allocator;
    free(block);
}
static void *user_addr(aclrtAllocatorBlock block) { return block; }

/* How many of this process's threads have a name starting with `prefix`. */
static int threads_named(const char *prefix) {
    DIR *tasks = opendir("/proc/self/task");
    if (tasks == NULL) return -1;
    int count = 0;
    struct dirent *task;
    while ((task = readdir(tasks)) != NULL) {
        if (task->d_name[0] == '.') continue;
        char path[300], name[64] = {0};
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", task->d_name);
        FILE *comm = fopen(path, "r");
        if (comm == NULL) continue;
        if (fgets(name, sizeof name, comm) != NULL && strncmp(name, prefix, strlen(prefix)) == 0)
            count++;
        fclose(comm);
    }
    closedir(tasks);
    return count;
}

int main(void) {
    aclrtStream stream = NULL;
    static int object;
    aclrtAllocatorDesc desc = aclrtAllocatorCreateDesc();
    if (aclrtSetDevice(0) != ACL_SUCCESS || aclrtCreateStream(&stream) != ACL_SUCCESS ||
        desc == NULL || aclrtAllocatorSetObjToDesc(desc, &object) != ACL_SUCCESS ||
        aclrtAllocatorSetAllocFuncToDesc(desc, user_alloc) != ACL_SUCCESS ||
        aclrtAllocatorSetFreeFuncToDesc(desc, user_free) != ACL_SUCCESS ||
        aclrtAllocatorSetGetAddrFromBlockFuncToDesc(desc, user_addr) != ACL_SUCCESS ||
        aclrtAllocatorRegister(stream, desc) != ACL_SUCCESS) {
        fprintf(stderr, "setup failed: %s\n", aclGetRecentErrMsg());
        return 2;
    }
    /* With tracking on (ACLALLOC_TRACK=1), the first tracked lookup makes a
       tracking object, which starts the clock thread. */
    aclrtAllocatorDesc found = NULL;
    aclrtAllocator allocator = NULL;
    aclrtAllocatorAllocFunc alloc_fn = NULL;
    aclrtAllocatorFreeFunc free_fn = NULL;
    if (aclrtAllocatorGetByStream(stream, &found, &allocator, &alloc_fn, &free_fn, NULL, NULL) !=
        ACL_SUCCESS) {
        fprintf(stderr, "lookup failed: %s\n", aclGetRecentErrMsg());
        return 2;
    }
    free_fn(allocator, alloc_fn(allocator, 64));
    const char *expected[] = {"aclalloc-stream", "aclalloc-clock", "aclalloc-report"};
    for (int i = 0; i < 3; i++) {
        /* A new thread names itself once it runs: wait up to 5 s. */
        for (int tries = 0; tries < 500 && threads_named(expected[i]) < 1; tries++)
            usleep(10000);
        if (threads_named(expected[i]) < 1) {
            fprintf(stderr, "no thread named %s*\n", expected[i]);
            return 3;
        }
    }

    sigset_t wanted;
    sigemptyset(&wanted);
    sigaddset(&wanted, SIGUSR1);
    sigaddset(&wanted, SIGTERM);
    if (pthread_sigmask(SIG_BLOCK, &wanted, NULL) != 0) return 2;
    const int signals[] = {SIGUSR1, SIGTERM};
    for (int round = 0; round < 50; round++) {
        int sent = signals[round % 2], got = 0;
        if (kill(getpid(), sent) != 0 || sigwait(&wanted, &got) != 0 || got != sent) {
            fprintf(stderr, "round %d: sent %d, sigwait returned %d\n", round, sent, got);
            return 4;
        }
    }
    aclrtAllocatorUnregister(stream);
    aclrtAllocatorDestroyDesc(desc);
    aclrtDestroyStream(stream);
    aclrtResetDevice(0);
    printf("all 50 signals reached sigwait\n");
    return 0;
}
"#;

#[test]
fn signals_sent_to_the_process_reach_the_programs_sigwait_not_a_library_thread() {
    let dir = common::scratch("library_threads");
    let source = dir.join("program.c");
    std::fs::write(&source, PROGRAM).unwrap();
    let binary = dir.join("program");
    common::compile("cc", "c11", &[&source], &binary, &[]);
    let out = Command::new(&binary)
        .env("ACLALLOC_TRACK", "1")
        .env_remove("ACLALLOC_TRACK_REPORT")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the program failed ({:?}; a status of signal 10 or 15 means a library thread took \
         the signal); stdout: {}; stderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("all 50 signals reached sigwait"));
}
