/*
 * Notifies on the host runtime:
 *
 *   1. a stream that waits on a notify (aclrtWaitAndResetNotify) runs
 *      nothing queued after the wait until another stream records it;
 *   2. the same across processes: the notify exported by key
 *      (aclrtNotifyGetExportKey), imported by another process (this
 *      program again, started with fork() and exec()) that records it;
 *   3. a destroyed notify and a made-up key are refused;
 *   4. a record and a wait dropped by aclrtStreamAbort before they ran
 *      free what they hold (valgrind's leak check sees it).
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define EXPECT_WHAT_WIDTH 40
#include "acl/acl.h"
#include "common/expect.h"
#include "common/hang_guard.h"

/* This program's path, to start it again: argv[0] as the test runs it
 * (under valgrind /proc/self/exe is valgrind's tool, which refuses to run). */
static const char *self_path = "/proc/self/exe";

static int record_by_key(const char *key) {
    aclrtNotify n = NULL;
    aclrtStream s = NULL;
    if (aclrtNotifyImportByKey(&n, key, ACL_RT_NOTIFY_IMPORT_FLAG_DEFAULT) != ACL_SUCCESS) return 2;
    if (aclrtCreateStream(&s) != ACL_SUCCESS || aclrtRecordNotify(n, s) != ACL_SUCCESS ||
        aclrtSynchronizeStream(s) != ACL_SUCCESS)
        return 3;
    return 0;
}

/* Queues on `waiter`: wait for `n`, then set the byte at `dev` to 7. */
static void wait_then_set(aclrtNotify n, aclrtStream waiter, void *dev) {
    EXPECT(aclrtMemset(dev, 1, 0, 1) == ACL_SUCCESS);
    EXPECT(aclrtWaitAndResetNotify(n, waiter, 0) == ACL_SUCCESS);
    EXPECT(aclrtMemsetAsync(dev, 1, 7, 1, waiter) == ACL_SUCCESS);
}

/* A host function that holds its stream until `held` is cleared. */
static atomic_int held = 1;
static void hold(void *args) {
    (void)args;
    while (atomic_load(&held)) usleep(1000);
}

static uint8_t byte_at(void *dev) {
    uint8_t b = 0;
    EXPECT(aclrtMemcpy(&b, 1, dev, 1, ACL_MEMCPY_DEVICE_TO_HOST) == ACL_SUCCESS);
    return b;
}

int main(int argc, char **argv) {
    if (strchr(argv[0], '/') != NULL) self_path = argv[0];
    if (aclInit(NULL) != ACL_SUCCESS || aclrtSetDevice(0) != ACL_SUCCESS) return 4;
    if (argc == 3 && strcmp(argv[1], "record") == 0) return record_by_key(argv[2]);
    hang_guard("notify: a wait was never released", 60);

    aclrtStream waiter = NULL, recorder = NULL;
    aclrtNotify n = NULL;
    void *dev = NULL;
    EXPECT(aclrtCreateStream(&waiter) == ACL_SUCCESS && aclrtCreateStream(&recorder) == ACL_SUCCESS);
    EXPECT(aclrtMalloc(&dev, 1, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS);
    expect("aclrtCreateNotify", aclrtCreateNotify(&n, ACL_NOTIFY_DEFAULT), ACL_SUCCESS, "");

    /* 1. Another stream. */
    wait_then_set(n, waiter, dev);
    /* A synchronous copy would wait for the held stream: ask the stream instead. */
    aclrtStreamStatus status = ACL_STREAM_STATUS_COMPLETE;
    usleep(20000);
    EXPECT(aclrtStreamQuery(waiter, &status) == ACL_SUCCESS);
    printf("before the record the waiting stream is %s\n",
           status == ACL_STREAM_STATUS_NOT_READY ? "not ready" : "complete");
    EXPECT(status == ACL_STREAM_STATUS_NOT_READY);
    expect("aclrtRecordNotify", aclrtRecordNotify(n, recorder), ACL_SUCCESS, "");
    EXPECT(aclrtSynchronizeStream(waiter) == ACL_SUCCESS);
    printf("after the record: %u\n", byte_at(dev));
    EXPECT(byte_at(dev) == 7);

    /* 2. Another process. */
    char key[65];
    expect("aclrtNotifyGetExportKey",
           aclrtNotifyGetExportKey(n, key, sizeof key, ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION),
           ACL_SUCCESS, "");
    wait_then_set(n, waiter, dev);
    pid_t child = fork();
    if (child == 0) {
        execl(self_path, "notify", "record", key, (char *)NULL);
        _exit(4);
    }
    int exit_status = 0;
    EXPECT(waitpid(child, &exit_status, 0) == child && WIFEXITED(exit_status) && WEXITSTATUS(exit_status) == 0);
    EXPECT(aclrtSynchronizeStream(waiter) == ACL_SUCCESS);
    printf("after the other process's record: %u\n", byte_at(dev));
    EXPECT(byte_at(dev) == 7);

    /* 3. Refusals. */
    aclrtNotify imported = NULL;
    expect("aclrtNotifyImportByKey (made up)", aclrtNotifyImportByKey(&imported, "aclalloc-0000040000000001", 0),
           ACL_ERROR_INVALID_PARAM, "names no live export");
    expect("aclrtDestroyNotify", aclrtDestroyNotify(n), ACL_SUCCESS, "");
    expect("aclrtRecordNotify (destroyed)", aclrtRecordNotify(n, recorder), ACL_ERROR_INVALID_PARAM,
           "not a live notify");
    EXPECT(imported == NULL);

    /* 4. Dropped by an abort behind a running host function. */
    aclrtNotify dropped = NULL;
    EXPECT(aclrtCreateNotify(&dropped, ACL_NOTIFY_DEFAULT) == ACL_SUCCESS);
    EXPECT(aclrtLaunchHostFunc(waiter, hold, NULL) == ACL_SUCCESS);
    EXPECT(aclrtWaitAndResetNotify(dropped, waiter, 0) == ACL_SUCCESS);
    EXPECT(aclrtRecordNotify(dropped, waiter) == ACL_SUCCESS);
    expect("aclrtStreamAbort", aclrtStreamAbort(waiter), ACL_SUCCESS, "");
    atomic_store(&held, 0);
    /* The host function was interrupted: ACL_ERROR_RT_VECTOR_CORE_EXCEPTION. */
    expect("aclrtSynchronizeStream (aborted)", aclrtSynchronizeStream(waiter), 507035, "507035");
    EXPECT(aclrtSynchronizeStream(waiter) == ACL_SUCCESS);
    expect("aclrtDestroyNotify (dropped tasks)", aclrtDestroyNotify(dropped), ACL_SUCCESS, "");

    EXPECT(aclrtFree(dev) == ACL_SUCCESS);
    EXPECT(aclrtDestroyStream(waiter) == ACL_SUCCESS && aclrtDestroyStream(recorder) == ACL_SUCCESS);
    aclrtResetDevice(0);
    aclFinalize();
    printf("%s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
