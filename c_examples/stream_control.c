/*
 * Stream control: a stream made from a config handle, stream state
 * callbacks around creation and destruction, one stream holding on a device
 * word until another writes it (aclrtValueWait / aclrtValueWrite),
 * aclrtStreamAbort dropping queued work while releasing what waits on it,
 * aclrtStreamStop and aclrtStreamAbort interrupting a long host function
 * (aclallocCurrentTaskCancelled), and a kernel that fails (aclallocFailCurrentTask) under each failure mode.
 */
#include <stdint.h>
#include <unistd.h>

#include "acl/acl.h"
#include "aclalloc.h"
#include "common/check.h"
#include "common/expect.h"

static int created, destroyed;

static void add_one(void *args) { (*(int *)args)++; }
/* Runs until its stream is stopped or aborted (at most about 10 s), as a
 * long kernel; counts the times it saw that. */
static void long_task(void *args) {
    for (int i = 0; i < 10000; i++) {
        if (aclallocCurrentTaskCancelled()) {
            (*(int *)args)++;
            return;
        }
        usleep(1000);
    }
}
static void trap(void *ws, size_t size, void *data) {
    (void)ws;
    (void)size;
    (void)data;
    aclallocFailCurrentTask(507035); /* a vector core exception on CANN */
}
static aclrtStream last_created;
static void on_state(aclrtStream stream, aclrtStreamState state, void *args) {
    EXPECT(args == &created);
    if (state == ACL_RT_STREAM_STATE_CREATE_POST) {
        created++;
        last_created = stream;
    } else if (state == ACL_RT_STREAM_STATE_DESTROY_PRE) {
        destroyed++;
    }
}

int main(void) {
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    CHECK(aclrtRegStreamStateCallback("stream_control", on_state, &created));
    expect("aclrtRegStreamStateCallback(same name)",
           aclrtRegStreamStateCallback("stream_control", on_state, &created), ACL_ERROR_INVALID_PARAM,
           "already registered");

    /* A stream from a config handle: its priority and flags. */
    aclrtStreamConfigHandle *config = aclrtCreateStreamConfigHandle();
    EXPECT(config != NULL);
    uint32_t priority = 3, flags = ACL_STREAM_FAST_LAUNCH;
    CHECK(aclrtSetStreamConfigOpt(config, ACL_RT_STREAM_PRIORITY, &priority, sizeof priority));
    CHECK(aclrtSetStreamConfigOpt(config, ACL_RT_STREAM_FLAG, &flags, sizeof flags));
    expect("aclrtSetStreamConfigOpt(valueSize 2)",
           aclrtSetStreamConfigOpt(config, ACL_RT_STREAM_PRIORITY, &priority, 2), ACL_ERROR_INVALID_PARAM,
           "valueSize");
    EXPECT(config->priority == 3 && config->flag == ACL_STREAM_FAST_LAUNCH);
    aclrtStream a = NULL, b = NULL;
    CHECK(aclrtCreateStreamV2(&a, config));
    CHECK(aclrtDestroyStreamConfigHandle(config));
    expect("aclrtDestroyStreamConfigHandle(again)", aclrtDestroyStreamConfigHandle(config),
           ACL_ERROR_INVALID_PARAM, "not a live handle");
    uint32_t got_priority = 0, got_flags = 0;
    CHECK(aclrtStreamGetPriority(a, &got_priority));
    CHECK(aclrtStreamGetFlags(a, &got_flags));
    EXPECT(got_priority == 3 && got_flags == ACL_STREAM_FAST_LAUNCH);
    CHECK(aclrtCreateStream(&b));
    EXPECT(created == 2 && last_created == b);

    /* b holds on the word until a writes 7; b's own write comes after. */
    uint64_t *word = NULL, host = 0;
    CHECK(aclrtMalloc((void **)&word, sizeof *word, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMemset(word, sizeof *word, 0, sizeof *word));
    CHECK(aclrtValueWait(word, 7, ACL_STREAM_WAIT_VALUE_EQ, b));
    CHECK(aclrtValueWrite(word, 1, 0, b));
    aclrtStreamStatus status = ACL_STREAM_STATUS_COMPLETE;
    CHECK(aclrtStreamQuery(b, &status));
    EXPECT(status == ACL_STREAM_STATUS_NOT_READY);
    CHECK(aclrtValueWrite(word, 7, 0, a));
    CHECK(aclrtSynchronizeStream(b));
    CHECK(aclrtMemcpy(&host, sizeof host, word, sizeof host, ACL_MEMCPY_DEVICE_TO_HOST));
    EXPECT(host == 1);
    expect("aclrtValueWait(flag 4)", aclrtValueWait(word, 1, 4, b), ACL_ERROR_INVALID_PARAM, "flag");
    expect("aclrtValueWrite(flag 1)", aclrtValueWrite(word, 1, 1, b), ACL_ERROR_INVALID_PARAM, "reserved");

    /* Abort: b holds on a word nobody writes yet; what is queued behind the
     * hold is dropped, and a stream waiting on an event recorded there is
     * released. */
    aclrtEvent event = NULL;
    CHECK(aclrtCreateEvent(&event));
    CHECK(aclrtValueWait(word, 2, ACL_STREAM_WAIT_VALUE_GEQ, b));
    CHECK(aclrtValueWrite(word, 100, 0, b));
    CHECK(aclrtRecordEventWithFlag(event, b, ACL_EVENT_RECORD_DEFAULT));
    CHECK(aclrtStreamWaitEvent(a, event));
    CHECK(aclrtStreamAbort(b));
    CHECK(aclrtSynchronizeStream(a));
    /* The interrupted wait is a kernel task: it failed, reported once. */
    EXPECT(aclrtSynchronizeStream(b) == 507035);
    CHECK(aclrtSynchronizeStream(b));
    CHECK(aclrtMemcpy(&host, sizeof host, word, sizeof host, ACL_MEMCPY_DEVICE_TO_HOST));
    EXPECT(host == 1); /* the dropped write of 100 never ran */
    CHECK(aclrtStreamStop(b)); /* idle: nothing to stop */
    CHECK(aclrtSynchronizeStream(b));
    expect("aclrtStreamAbort(NULL)", aclrtStreamAbort(NULL), ACL_ERROR_INVALID_PARAM, "default stream");
    expect("aclrtStreamStop(NULL)", aclrtStreamStop(NULL), ACL_ERROR_INVALID_PARAM, "default stream");

    /* Stop: the long host function learns it and ends early; its task
     * fails with ACL_ERROR_RT_INTERNAL_ERROR; queued work is kept. */
    int ran = 0, cancelled = 0;
    EXPECT(aclallocCurrentTaskCancelled() == 0); /* outside a task */
    CHECK(aclrtLaunchHostFunc(b, long_task, &cancelled));
    CHECK(aclrtLaunchHostFunc(b, add_one, &ran));
    CHECK(aclrtStreamStop(b));
    EXPECT(aclrtSynchronizeStream(b) == 507000);
    EXPECT(ran == 1 && cancelled <= 1);
    CHECK(aclrtSynchronizeStream(b));
    /* Abort: the long one fails as a killed kernel does; the host function
     * queued behind it never runs (its job is freed). */
    CHECK(aclrtLaunchHostFunc(b, long_task, &cancelled));
    CHECK(aclrtLaunchHostFunc(b, add_one, &ran));
    CHECK(aclrtStreamAbort(b));
    EXPECT(aclrtSynchronizeStream(b) == 507035);
    EXPECT(ran == 1);
    CHECK(aclrtLaunchHostFunc(b, add_one, &ran)); /* later launches run */
    CHECK(aclrtSynchronizeStream(b));
    EXPECT(ran == 2);

    /* A failing kernel: the next synchronize says so, once; with
     * ACL_STOP_ON_FAILURE what was queued behind it does not run. */
    for (int stop = 0; stop <= 1; stop++) {
        int count = 0;
        CHECK(aclrtSetStreamFailureMode(a, stop ? ACL_STOP_ON_FAILURE : ACL_CONTINUE_ON_FAILURE));
        CHECK(aclrtLaunchHostFunc(a, add_one, &count));
        CHECK(aclallocLaunchKernel(a, 0, trap, NULL));
        CHECK(aclrtLaunchHostFunc(a, add_one, &count));
        EXPECT(aclrtSynchronizeStream(a) == 507035);
        EXPECT(count == (stop ? 1 : 2));
        CHECK(aclrtSynchronizeStream(a));
    }
    /* Calls that wait for every stream only to order themselves after its
     * work (aclrtFree, a synchronous copy) leave a failure for the stream's
     * synchronize; the device's synchronize reports it, once. */
    CHECK(aclrtSetStreamFailureMode(a, ACL_CONTINUE_ON_FAILURE));
    void *scratch = NULL;
    char bytes[64] = {0};
    CHECK(aclrtMalloc(&scratch, sizeof bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclallocLaunchKernel(a, 0, trap, NULL));
    CHECK(aclrtMemcpy(scratch, sizeof bytes, bytes, sizeof bytes, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK(aclrtFree(scratch));
    EXPECT(aclrtSynchronizeStream(a) == 507035);
    CHECK(aclrtSynchronizeStream(a));
    CHECK(aclallocLaunchKernel(a, 0, trap, NULL));
    EXPECT(aclrtSynchronizeDevice() == 507035);
    CHECK(aclrtSynchronizeDevice());
    CHECK(aclrtSynchronizeStream(a));
    expect("aclallocFailCurrentTask(outside a task)", aclallocFailCurrentTask(507035),
           ACL_ERROR_INVALID_PARAM, "running on a stream");

    CHECK(aclrtDestroyEvent(event));
    CHECK(aclrtFree(word));
    CHECK(aclrtDestroyStream(a));
    CHECK(aclrtDestroyStreamForce(b));
    EXPECT(destroyed == 2);
    CHECK(aclrtRegStreamStateCallback("stream_control", NULL, NULL));
    aclrtStream c = NULL;
    CHECK(aclrtCreateStream(&c));
    CHECK(aclrtDestroyStream(c));
    EXPECT(created == 2 && destroyed == 2); /* unregistered: not called */
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("%s\n", failures == 0 ? "stream control: ok" : "stream control: FAILED");
    return failures == 0 ? 0 : 1;
}
