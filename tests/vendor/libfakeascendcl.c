/*
 * A stand-in for CANN's libascendcl.so, for the interposition tests: the
 * allocator API with CANN's semantics in its own table, streams, and an
 * executor that takes operator workspaces from the stream's allocator the way
 * CANN's does. One executor path reads the internal table (filled by
 * aclrtAllocatorRegister); the other calls the exported
 * aclrtAllocatorGetByStream, resolved dynamically, so that a library preloaded
 * in front of this one answers it.
 *
 * CANN's semantics kept here: a descriptor is a plain struct the runtime
 * allocates; registration copies it; GetByStream hands back the registered
 * descriptor and its callbacks; destroying a stream does not drop its
 * allocator entry.
 */
#define _GNU_SOURCE
#include "fake_acl.h"
#include "acl/acl_rt_memory_soma.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define FAKE_INVALID_PARAM 100000
#define FAKE_MEMORY_ALLOCATION 207001
#define MAX_ENTRIES 64

typedef struct {
    void *obj;
    aclrtAllocatorAllocFunc alloc;
    aclrtAllocatorFreeFunc free;
    aclrtAllocatorAllocAdviseFunc advise;
    aclrtAllocatorGetAddrFromBlockFunc get_addr;
} fake_desc;

typedef struct {
    aclrtStream stream;
    aclrtAllocatorDesc registered;
    fake_desc copy;
} fake_entry;

typedef struct {
    int id;
    int live;
} fake_stream;

/* Streams come from a fixed pool, most recently destroyed first: a new
 * stream often gets the handle of one just destroyed, as with CANN. */
#define MAX_STREAMS 16
static fake_stream stream_pool[MAX_STREAMS];

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static fake_entry table[MAX_ENTRIES];
static _Atomic uint64_t launches_internal, launches_exported, allocs, frees, get_addrs,
    synchronizes;
static _Atomic int next_stream_id = 1;
static _Thread_local const char *last_error;

static aclError fail(const char *message, aclError code) {
    last_error = message;
    return code;
}

aclError aclInit(const char *configPath) {
    (void)configPath;
    return ACL_SUCCESS;
}
aclError aclFinalize(void) { return ACL_SUCCESS; }
/* The one device, current on a thread from its aclrtSetDevice to its
 * aclrtResetDevice; aclrtGetDevice answers from it, as CANN's does. */
static _Thread_local int device_set;

aclError aclrtSetDevice(int32_t deviceId) {
    if (deviceId != 0) return fail("fake: no such device", 107001);
    device_set = 1;
    return ACL_SUCCESS;
}
aclError aclrtResetDevice(int32_t deviceId) {
    if (deviceId != 0) return fail("fake: no such device", 107001);
    device_set = 0;
    return ACL_SUCCESS;
}
aclError aclrtGetDevice(int32_t *deviceId) {
    if (deviceId == NULL) return fail("fake: deviceId is NULL", FAKE_INVALID_PARAM);
    if (!device_set) return fail("fake: no current context", 107002);
    *deviceId = 0;
    return ACL_SUCCESS;
}

const char *aclGetRecentErrMsg(void) {
    const char *message = last_error;
    last_error = NULL;
    return message;
}

aclrtAllocatorDesc aclrtAllocatorCreateDesc(void) { return calloc(1, sizeof(fake_desc)); }

aclError aclrtAllocatorDestroyDesc(aclrtAllocatorDesc desc) {
    if (desc == NULL) return fail("fake: allocatorDesc is NULL", FAKE_INVALID_PARAM);
    free(desc);
    return ACL_SUCCESS;
}

#define SETTER(name, field, type)                                                        \
    aclError name(aclrtAllocatorDesc desc, type value) {                                 \
        if (desc == NULL || value == NULL)                                               \
            return fail("fake: " #name " got a NULL", FAKE_INVALID_PARAM);               \
        ((fake_desc *)desc)->field = value;                                              \
        return ACL_SUCCESS;                                                              \
    }
SETTER(aclrtAllocatorSetObjToDesc, obj, aclrtAllocator)
SETTER(aclrtAllocatorSetAllocFuncToDesc, alloc, aclrtAllocatorAllocFunc)
SETTER(aclrtAllocatorSetFreeFuncToDesc, free, aclrtAllocatorFreeFunc)
SETTER(aclrtAllocatorSetAllocAdviseFuncToDesc, advise, aclrtAllocatorAllocAdviseFunc)
SETTER(aclrtAllocatorSetGetAddrFromBlockFuncToDesc, get_addr, aclrtAllocatorGetAddrFromBlockFunc)

static fake_entry *find(aclrtStream stream) {
    for (int i = 0; i < MAX_ENTRIES; i++)
        if (table[i].stream == stream) return &table[i];
    return NULL;
}

aclError aclrtAllocatorRegister(aclrtStream stream, aclrtAllocatorDesc desc) {
    if (stream == NULL || desc == NULL)
        return fail("fake: aclrtAllocatorRegister got a NULL", FAKE_INVALID_PARAM);
    fake_desc *d = desc;
    if (d->obj == NULL || d->alloc == NULL || d->free == NULL || d->get_addr == NULL)
        return fail("fake: the descriptor is incomplete", FAKE_INVALID_PARAM);
    pthread_mutex_lock(&table_lock);
    fake_entry *e = find(stream);
    if (e == NULL) e = find(NULL);
    if (e != NULL) {
        e->stream = stream;
        e->registered = desc;
        e->copy = *d;
    }
    pthread_mutex_unlock(&table_lock);
    return e != NULL ? ACL_SUCCESS : fail("fake: allocator table full", FAKE_INVALID_PARAM);
}

aclError aclrtAllocatorGetByStream(aclrtStream stream, aclrtAllocatorDesc *allocatorDesc,
                                   aclrtAllocator *allocator,
                                   aclrtAllocatorAllocFunc *allocFunc,
                                   aclrtAllocatorFreeFunc *freeFunc,
                                   aclrtAllocatorAllocAdviseFunc *allocAdviseFunc,
                                   aclrtAllocatorGetAddrFromBlockFunc *getAddrFromBlockFunc) {
    if (stream == NULL || allocatorDesc == NULL)
        return fail("fake: aclrtAllocatorGetByStream got a NULL", FAKE_INVALID_PARAM);
    pthread_mutex_lock(&table_lock);
    fake_entry *e = find(stream);
    fake_entry copy = e != NULL ? *e : (fake_entry){0};
    pthread_mutex_unlock(&table_lock);
    if (e == NULL) return fail("fake: the stream has no allocator", FAKE_INVALID_PARAM);
    *allocatorDesc = copy.registered;
    if (allocator) *allocator = copy.copy.obj;
    if (allocFunc) *allocFunc = copy.copy.alloc;
    if (freeFunc) *freeFunc = copy.copy.free;
    if (allocAdviseFunc) *allocAdviseFunc = copy.copy.advise;
    if (getAddrFromBlockFunc) *getAddrFromBlockFunc = copy.copy.get_addr;
    return ACL_SUCCESS;
}

aclError aclrtAllocatorUnregister(aclrtStream stream) {
    if (stream == NULL) return fail("fake: stream is NULL", FAKE_INVALID_PARAM);
    pthread_mutex_lock(&table_lock);
    fake_entry *e = find(stream);
    if (e != NULL) memset(e, 0, sizeof *e);
    pthread_mutex_unlock(&table_lock);
    return ACL_SUCCESS;
}

static fake_stream *last_destroyed;

aclError aclrtCreateStream(aclrtStream *stream) {
    if (stream == NULL) return fail("fake: stream is NULL", FAKE_INVALID_PARAM);
    pthread_mutex_lock(&table_lock);
    fake_stream *s = NULL;
    if (last_destroyed != NULL && !last_destroyed->live) s = last_destroyed;
    for (int i = 0; s == NULL && i < MAX_STREAMS; i++)
        if (!stream_pool[i].live && stream_pool[i].id == 0) s = &stream_pool[i];
    if (s != NULL) {
        s->live = 1;
        s->id = atomic_fetch_add(&next_stream_id, 1);
        last_destroyed = NULL;
    }
    pthread_mutex_unlock(&table_lock);
    if (s == NULL) return fail("fake: too many streams", FAKE_MEMORY_ALLOCATION);
    *stream = s;
    return ACL_SUCCESS;
}

/* Work runs at launch time here, so a stream is always idle. */
aclError aclrtSynchronizeStream(aclrtStream stream) {
    (void)stream;
    atomic_fetch_add(&synchronizes, 1);
    return ACL_SUCCESS;
}

/* Events: work runs at launch time here, so a record is complete at once
 * and a wait has nothing to wait for. */
static int event_storage[4];
aclError aclrtCreateEvent(aclrtEvent *event) {
    if (event == NULL) return fail("fake: event is NULL", FAKE_INVALID_PARAM);
    *event = &event_storage[0];
    return ACL_SUCCESS;
}
aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream) {
    (void)stream;
    return event == NULL ? fail("fake: event is NULL", FAKE_INVALID_PARAM) : ACL_SUCCESS;
}
aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event) {
    (void)stream;
    return event == NULL ? fail("fake: event is NULL", FAKE_INVALID_PARAM) : ACL_SUCCESS;
}
aclError aclrtDestroyEvent(aclrtEvent event) {
    return event == NULL ? fail("fake: event is NULL", FAKE_INVALID_PARAM) : ACL_SUCCESS;
}

/* As CANN: the allocator entry of the stream stays. */
aclError aclrtDestroyStream(aclrtStream stream) {
    if (stream == NULL) return fail("fake: stream is NULL", FAKE_INVALID_PARAM);
    pthread_mutex_lock(&table_lock);
    fake_stream *s = stream;
    s->live = 0;
    last_destroyed = s;
    pthread_mutex_unlock(&table_lock);
    return ACL_SUCCESS;
}

/* The executor: workspace from the allocator, kernel, workspace back in
 * stream order (on this thread, right after the launch). */
static aclError execute(aclrtStream stream, const fake_desc *a, size_t size,
                        aclallocKernelFunc kernel, void *userData) {
    if (kernel == NULL) return fail("fake: kernel is NULL", FAKE_INVALID_PARAM);
    if (size == 0) {
        kernel(NULL, 0, userData);
        return ACL_SUCCESS;
    }
    (void)stream;
    void *block = a->alloc(a->obj, size);
    atomic_fetch_add(&allocs, 1);
    if (block == NULL) return fail("fake: alloc returned NULL", FAKE_MEMORY_ALLOCATION);
    void *address = a->get_addr(block);
    atomic_fetch_add(&get_addrs, 1);
    if (address == NULL) {
        a->free(a->obj, block);
        atomic_fetch_add(&frees, 1);
        return fail("fake: getAddrFromBlock returned NULL", FAKE_MEMORY_ALLOCATION);
    }
    kernel(address, size, userData);
    a->free(a->obj, block);
    atomic_fetch_add(&frees, 1);
    return ACL_SUCCESS;
}

aclError aclallocLaunchKernel(aclrtStream stream, size_t workspaceSize,
                              aclallocKernelFunc kernel, void *userData) {
    pthread_mutex_lock(&table_lock);
    fake_entry *e = find(stream);
    fake_desc a = e != NULL ? e->copy : (fake_desc){0};
    pthread_mutex_unlock(&table_lock);
    if (e == NULL || stream == NULL)
        return fail("fake: the stream has no allocator", FAKE_INVALID_PARAM);
    atomic_fetch_add(&launches_internal, 1);
    return execute(stream, &a, workspaceSize, kernel, userData);
}

typedef aclError (*get_by_stream_fn)(aclrtStream, aclrtAllocatorDesc *, aclrtAllocator *,
                                     aclrtAllocatorAllocFunc *, aclrtAllocatorFreeFunc *,
                                     aclrtAllocatorAllocAdviseFunc *,
                                     aclrtAllocatorGetAddrFromBlockFunc *);

aclError fakeExecuteViaGetByStream(aclrtStream stream, size_t workspaceSize,
                                   aclallocKernelFunc kernel, void *userData) {
    /* Resolved in the global scope: whatever the process binds the name to. */
    get_by_stream_fn get = (get_by_stream_fn)dlsym(RTLD_DEFAULT, "aclrtAllocatorGetByStream");
    if (get == NULL) return fail("fake: aclrtAllocatorGetByStream not found", FAKE_INVALID_PARAM);
    aclrtAllocatorDesc desc = NULL;
    fake_desc a = {0};
    aclError rc = get(stream, &desc, &a.obj, &a.alloc, &a.free, &a.advise, &a.get_addr);
    if (rc != ACL_SUCCESS) return rc;
    atomic_fetch_add(&launches_exported, 1);
    return execute(stream, &a, workspaceSize, kernel, userData);
}

/* A descriptor made inside the runtime (not through the exported
 * aclrtAllocatorCreateDesc), as a runtime's own components may make one. */
aclrtAllocatorDesc fakeCreateFilledDesc(void *obj, aclrtAllocatorAllocFunc alloc,
                                        aclrtAllocatorFreeFunc release,
                                        aclrtAllocatorGetAddrFromBlockFunc get_addr) {
    fake_desc *d = calloc(1, sizeof *d);
    if (d == NULL) return NULL;
    d->obj = obj;
    d->alloc = alloc;
    d->free = release;
    d->get_addr = get_addr;
    return d;
}

void fakeVendorGetCounters(fakeVendorCounters *out) {
    out->launches_internal = launches_internal;
    out->launches_exported = launches_exported;
    out->allocs = allocs;
    out->frees = frees;
    out->get_addrs = get_addrs;
    out->synchronizes = synchronizes;
}

/* Virtual memory, CANN's signatures: reservations are PROT_NONE address
 * space, a physical handle is a heap token with its size, mapping makes the
 * range read-write. Counted, so a test sees the calls reached this runtime. */
static _Atomic uint64_t vm_calls;
#define FAKE_GRANULE ((size_t)2 << 20)
#define MAX_VM 32
static struct {
    void *addr;
    size_t size;
} fake_reservations[MAX_VM], fake_mappings[MAX_VM];

static int vm_slot(void *addr, int mappings) {
    for (int i = 0; i < MAX_VM; i++) {
        void *a = mappings ? fake_mappings[i].addr : fake_reservations[i].addr;
        if (a == addr) return i;
    }
    return -1;
}

aclError aclrtMemGetAllocationGranularity(aclrtPhysicalMemProp *prop, aclrtMemGranularityOptions option,
                                          size_t *granularity) {
    (void)option;
    atomic_fetch_add(&vm_calls, 1);
    if (prop == NULL || granularity == NULL) return fail("fake: NULL", FAKE_INVALID_PARAM);
    *granularity = FAKE_GRANULE;
    return ACL_SUCCESS;
}

aclError aclrtReserveMemAddress(void **virPtr, size_t size, size_t alignment, void *expectPtr, uint64_t flags) {
    (void)alignment, (void)expectPtr, (void)flags;
    atomic_fetch_add(&vm_calls, 1);
    int slot = vm_slot(NULL, 0);
    if (virPtr == NULL || size == 0 || slot < 0) return fail("fake: bad reservation", FAKE_INVALID_PARAM);
    void *p = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return fail("fake: no address space", FAKE_MEMORY_ALLOCATION);
    fake_reservations[slot].addr = p;
    fake_reservations[slot].size = size;
    *virPtr = p;
    return ACL_SUCCESS;
}

aclError aclrtReleaseMemAddress(void *virPtr) {
    atomic_fetch_add(&vm_calls, 1);
    int slot = virPtr == NULL ? -1 : vm_slot(virPtr, 0);
    if (slot < 0) return fail("fake: not a reservation", FAKE_INVALID_PARAM);
    munmap(virPtr, fake_reservations[slot].size);
    fake_reservations[slot].addr = NULL;
    return ACL_SUCCESS;
}

/* Physical memory live now, and the most there may be (0: no limit), so a
 * test can run the device out of memory. */
static _Atomic size_t physical_live, physical_limit;

aclError aclrtMallocPhysical(aclrtDrvMemHandle *handle, size_t size, const aclrtPhysicalMemProp *prop,
                             uint64_t flags) {
    (void)flags;
    atomic_fetch_add(&vm_calls, 1);
    if (handle == NULL || prop == NULL || size == 0) return fail("fake: bad physical", FAKE_INVALID_PARAM);
    size_t limit = physical_limit;
    if (limit != 0 && physical_live + size > limit) return fail("fake: device out of memory", FAKE_MEMORY_ALLOCATION);
    size_t *token = malloc(sizeof *token);
    if (token == NULL) return fail("fake: out of memory", FAKE_MEMORY_ALLOCATION);
    *token = size;
    *handle = token;
    atomic_fetch_add(&physical_live, size);
    return ACL_SUCCESS;
}

aclError aclrtFreePhysical(aclrtDrvMemHandle handle) {
    atomic_fetch_add(&vm_calls, 1);
    if (handle == NULL) return fail("fake: handle is NULL", FAKE_INVALID_PARAM);
    atomic_fetch_sub(&physical_live, *(size_t *)handle);
    free(handle);
    return ACL_SUCCESS;
}

size_t fakeVendorPhysicalBytes(void) { return physical_live; }
void fakeVendorSetPhysicalLimit(size_t bytes) { physical_limit = bytes; }

aclError aclrtMapMem(void *virPtr, size_t size, size_t offset, aclrtDrvMemHandle handle, uint64_t flags) {
    (void)offset, (void)flags;
    atomic_fetch_add(&vm_calls, 1);
    int slot = vm_slot(NULL, 1);
    if (virPtr == NULL || handle == NULL || slot < 0 || mprotect(virPtr, size, PROT_READ | PROT_WRITE) != 0)
        return fail("fake: bad mapping", FAKE_INVALID_PARAM);
    fake_mappings[slot].addr = virPtr;
    fake_mappings[slot].size = size;
    return ACL_SUCCESS;
}

aclError aclrtUnmapMem(void *virPtr) {
    atomic_fetch_add(&vm_calls, 1);
    int slot = virPtr == NULL ? -1 : vm_slot(virPtr, 1);
    if (slot < 0) return fail("fake: not a mapping", FAKE_INVALID_PARAM);
    size_t size = fake_mappings[slot].size;
    madvise(virPtr, size, MADV_DONTNEED);
    mprotect(virPtr, size, PROT_NONE);
    fake_mappings[slot].addr = NULL;
    return ACL_SUCCESS;
}

uint64_t fakeVendorVmCalls(void) { return vm_calls; }

/* Live mappings: a test checks that sleep unmapped and wake mapped again. */
int fakeVendorMappings(void) {
    int n = 0;
    for (int i = 0; i < MAX_VM; i++) n += fake_mappings[i].addr != NULL;
    return n;
}

/* Device memory: anonymous mappings, tracked so a free of anything else is
 * refused, as CANN refuses it. */
#define MAX_ALLOCS 256
static struct {
    void *addr;
    size_t size;
} fake_allocs[MAX_ALLOCS];
static pthread_mutex_t allocs_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint64_t device_mallocs;

aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy) {
    (void)policy;
    if (devPtr == NULL || size == 0) return fail("fake: bad malloc", FAKE_INVALID_PARAM);
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return fail("fake: device out of memory", FAKE_MEMORY_ALLOCATION);
    pthread_mutex_lock(&allocs_lock);
    for (int i = 0; i < MAX_ALLOCS; i++) {
        if (fake_allocs[i].addr == NULL) {
            fake_allocs[i].addr = p;
            fake_allocs[i].size = size;
            pthread_mutex_unlock(&allocs_lock);
            atomic_fetch_add(&device_mallocs, 1);
            *devPtr = p;
            return ACL_SUCCESS;
        }
    }
    pthread_mutex_unlock(&allocs_lock);
    munmap(p, size);
    return fail("fake: too many allocations", FAKE_MEMORY_ALLOCATION);
}

aclError aclrtFree(void *devPtr) {
    pthread_mutex_lock(&allocs_lock);
    for (int i = 0; i < MAX_ALLOCS; i++) {
        if (devPtr != NULL && fake_allocs[i].addr == devPtr) {
            munmap(devPtr, fake_allocs[i].size);
            fake_allocs[i].addr = NULL;
            pthread_mutex_unlock(&allocs_lock);
            return ACL_SUCCESS;
        }
    }
    pthread_mutex_unlock(&allocs_lock);
    return fail("fake: not device memory from aclrtMalloc", FAKE_INVALID_PARAM);
}

/* aclrtMalloc calls that reached the stand-in. */
uint64_t fakeVendorDeviceMallocs(void) { return device_mallocs; }

/* The device's memory: its physical limit (32 GiB without one), less what
 * aclrtMalloc and aclrtMallocPhysical hold. */
aclError aclrtGetMemInfo(aclrtMemAttr attr, size_t *free, size_t *total) {
    (void)attr;
    if (free == NULL || total == NULL) return fail("fake: NULL", FAKE_INVALID_PARAM);
    size_t held = physical_live;
    pthread_mutex_lock(&allocs_lock);
    for (int i = 0; i < MAX_ALLOCS; i++)
        if (fake_allocs[i].addr != NULL) held += fake_allocs[i].size;
    pthread_mutex_unlock(&allocs_lock);
    size_t limit = physical_limit;
    *total = limit != 0 ? limit : (size_t)32 << 30;
    *free = held < *total ? *total - held : 0;
    return ACL_SUCCESS;
}

/* Synchronous copies and sets, done at once (the stand-in runs all work at
 * once); memory that is not mapped faults, as a device's would fail. */
static _Atomic uint64_t copies;

aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count, aclrtMemcpyKind kind) {
    (void)kind;
    if (dst == NULL || src == NULL || count > destMax) return fail("fake: bad copy", FAKE_INVALID_PARAM);
    memmove(dst, src, count);
    atomic_fetch_add(&copies, 1);
    return ACL_SUCCESS;
}

aclError aclrtMemset(void *devPtr, size_t maxCount, int32_t value, size_t count) {
    if (devPtr == NULL || count > maxCount) return fail("fake: bad set", FAKE_INVALID_PARAM);
    memset(devPtr, value, count);
    return ACL_SUCCESS;
}

uint64_t fakeVendorCopies(void) { return copies; }

static _Atomic uint64_t device_synchronizes;

aclError aclrtSynchronizeDevice(void) {
    atomic_fetch_add(&device_synchronizes, 1);
    return ACL_SUCCESS;
}

uint64_t fakeVendorDeviceSynchronizes(void) { return device_synchronizes; }

/*
 * Stream-ordered pools (acl_rt_memory_soma.h), as far as the tracking tests
 * need them: one arena of fixed slots per pool, a free slot reused by the
 * next allocation of any stream (the stand-in runs work at once, so every
 * free has run), and copies and fills done at once.
 */
#define POOL_SLOTS 32
#define POOL_SLOT_BYTES 65536
typedef struct {
    unsigned char *arena;
    int used[POOL_SLOTS];
} fake_mem_pool;
static _Atomic uint64_t ordered_calls;
#define MAX_POOLS 8
static fake_mem_pool *pools[MAX_POOLS];

aclError aclrtMemPoolCreate(aclrtMemPool *memPool, const aclrtMemPoolProps *poolProps) {
    if (memPool == NULL || poolProps == NULL) return fail("memPool is NULL", FAKE_INVALID_PARAM);
    fake_mem_pool *p = calloc(1, sizeof(*p));
    p->arena = mmap(NULL, POOL_SLOTS * POOL_SLOT_BYTES, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    for (int i = 0; i < MAX_POOLS; i++) {
        if (pools[i] == NULL) {
            pools[i] = p;
            *memPool = p;
            ordered_calls++;
            return ACL_SUCCESS;
        }
    }
    munmap(p->arena, POOL_SLOTS * POOL_SLOT_BYTES);
    free(p);
    return fail("too many pools", FAKE_MEMORY_ALLOCATION);
}

aclError aclrtMemPoolDestroy(aclrtMemPool memPool) {
    fake_mem_pool *p = memPool;
    for (int i = 0; i < POOL_SLOTS; i++)
        if (p->used[i]) return fail("the pool has live blocks", 207015);
    for (int i = 0; i < MAX_POOLS; i++)
        if (pools[i] == p) pools[i] = NULL;
    munmap(p->arena, POOL_SLOTS * POOL_SLOT_BYTES);
    free(p);
    ordered_calls++;
    return ACL_SUCCESS;
}

aclError aclrtMemPoolMallocAsync(void **ptr, size_t size, aclrtMemPool memPool, aclrtStream stream) {
    (void)stream;
    fake_mem_pool *p = memPool;
    if (ptr == NULL || size == 0 || size > POOL_SLOT_BYTES) return fail("bad size", FAKE_INVALID_PARAM);
    for (int i = 0; i < POOL_SLOTS; i++) {
        if (!p->used[i]) {
            p->used[i] = 1;
            *ptr = p->arena + (size_t)i * POOL_SLOT_BYTES;
            ordered_calls++;
            return ACL_SUCCESS;
        }
    }
    return fail("the pool is full", FAKE_MEMORY_ALLOCATION);
}

static fake_mem_pool *pool_of(void *ptr, int *slot) {
    for (int i = 0; i < MAX_POOLS; i++) {
        fake_mem_pool *p = pools[i];
        unsigned char *c = ptr;
        if (p != NULL && c >= p->arena && c < p->arena + POOL_SLOTS * POOL_SLOT_BYTES) {
            *slot = (int)((size_t)(c - p->arena) / POOL_SLOT_BYTES);
            return p;
        }
    }
    return NULL;
}

aclError aclrtMemPoolFreeAsync(void *ptr, aclrtStream stream) {
    (void)stream;
    int slot;
    fake_mem_pool *p = pool_of(ptr, &slot);
    if (p == NULL || !p->used[slot]) return fail("not a live block", FAKE_INVALID_PARAM);
    p->used[slot] = 0;
    ordered_calls++;
    return ACL_SUCCESS;
}

aclError aclrtMemsetAsync(void *devPtr, size_t maxCount, int32_t value, size_t count, aclrtStream stream) {
    (void)stream;
    if (count > maxCount) return fail("count > maxCount", FAKE_INVALID_PARAM);
    memset(devPtr, value, count);
    ordered_calls++;
    return ACL_SUCCESS;
}

aclError aclrtMemcpyAsync(void *dst, size_t destMax, const void *src, size_t count, aclrtMemcpyKind kind,
                          aclrtStream stream) {
    (void)stream;
    (void)kind;
    if (count > destMax) return fail("count > destMax", FAKE_INVALID_PARAM);
    memcpy(dst, src, count);
    ordered_calls++;
    return ACL_SUCCESS;
}

/* Stand-in vendor only: stream-ordered calls that reached it. */
uint64_t fakeVendorOrderedCalls(void) { return ordered_calls; }
