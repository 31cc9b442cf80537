/*
 * Events: a record is a marker in a stream's queue, a stream waiting on an
 * event runs nothing after the wait before that marker has run, and the host
 * can query, wait with or without a timeout, and time the markers.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "acl/acl.h"
#include "aclalloc.h"
#include "common/check.h"
#include "common/expect.h"

static void sleep_ms(void *ws, size_t size, void *data) {
    (void)ws;
    (void)size;
    struct timespec t = {0, (long)(intptr_t)data * 1000000L};
    nanosleep(&t, NULL);
}

static int order[2];
static int next_slot;
static void note(void *ws, size_t size, void *data) {
    (void)ws;
    (void)size;
    order[next_slot++] = (int)(intptr_t)data;
}

int main(void) {
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtStream a = NULL, b = NULL;
    CHECK(aclrtCreateStream(&a));
    CHECK(aclrtCreateStream(&b));
    aclrtEvent start = NULL, done = NULL;
    CHECK(aclrtCreateEvent(&start));
    CHECK(aclrtCreateEventWithFlag(&done, ACL_EVENT_SYNC | ACL_EVENT_TIME_LINE));

    aclrtEventRecordedStatus status = ACL_EVENT_RECORDED_STATUS_NOT_READY;
    CHECK(aclrtQueryEventStatus(done, &status));
    EXPECT(status == ACL_EVENT_RECORDED_STATUS_NOT_READY); /* never recorded */
    aclrtEvent ex = NULL;
    CHECK(aclrtCreateEventExWithFlag(&ex, ACL_EVENT_SYNC));
    CHECK(aclrtQueryEventStatus(ex, &status));
    EXPECT(status == ACL_EVENT_RECORDED_STATUS_COMPLETE); /* Ex: complete until recorded */
    expect("aclrtResetEvent(Ex event)", aclrtResetEvent(ex, a), ACL_ERROR_INVALID_PARAM,
           "aclrtCreateEventExWithFlag");
    CHECK(aclrtDestroyEvent(ex));

    /* Stream b waits for a's marker: b's note runs after a's. */
    CHECK(aclrtRecordEvent(start, a));
    CHECK(aclallocLaunchKernel(a, 0, sleep_ms, (void *)(intptr_t)30));
    CHECK(aclallocLaunchKernel(a, 0, note, (void *)(intptr_t)1));
    CHECK(aclrtRecordEvent(done, a));
    CHECK(aclrtStreamWaitEvent(b, done));
    CHECK(aclallocLaunchKernel(b, 0, note, (void *)(intptr_t)2));
    CHECK(aclrtQueryEventStatus(done, &status));
    EXPECT(status == ACL_EVENT_RECORDED_STATUS_NOT_READY);
    aclrtEventWaitStatus wait_status = ACL_EVENT_WAIT_STATUS_COMPLETE;
    CHECK(aclrtQueryEventWaitStatus(done, &wait_status));
    EXPECT(wait_status == ACL_EVENT_WAIT_STATUS_NOT_READY);
    CHECK(aclrtSynchronizeStream(b));
    EXPECT(order[0] == 1 && order[1] == 2);
    CHECK(aclrtQueryEventStatus(done, &status));
    EXPECT(status == ACL_EVENT_RECORDED_STATUS_COMPLETE);
    CHECK(aclrtQueryEventWaitStatus(done, &wait_status));
    EXPECT(wait_status == ACL_EVENT_WAIT_STATUS_COMPLETE);

    float ms = 0;
    CHECK(aclrtEventElapsedTime(&ms, start, done));
    EXPECT(ms >= 25.0f);
    uint64_t t0 = 0, t1 = 0;
    CHECK(aclrtEventGetTimestamp(start, &t0));
    CHECK(aclrtEventGetTimestamp(done, &t1));
    EXPECT(t1 >= t0 + 25000);

    /* The host waits: with a timeout that runs out, then for as long as it takes. */
    CHECK(aclallocLaunchKernel(a, 0, sleep_ms, (void *)(intptr_t)50));
    CHECK(aclrtRecordEvent(done, a));
    expect("aclrtSynchronizeEventWithTimeout(1 ms)", aclrtSynchronizeEventWithTimeout(done, 1),
           ACL_ERROR_RT_EVENT_SYNC_TIMEOUT, "did not complete");
    expect("aclrtEventGetTimestamp(not run yet)", aclrtEventGetTimestamp(done, &t1),
           ACL_ERROR_RT_EVENT_NOT_COMPLETE, "has not completed");
    expect("aclrtSynchronizeEvent", aclrtSynchronizeEvent(done), ACL_SUCCESS, NULL);
    expect("aclrtSynchronizeEventWithTimeout(-1)", aclrtSynchronizeEventWithTimeout(done, -1),
           ACL_SUCCESS, NULL);
    CHECK(aclrtResetEvent(done, a));
    CHECK(aclrtSynchronizeStream(a));
    expect("aclrtEventGetTimestamp(after a reset)", aclrtEventGetTimestamp(done, &t1),
           ACL_ERROR_RT_EVENT_NOT_COMPLETE, "has not completed");
    CHECK(aclrtQueryEventStatus(done, &status));
    EXPECT(status == ACL_EVENT_RECORDED_STATUS_NOT_READY); /* reset: as never recorded */

    /* Creating an event needs a context; the handles are checked. */
    aclrtEvent ev = NULL;
    expect("aclrtCreateEvent(NULL)", aclrtCreateEvent(NULL), ACL_ERROR_INVALID_PARAM,
           "event cannot be a NULL pointer");
    expect("aclrtCreateEventWithFlag(0x100)", aclrtCreateEventWithFlag(&ev, 0x100),
           ACL_ERROR_INVALID_PARAM, "ACL_EVENT_");
    expect("aclrtSynchronizeEventWithTimeout(-2)", aclrtSynchronizeEventWithTimeout(done, -2),
           ACL_ERROR_INVALID_PARAM, "timeout");
    CHECK(aclrtCreateEventExWithFlag(&ev, ACL_EVENT_SYNC));
    CHECK(aclrtDestroyEvent(ev));
    expect("aclrtRecordEvent(destroyed event)", aclrtRecordEvent(ev, a), ACL_ERROR_INVALID_PARAM,
           "not a live event");
    expect("aclrtStreamWaitEvent(destroyed event)", aclrtStreamWaitEvent(b, ev),
           ACL_ERROR_INVALID_PARAM, "not a live event");
    expect("aclrtDestroyEvent(again)", aclrtDestroyEvent(ev), ACL_ERROR_INVALID_PARAM,
           "not a live event");
    int local = 0;
    expect("aclrtSynchronizeEvent(stack)", aclrtSynchronizeEvent(&local), ACL_ERROR_INVALID_PARAM,
           "not a live event");

    /* An event destroyed with its marker still queued: its waiters go on. */
    CHECK(aclallocLaunchKernel(a, 0, sleep_ms, (void *)(intptr_t)20));
    CHECK(aclrtRecordEvent(start, a));
    CHECK(aclrtStreamWaitEvent(b, start));
    CHECK(aclrtDestroyEvent(start));
    CHECK(aclrtSynchronizeStream(b));

    CHECK(aclrtDestroyEvent(done));
    CHECK(aclrtDestroyStream(a));
    CHECK(aclrtDestroyStream(b));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("%s\n", failures == 0 ? "events: ok" : "events: FAILED");
    return failures == 0 ? 0 : 1;
}
