/*
 * IPC events on the host runtime:
 *
 *   1. an event created with ACL_EVENT_IPC is recorded here on a stream
 *      held by a notify; another process (this program again, started with
 *      fork() and exec(), given the event's handle in hex) opens it with
 *      aclrtIpcOpenEventHandle, makes its stream wait on it and sets a byte
 *      after the wait: the byte stays 0 until this process's record runs;
 *   2. the other process records the event in turn; a stream here that
 *      waits on it runs after that record;
 *   3. what is refused: ACL_EVENT_IPC with another flag, the handle of an
 *      event without the flag, a made-up handle, and the handle of a
 *      destroyed event.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define EXPECT_WHAT_WIDTH 44
#include "acl/acl.h"
#include "common/expect.h"
#include "common/hang_guard.h"

/* This program's path, to start it again: argv[0] as the test runs it
 * (under valgrind /proc/self/exe is valgrind's tool, which refuses to run). */
static const char *self_path = "/proc/self/exe";

static void to_hex(const aclrtIpcEventHandle *h, char *out) {
    for (size_t i = 0; i < ACL_IPC_EVENT_HANDLE_SIZE; i++) sprintf(out + 2 * i, "%02x", (unsigned char)h->reserved[i]);
}

static int from_hex(const char *hex, aclrtIpcEventHandle *h) {
    if (strlen(hex) != 2 * ACL_IPC_EVENT_HANDLE_SIZE) return -1;
    for (size_t i = 0; i < ACL_IPC_EVENT_HANDLE_SIZE; i++) {
        unsigned v = 0;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1) return -1;
        h->reserved[i] = (char)v;
    }
    return 0;
}

static uint8_t byte_at(void *dev) {
    uint8_t b = 0;
    EXPECT(aclrtMemcpy(&b, 1, dev, 1, ACL_MEMCPY_DEVICE_TO_HOST) == ACL_SUCCESS);
    return b;
}

/* A stream held by a notify wait until the notify is recorded. */
static aclrtStream held_stream(aclrtNotify *n) {
    aclrtStream s = NULL;
    EXPECT(aclrtCreateStream(&s) == ACL_SUCCESS && aclrtCreateNotify(n, ACL_NOTIFY_DEFAULT) == ACL_SUCCESS);
    EXPECT(aclrtWaitAndResetNotify(*n, s, 0) == ACL_SUCCESS);
    return s;
}

/* Whether `s` still has work to run, asked without waiting for it. */
static int busy(aclrtStream s) {
    aclrtStreamStatus status = ACL_STREAM_STATUS_COMPLETE;
    EXPECT(aclrtStreamQuery(s, &status) == ACL_SUCCESS);
    return status == ACL_STREAM_STATUS_NOT_READY;
}

/*
 * The other process: opens the event, waits on it, then records it behind
 * its own held stream, which it releases once the parent says so (a line on
 * stdin). Exit codes: 0 as expected, 2 open refused, 3 otherwise.
 */
static int child(const char *hex) {
    aclrtIpcEventHandle h;
    aclrtEvent e = NULL;
    if (from_hex(hex, &h) != 0 || aclrtIpcOpenEventHandle(h, &e) != ACL_SUCCESS) return 2;
    aclrtStream s = NULL;
    void *dev = NULL;
    if (aclrtCreateStream(&s) != ACL_SUCCESS || aclrtMalloc(&dev, 1, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS ||
        aclrtMemset(dev, 1, 0, 1) != ACL_SUCCESS)
        return 3;
    if (aclrtStreamWaitEvent(s, e) != ACL_SUCCESS || aclrtMemsetAsync(dev, 1, 7, 1, s) != ACL_SUCCESS) return 3;
    usleep(20000);
    int held = busy(s);
    printf("  other process: its stream is %s before the record\n", held ? "held" : "NOT held");
    fflush(stdout);
    if (!held) return 3;
    /* The parent releases its record once it read the line above. */
    if (aclrtSynchronizeStream(s) != ACL_SUCCESS || byte_at(dev) != 7) return 3;
    printf("  other process: after the record the byte is 7\n");
    aclrtNotify n = NULL;
    aclrtStream recorder = held_stream(&n);
    if (aclrtRecordEvent(e, recorder) != ACL_SUCCESS) return 3;
    printf("  other process: recorded\n");
    fflush(stdout);
    char line[8];
    if (fgets(line, sizeof line, stdin) == NULL) return 3;
    aclrtStream other = NULL;
    if (aclrtCreateStream(&other) != ACL_SUCCESS || aclrtRecordNotify(n, other) != ACL_SUCCESS ||
        aclrtSynchronizeEvent(e) != ACL_SUCCESS || aclrtDestroyEvent(e) != ACL_SUCCESS)
        return 3;
    return failures ? 3 : 0;
}

/* Runs this program as the other process; its stdin and stdout are pipes. */
static pid_t spawn(const char *hex, FILE **to, FILE **from) {
    int down[2], up[2];
    if (pipe(down) != 0 || pipe(up) != 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(down[0], 0);
        dup2(up[1], 1);
        close(down[1]);
        close(up[0]);
        execl(self_path, "ipc_event", "open", hex, (char *)NULL);
        _exit(4);
    }
    close(down[0]);
    close(up[1]);
    *to = fdopen(down[1], "w");
    *from = fdopen(up[0], "r");
    return pid;
}

static int exit_code(pid_t pid) {
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
    return WEXITSTATUS(status);
}

int main(int argc, char **argv) {
    if (aclInit(NULL) != ACL_SUCCESS || aclrtSetDevice(0) != ACL_SUCCESS) return 4;
    if (argc == 3 && strcmp(argv[1], "open") == 0) return child(argv[2]);
    if (strchr(argv[0], '/') != NULL) self_path = argv[0];
    hang_guard("ipc_event: a wait was never released", 60);

    /* 1. A record here orders the other process's stream. */
    aclrtEvent e = NULL;
    expect("aclrtCreateEventExWithFlag (ACL_EVENT_IPC)", aclrtCreateEventExWithFlag(&e, ACL_EVENT_IPC), ACL_SUCCESS,
           "");
    aclrtNotify n = NULL;
    aclrtStream held = held_stream(&n);
    expect("aclrtRecordEvent", aclrtRecordEvent(e, held), ACL_SUCCESS, "");
    aclrtIpcEventHandle h;
    expect("aclrtIpcGetEventHandle", aclrtIpcGetEventHandle(e, &h), ACL_SUCCESS, "");
    char hex[2 * ACL_IPC_EVENT_HANDLE_SIZE + 1];
    to_hex(&h, hex);
    FILE *to = NULL, *from = NULL;
    pid_t pid = spawn(hex, &to, &from);
    EXPECT(pid > 0 && to != NULL && from != NULL);
    char line[128];
    EXPECT(fgets(line, sizeof line, from) != NULL && strstr(line, "held") != NULL && strstr(line, "NOT") == NULL);
    fputs(line, stdout);
    aclrtStream other = NULL;
    EXPECT(aclrtCreateStream(&other) == ACL_SUCCESS && aclrtRecordNotify(n, other) == ACL_SUCCESS);

    /* 2. The other process's record orders a stream here. */
    EXPECT(fgets(line, sizeof line, from) != NULL && strstr(line, "byte is 7") != NULL);
    fputs(line, stdout);
    EXPECT(fgets(line, sizeof line, from) != NULL && strstr(line, "recorded") != NULL);
    fputs(line, stdout);
    aclrtStream waiter = NULL;
    void *dev = NULL;
    EXPECT(aclrtCreateStream(&waiter) == ACL_SUCCESS);
    EXPECT(aclrtMalloc(&dev, 1, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS && aclrtMemset(dev, 1, 0, 1) == ACL_SUCCESS);
    expect("aclrtStreamWaitEvent", aclrtStreamWaitEvent(waiter, e), ACL_SUCCESS, "");
    EXPECT(aclrtMemsetAsync(dev, 1, 7, 1, waiter) == ACL_SUCCESS);
    usleep(20000);
    printf("before the other process's record runs, the stream here is %s\n", busy(waiter) ? "held" : "NOT held");
    EXPECT(busy(waiter));
    fputs("go\n", to);
    fflush(to);
    EXPECT(aclrtSynchronizeStream(waiter) == ACL_SUCCESS);
    printf("after it: %u\n", byte_at(dev));
    EXPECT(byte_at(dev) == 7);
    EXPECT(exit_code(pid) == 0);
    fclose(to);
    fclose(from);

    /* 3. Refusals. */
    aclrtEvent bad = NULL;
    expect("aclrtCreateEventExWithFlag (IPC | SYNC)", aclrtCreateEventExWithFlag(&bad, ACL_EVENT_IPC | ACL_EVENT_SYNC),
           ACL_ERROR_INVALID_PARAM, "cannot be combined");
    aclrtEvent plain = NULL;
    EXPECT(aclrtCreateEvent(&plain) == ACL_SUCCESS);
    expect("aclrtIpcGetEventHandle (no ACL_EVENT_IPC)", aclrtIpcGetEventHandle(plain, &h), ACL_ERROR_INVALID_PARAM,
           "ACL_EVENT_IPC");
    aclrtIpcEventHandle made_up;
    memset(&made_up, 0x5a, sizeof made_up);
    expect("aclrtIpcOpenEventHandle (made up)", aclrtIpcOpenEventHandle(made_up, &bad), ACL_ERROR_INVALID_PARAM,
           "not a handle");
    expect("aclrtResetEvent (IPC event)", aclrtResetEvent(e, waiter), ACL_ERROR_INVALID_PARAM, "IPC event");
    expect("aclrtDestroyEvent", aclrtDestroyEvent(e), ACL_SUCCESS, "");
    pid = spawn(hex, &to, &from);
    int code = exit_code(pid);
    printf("the other process opening a destroyed event's handle exits with %d (2: refused)\n", code);
    EXPECT(code == 2);
    fclose(to);
    fclose(from);
    EXPECT(bad == NULL);

    EXPECT(aclrtDestroyEvent(plain) == ACL_SUCCESS && aclrtFree(dev) == ACL_SUCCESS);
    EXPECT(aclrtDestroyNotify(n) == ACL_SUCCESS);
    EXPECT(aclrtDestroyStream(waiter) == ACL_SUCCESS && aclrtDestroyStream(held) == ACL_SUCCESS &&
           aclrtDestroyStream(other) == ACL_SUCCESS);
    aclrtResetDevice(0);
    aclFinalize();
    printf("%s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
