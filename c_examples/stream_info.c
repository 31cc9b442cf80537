/*
 * What a stream says about itself: whether its work has run, the priority
 * and flags it was made with, its id, the priority range, and the failure
 * mode (checked).
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "acl/acl.h"
#include "aclalloc.h"
#include "common/check.h"
#include "common/expect.h"

static void sleep_20ms(void *ws, size_t size, void *data) {
    (void)ws;
    (void)size;
    (void)data;
    struct timespec t = {0, 20000000L};
    nanosleep(&t, NULL);
}

static pthread_t main_thread;
static int host_func_ran;
static void host_func(void *args) {
    /* On the stream's own thread, in order. */
    EXPECT(!pthread_equal(pthread_self(), main_thread));
    host_func_ran = *(int *)args;
}

static pthread_t reporter;
static volatile int callbacks_ran;
static volatile int subscribed;
static volatile int stop_reporting;
static void callback(void *data) {
    EXPECT(pthread_equal(pthread_self(), reporter)); /* on the subscribed thread */
    callbacks_ran += *(int *)data;
}
static void *report_loop(void *arg) {
    (void)arg;
    while (!subscribed) {
        struct timespec t = {0, 1000000L};
        nanosleep(&t, NULL);
    }
    while (!stop_reporting) {
        aclError rc = aclrtProcessReport(50);
        if (rc != ACL_SUCCESS && rc != ACL_ERROR_RT_REPORT_TIMEOUT) {
            fprintf(stderr, "aclrtProcessReport: %d\n", rc);
            failures++;
            break;
        }
    }
    return NULL;
}

static int callbacks(aclrtStream stream) {
    int seven = 7, one = 1;
    main_thread = pthread_self();
    CHECK(aclrtLaunchHostFunc(stream, host_func, &seven));
    CHECK(aclrtSynchronizeStream(stream));
    EXPECT(host_func_ran == 7);
    expect("aclrtLaunchCallback(no subscriber)",
           aclrtLaunchCallback(callback, &one, ACL_CALLBACK_BLOCK, stream), ACL_ERROR_INVALID_PARAM,
           "subscribed");
    expect("aclrtProcessReport(not subscribed)", aclrtProcessReport(10), ACL_ERROR_INVALID_PARAM,
           "not subscribed");
    if (pthread_create(&reporter, NULL, report_loop, NULL) != 0) return 1;
    CHECK(aclrtSubscribeReport((uint64_t)reporter, stream));
    subscribed = 1;
    CHECK(aclrtLaunchCallback(callback, &one, ACL_CALLBACK_BLOCK, stream));
    CHECK(aclrtLaunchCallback(callback, &seven, ACL_CALLBACK_NO_BLOCK, stream));
    CHECK(aclrtSynchronizeStream(stream));
    EXPECT(callbacks_ran >= 1); /* the blocking one ran before the stream went on */
    while (callbacks_ran != 8) {
        struct timespec t = {0, 1000000L};
        nanosleep(&t, NULL);
    }
    expect("aclrtLaunchCallback(blockType 2)", aclrtLaunchCallback(callback, &one, 2, stream),
           ACL_ERROR_INVALID_PARAM, "blockType");
    stop_reporting = 1;
    pthread_join(reporter, NULL);
    CHECK(aclrtUnSubscribeReport((uint64_t)reporter, stream));
    expect("aclrtUnSubscribeReport(again)", aclrtUnSubscribeReport((uint64_t)reporter, stream),
           ACL_ERROR_INVALID_PARAM, "not subscribed");
    return 0;
}

int main(void) {
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtStream plain = NULL, config = NULL;
    CHECK(aclrtCreateStream(&plain));
    CHECK(aclrtCreateStreamWithConfig(&config, 3, ACL_STREAM_FAST_LAUNCH));

    aclrtStreamStatus status = ACL_STREAM_STATUS_NOT_READY;
    CHECK(aclrtStreamQuery(plain, &status));
    EXPECT(status == ACL_STREAM_STATUS_COMPLETE);
    CHECK(aclallocLaunchKernel(plain, 0, sleep_20ms, NULL));
    CHECK(aclrtStreamQuery(plain, &status));
    EXPECT(status == ACL_STREAM_STATUS_NOT_READY);
    CHECK(aclrtSynchronizeStream(plain));
    CHECK(aclrtStreamQuery(plain, &status));
    EXPECT(status == ACL_STREAM_STATUS_COMPLETE);
    CHECK(aclrtStreamQuery(NULL, &status)); /* the default stream */
    EXPECT(status == ACL_STREAM_STATUS_COMPLETE);

    uint32_t priority = 99, flags = 99;
    CHECK(aclrtStreamGetPriority(config, &priority));
    CHECK(aclrtStreamGetFlags(config, &flags));
    EXPECT(priority == 3 && flags == ACL_STREAM_FAST_LAUNCH);
    CHECK(aclrtStreamGetPriority(plain, &priority));
    CHECK(aclrtStreamGetFlags(plain, &flags));
    EXPECT(priority == 0 && flags == 0);
    int32_t id_a = -1, id_b = -1;
    CHECK(aclrtStreamGetId(plain, &id_a));
    CHECK(aclrtStreamGetId(config, &id_b));
    EXPECT(id_a >= 0 && id_b >= 0 && id_a != id_b);
    int32_t least = -1, greatest = -1;
    CHECK(aclrtDeviceGetStreamPriorityRange(&least, &greatest));
    EXPECT(least == 7 && greatest == 0);

    CHECK(aclrtSetStreamFailureMode(plain, ACL_STOP_ON_FAILURE));
    CHECK(aclrtSetStreamFailureMode(plain, ACL_CONTINUE_ON_FAILURE));
    expect("aclrtSetStreamFailureMode(mode 2)", aclrtSetStreamFailureMode(plain, 2),
           ACL_ERROR_INVALID_PARAM, "mode");
    expect("aclrtStreamQuery(status NULL)", aclrtStreamQuery(plain, NULL), ACL_ERROR_INVALID_PARAM,
           "status cannot be a NULL pointer");
    CHECK(aclrtDestroyStream(config));
    expect("aclrtStreamGetPriority(destroyed)", aclrtStreamGetPriority(config, &priority),
           ACL_ERROR_INVALID_PARAM, "not a live stream");
    expect("aclrtStreamGetId(destroyed)", aclrtStreamGetId(config, &id_b), ACL_ERROR_INVALID_PARAM,
           "not a live stream");

    if (callbacks(plain) != 0) return 1;
    CHECK(aclrtDestroyStream(plain));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("%s\n", failures == 0 ? "stream info: ok" : "stream info: FAILED");
    return failures == 0 ? 0 : 1;
}
