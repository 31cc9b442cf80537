/*
 * What a stream says about itself: whether its work has run, the priority
 * and flags it was made with, its id, the priority range, and the failure
 * mode (checked; the host's kernels cannot fail).
 */
#define _POSIX_C_SOURCE 200809L
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

    CHECK(aclrtDestroyStream(plain));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("%s\n", failures == 0 ? "stream info: ok" : "stream info: FAILED");
    return failures == 0 ? 0 : 1;
}
