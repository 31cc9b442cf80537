//! The host memory, event, stream and device queries forward to a real
//! runtime in front of which the library is loaded: a stand-in runtime that
//! answers each with its own values, behind libaclalloc in link order.

mod common;

const FAKE: &str = r#"
#include <stdint.h>
#include <stddef.h>
typedef int aclError;
static char host_block[64];
aclError aclrtCreateStream(void **s) { *s = (void *)0x5151; return 0; }
aclError aclrtMallocHost(void **p, size_t n) { (void)n; *p = host_block; return 0; }
aclError aclrtFreeHost(void *p) { return p == host_block ? 0 : 7; }
aclError aclrtCreateEvent(void **e) { *e = (void *)0xE7E7; return 0; }
aclError aclrtRecordEvent(void *e, void *s) { return e == (void *)0xE7E7 && s == (void *)0x5151 ? 0 : 8; }
aclError aclrtQueryEventStatus(void *e, int *st) { (void)e; *st = 42; return 0; }
aclError aclrtStreamQuery(void *s, int *st) { (void)s; *st = 43; return 0; }
aclError aclrtGetRunMode(int *m) { *m = 0; return 0; }
const char *aclrtGetSocName(void) { return "FakeSoC"; }
aclError aclrtGetLastError(int level) { (void)level; return 1234; }
"#;

const APP: &str = r#"
#include <stdio.h>
#include <string.h>
#include "acl/acl.h"
int main(void) {
    void *s = NULL, *h = NULL;
    aclrtEvent e = NULL;
    aclrtEventRecordedStatus st = 0;
    aclrtStreamStatus ss = 0;
    aclrtRunMode mode = ACL_HOST;
    int ok = aclrtCreateStream(&s) == 0 && s == (void *)0x5151
        && aclrtMallocHost(&h, 64) == 0 && aclrtFreeHost(h) == 0
        && aclrtCreateEvent(&e) == 0 && e == (void *)0xE7E7
        && aclrtRecordEvent(e, s) == 0
        && aclrtQueryEventStatus(e, &st) == 0 && st == 42
        && aclrtStreamQuery(s, &ss) == 0 && ss == 43
        && aclrtGetRunMode(&mode) == 0 && mode == ACL_DEVICE
        && strcmp(aclrtGetSocName(), "FakeSoC") == 0
        && aclrtGetLastError(ACL_RT_THREAD_LEVEL) == 1234;
    puts(ok ? "forwarded" : "not forwarded");
    return ok ? 0 : 1;
}
"#;

#[test]
fn the_new_calls_reach_the_real_runtime() {
    common::expect_forwarded("forward_new_calls", FAKE, APP);
}
