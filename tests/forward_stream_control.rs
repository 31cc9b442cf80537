//! Stream control (abort, stop, value write and wait, stream state
//! callbacks, config handles, records with a flag, timed waits) forwards to a real
//! runtime in front of which the library is loaded: a stand-in runtime that
//! answers each with its own values, behind libaclalloc in link order.

mod common;

const FAKE: &str = r#"
#include <stdint.h>
#include <stddef.h>
typedef int aclError;
static struct { void *w; size_t s; size_t f; uint32_t p; } config;
aclError aclrtCreateStream(void **s) { *s = (void *)0x5151; return 0; }
aclError aclrtStreamAbort(void *s) { return s == (void *)0x5151 ? 0 : 8; }
aclError aclrtStreamStop(void *s) { return s == (void *)0x5151 ? 0 : 8; }
aclError aclrtValueWrite(void *a, uint64_t v, uint32_t f, void *s) { (void)s; return a == (void *)0xD000 && v == 5 && f == 0 ? 0 : 8; }
aclError aclrtValueWait(void *a, uint64_t v, uint32_t f, void *s) { (void)s; return a == (void *)0xD000 && v == 6 && f == 1 ? 0 : 8; }
aclError aclrtRegStreamStateCallback(const char *n, void *cb, void *a) { (void)n; (void)cb; return a == (void *)0xA ? 0 : 8; }
void *aclrtCreateStreamConfigHandle(void) { return &config; }
aclError aclrtSetStreamConfigOpt(void *h, int attr, const void *v, size_t n) { (void)v; return h == &config && attr == 3 && n == 4 ? 0 : 8; }
aclError aclrtCreateStreamV2(void **s, const void *h) { *s = (void *)0x5252; return h == &config ? 0 : 8; }
aclError aclrtDestroyStreamConfigHandle(void *h) { return h == &config ? 0 : 8; }
aclError aclrtStreamWaitEventWithTimeout(void *s, void *e, int t) { return s == (void *)0x5151 && e == (void *)0xE7E7 && t == 5 ? 0 : 8; }
aclError aclrtRecordEventWithFlag(void *e, void *s, uint32_t f) { return e == (void *)0xE7E7 && s == (void *)0x5151 && f == 1 ? 0 : 8; }
"#;

const APP: &str = r#"
#include <stdio.h>
#include "acl/acl.h"
int main(void) {
    void *s = NULL, *s2 = NULL;
    uint32_t prio = 3;
    int ok = aclrtCreateStream(&s) == 0 && s == (void *)0x5151
        && aclrtStreamAbort(s) == 0 && aclrtStreamStop(s) == 0
        && aclrtValueWrite((void *)0xD000, 5, 0, s) == 0
        && aclrtValueWait((void *)0xD000, 6, ACL_STREAM_WAIT_VALUE_EQ, s) == 0
        && aclrtRegStreamStateCallback("x", NULL, (void *)0xA) == 0;
    aclrtStreamConfigHandle *h = aclrtCreateStreamConfigHandle();
    ok = ok && h != NULL
        && aclrtSetStreamConfigOpt(h, ACL_RT_STREAM_PRIORITY, &prio, sizeof prio) == 0
        && aclrtCreateStreamV2(&s2, h) == 0 && s2 == (void *)0x5252
        && aclrtDestroyStreamConfigHandle(h) == 0
        && aclrtRecordEventWithFlag((aclrtEvent)0xE7E7, s, ACL_EVENT_RECORD_EXTERNAL) == 0
        && aclrtStreamWaitEventWithTimeout(s, (aclrtEvent)0xE7E7, 5) == 0;
    puts(ok ? "forwarded" : "not forwarded");
    return ok ? 0 : 1;
}
"#;

#[test]
fn stream_control_reaches_the_real_runtime() {
    common::expect_forwarded("forward_stream_control", FAKE, APP);
}
