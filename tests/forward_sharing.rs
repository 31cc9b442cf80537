//! The calls that share memory and notifies between processes forward to a
//! real runtime in front of which the library is loaded: a stand-in runtime
//! that answers each with its own values, behind libaclalloc in link order.

mod common;

const FAKE: &str = r#"
#include <stdint.h>
#include <stddef.h>
typedef int aclError;
aclError aclrtMemExportToShareableHandle(void *h, int t, uint64_t f, uint64_t *out) {
    (void)t; (void)f; *out = (uint64_t)(uintptr_t)h + 1; return 0;
}
aclError aclrtMemImportFromShareableHandle(uint64_t s, int32_t d, void **h) {
    (void)d; *h = (void *)(uintptr_t)(s + 1); return 0;
}
aclError aclrtMemSetPidToShareableHandle(uint64_t s, int32_t *p, size_t n) { return s == 8 && n == 1 && *p == 5 ? 0 : 9; }
aclError aclrtDeviceGetBareTgid(int32_t *p) { *p = 4242; return 0; }
aclError aclrtIpcMemGetExportKey(void *p, size_t n, char *k, size_t l, uint64_t f) {
    (void)p; (void)n; (void)f; if (l < 4) return 9; k[0] = 'f'; k[1] = 'k'; k[2] = 0; return 0;
}
aclError aclrtIpcMemImportByKey(void **p, const char *k, uint64_t f) { (void)f; *p = (void *)0x1234; return k[0] == 'f' ? 0 : 9; }
aclError aclrtIpcMemClose(const char *k) { return k[0] == 'f' ? 0 : 9; }
aclError aclrtCreateNotify(void **n, uint64_t f) { (void)f; *n = (void *)0x7777; return 0; }
aclError aclrtGetNotifyId(void *n, uint32_t *id) { *id = n == (void *)0x7777 ? 31 : 0; return 0; }
typedef struct { char reserved[64]; } handle64;
aclError aclrtIpcGetEventHandle(void *e, handle64 *h) { (void)e; h->reserved[0] = 'E'; return 0; }
aclError aclrtIpcOpenEventHandle(handle64 h, void **e) { *e = (void *)0xE1; return h.reserved[0] == 'E' ? 0 : 9; }
aclError aclrtNotifyBatchReset(void **n, size_t num) { return num == 1 && n[0] == (void *)0x7777 ? 0 : 9; }
aclError aclrtIpcMemSetAttr(const char *k, int t, uint64_t a) { return k[0] == 'f' && t == 0 && a == 1 ? 0 : 9; }
"#;

const APP: &str = r#"
#include <stdio.h>
#include "acl/acl.h"
int main(void) {
    uint64_t shared = 0;
    aclrtDrvMemHandle h = NULL;
    int32_t pid = 0, allowed = 5;
    char key[65];
    void *p = NULL;
    aclrtNotify n = NULL;
    uint32_t id = 0;
    aclrtIpcEventHandle eh;
    aclrtEvent opened = NULL;
    int ok = aclrtMemExportToShareableHandle((aclrtDrvMemHandle)7, ACL_MEM_HANDLE_TYPE_NONE, 0, &shared) == 0
        && shared == 8
        && aclrtMemImportFromShareableHandle(shared, 0, &h) == 0 && h == (aclrtDrvMemHandle)9
        && aclrtMemSetPidToShareableHandle(shared, &allowed, 1) == 0
        && aclrtDeviceGetBareTgid(&pid) == 0 && pid == 4242
        && aclrtIpcMemGetExportKey((void *)0x10, 8, key, sizeof key, 0) == 0 && key[0] == 'f'
        && aclrtIpcMemImportByKey(&p, key, 0) == 0 && p == (void *)0x1234
        && aclrtIpcMemClose(key) == 0
        && aclrtCreateNotify(&n, 0) == 0 && n == (aclrtNotify)0x7777
        && aclrtGetNotifyId(n, &id) == 0 && id == 31
        && aclrtIpcGetEventHandle((aclrtEvent)0x5, &eh) == 0
        && aclrtIpcOpenEventHandle(eh, &opened) == 0 && opened == (aclrtEvent)0xE1
        && aclrtNotifyBatchReset(&n, 1) == 0
        && aclrtIpcMemSetAttr(key, ACL_RT_IPC_MEM_ATTR_ACCESS_LINK, ACL_RT_IPC_MEM_ATTR_ACCESS_LINK_HCCS) == 0;
    puts(ok ? "forwarded" : "not forwarded");
    return ok ? 0 : 1;
}
"#;

#[test]
fn the_sharing_calls_reach_the_real_runtime() {
    common::expect_forwarded("forward_sharing", FAKE, APP);
}
