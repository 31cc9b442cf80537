/*
 * Memory shared between processes on the host runtime:
 *
 *   1. physical memory exported with aclrtMemExportToShareableHandle: a
 *      process whose pid is on the whitelist imports it, maps it, reads what
 *      this process wrote and writes back; one that is not is refused with
 *      ACL_ERROR_RT_NO_PERMISSION;
 *   2. aclrtMalloc memory exported by key (aclrtIpcMemGetExportKey) without
 *      pid validation: another process imports it, copies from it with
 *      aclrtMemcpy and writes back, then both close the key;
 *   3. a made-up handle and a made-up key are refused.
 *
 * The other processes are this program again (argv[1] names the role),
 * started with fork() and exec().
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define EXPECT_WHAT_WIDTH 44
#include "acl/acl.h"
#include "common/expect.h"

#define GRANULE ((size_t)2 << 20)

enum { CHILD_OK = 0, CHILD_WRONG = 3, CHILD_REFUSED = 2, CHILD_FAILED = 4 };

/* This program's path, to start it again: argv[0] as the test runs it
 * (under valgrind /proc/self/exe is valgrind's tool, which refuses to run). */
static const char *self_path = "/proc/self/exe";

static aclrtPhysicalMemProp prop(void) {
    aclrtPhysicalMemProp p;
    memset(&p, 0, sizeof p);
    p.handleType = ACL_MEM_HANDLE_TYPE_NONE;
    p.allocationType = ACL_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = 0;
    p.memAttr = ACL_HBM_MEM_NORMAL;
    return p;
}

/* The importer of a shareable handle: 123 at word 0, writes 77 at word 1. */
static int import_physical(uint64_t shared) {
    aclrtDrvMemHandle h = NULL;
    void *va = NULL;
    aclError rc = aclrtMemImportFromShareableHandle(shared, 0, &h);
    if (rc == ACL_ERROR_RT_NO_PERMISSION) return CHILD_REFUSED;
    if (rc != ACL_SUCCESS) return CHILD_FAILED;
    if (aclrtReserveMemAddress(&va, GRANULE, 0, NULL, 0) != ACL_SUCCESS ||
        aclrtMapMem(va, GRANULE, 0, h, 0) != ACL_SUCCESS)
        return CHILD_FAILED;
    volatile uint64_t *words = va;
    int result = words[0] == 123 ? CHILD_OK : CHILD_WRONG;
    words[1] = 77;
    if (aclrtUnmapMem(va) != ACL_SUCCESS || aclrtReleaseMemAddress(va) != ACL_SUCCESS ||
        aclrtFreePhysical(h) != ACL_SUCCESS)
        return CHILD_FAILED;
    return result;
}

/* The importer of an IPC key: copies word 0 out, writes 77 at word 1. */
static int import_ipc(const char *key) {
    void *dev = NULL;
    uint64_t word = 0;
    aclError rc = aclrtIpcMemImportByKey(&dev, key, ACL_RT_IPC_MEM_IMPORT_FLAG_DEFAULT);
    if (rc == ACL_ERROR_RT_NO_PERMISSION) return CHILD_REFUSED;
    if (rc != ACL_SUCCESS) return CHILD_FAILED;
    if (aclrtMemcpy(&word, sizeof word, dev, sizeof word, ACL_MEMCPY_DEVICE_TO_HOST) != ACL_SUCCESS)
        return CHILD_FAILED;
    ((volatile uint64_t *)dev)[1] = 77;
    if (aclrtIpcMemClose(key) != ACL_SUCCESS) return CHILD_FAILED;
    return word == 123 ? CHILD_OK : CHILD_WRONG;
}

/* Starts this program as `role arg`; it waits for a byte on `*go` first. */
static pid_t start(const char *role, const char *arg, int *go) {
    int fds[2];
    if (pipe(fds) != 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        char byte;
        close(fds[1]);
        if (read(fds[0], &byte, 1) != 1) _exit(CHILD_FAILED);
        execl(self_path, "sharing", role, arg, (char *)NULL);
        _exit(CHILD_FAILED);
    }
    close(fds[0]);
    *go = fds[1];
    return pid;
}

static int finish(pid_t pid, int go) {
    int status = 0;
    if (write(go, "g", 1) != 1) return -1;
    close(go);
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
    return WEXITSTATUS(status);
}

static void physical_sharing(void) {
    aclrtPhysicalMemProp p = prop();
    aclrtDrvMemHandle h = NULL;
    void *va = NULL;
    uint64_t shared = 0;
    char arg[32];
    int go_allowed, go_other;
    EXPECT(aclrtMallocPhysical(&h, GRANULE, &p, 0) == ACL_SUCCESS);
    EXPECT(aclrtReserveMemAddress(&va, GRANULE, 0, NULL, 0) == ACL_SUCCESS);
    EXPECT(aclrtMapMem(va, GRANULE, 0, h, 0) == ACL_SUCCESS);
    volatile uint64_t *words = va;
    words[0] = 123;
    expect("aclrtMemExportToShareableHandle",
           aclrtMemExportToShareableHandle(h, ACL_MEM_HANDLE_TYPE_NONE, ACL_RT_VMM_EXPORT_FLAG_DEFAULT, &shared),
           ACL_SUCCESS, "");
    expect("aclrtMemExportToShareableHandle (again)",
           aclrtMemExportToShareableHandle(h, ACL_MEM_HANDLE_TYPE_NONE, 0, &shared), ACL_ERROR_INVALID_PARAM,
           "already exported");
    snprintf(arg, sizeof arg, "%llu", (unsigned long long)shared);
    pid_t allowed = start("physical", arg, &go_allowed);
    pid_t other = start("physical", arg, &go_other);
    int32_t pid = (int32_t)allowed;
    expect("aclrtMemSetPidToShareableHandle", aclrtMemSetPidToShareableHandle(shared, &pid, 1), ACL_SUCCESS, "");
    int got = finish(allowed, go_allowed);
    printf("whitelisted importer exit %d, word 1 = %llu\n", got, (unsigned long long)words[1]);
    EXPECT(got == CHILD_OK && words[1] == 77);
    got = finish(other, go_other);
    printf("importer not whitelisted exit %d (refused: %d)\n", got, CHILD_REFUSED);
    EXPECT(got == CHILD_REFUSED);
    EXPECT(aclrtUnmapMem(va) == ACL_SUCCESS);
    EXPECT(aclrtReleaseMemAddress(va) == ACL_SUCCESS);
    EXPECT(aclrtFreePhysical(h) == ACL_SUCCESS);
}

static void ipc_memory(void) {
    void *dev = NULL;
    char key[65];
    int go;
    EXPECT(aclrtMalloc(&dev, 4096, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS);
    uint64_t value = 123;
    EXPECT(aclrtMemcpy(dev, 8, &value, 8, ACL_MEMCPY_HOST_TO_DEVICE) == ACL_SUCCESS);
    expect("aclrtIpcMemGetExportKey",
           aclrtIpcMemGetExportKey(dev, 8, key, sizeof key, ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION),
           ACL_SUCCESS, "");
    pid_t child = start("ipc", key, &go);
    int got = finish(child, go);
    uint64_t back = 0;
    EXPECT(aclrtMemcpy(&back, 8, (char *)dev + 8, 8, ACL_MEMCPY_DEVICE_TO_HOST) == ACL_SUCCESS);
    printf("IPC importer exit %d, word 1 = %llu\n", got, (unsigned long long)back);
    EXPECT(got == CHILD_OK && back == 77);
    expect("aclrtIpcMemClose (exporter)", aclrtIpcMemClose(key), ACL_SUCCESS, "");
    expect("aclrtIpcMemClose (closed)", aclrtIpcMemClose(key), ACL_ERROR_INVALID_PARAM, "neither imported");
    EXPECT(aclrtFree(dev) == ACL_SUCCESS);
}

static void made_up(void) {
    aclrtDrvMemHandle h = NULL;
    void *dev = NULL;
    expect("aclrtMemImportFromShareableHandle (made up)", aclrtMemImportFromShareableHandle(12345, 0, &h),
           ACL_ERROR_INVALID_PARAM, "names no live export");
    expect("aclrtIpcMemImportByKey (made up)", aclrtIpcMemImportByKey(&dev, "aclalloc-0000040000000001", 0),
           ACL_ERROR_INVALID_PARAM, "names no live export");
    expect("aclrtIpcMemImportByKey (NULL key)", aclrtIpcMemImportByKey(&dev, NULL, 0), ACL_ERROR_INVALID_PARAM,
           "key");
    EXPECT(h == NULL && dev == NULL);
}

int main(int argc, char **argv) {
    if (strchr(argv[0], '/') != NULL) self_path = argv[0];
    if (aclInit(NULL) != ACL_SUCCESS || aclrtSetDevice(0) != ACL_SUCCESS) return CHILD_FAILED;
    if (argc == 3 && strcmp(argv[1], "physical") == 0)
        return import_physical(strtoull(argv[2], NULL, 10));
    if (argc == 3 && strcmp(argv[1], "ipc") == 0) return import_ipc(argv[2]);
    physical_sharing();
    ipc_memory();
    made_up();
    aclrtResetDevice(0);
    aclFinalize();
    printf("%s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
