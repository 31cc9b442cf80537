/* A CPython extension module in the place of torch_npu's `_C`: linked
 * against the runtime (here the stand-in vendor runtime of tests/vendor,
 * installed as libascendcl.so), so importing it loads that runtime
 * RTLD_LOCAL, as importing torch_npu loads CANN's. Its functions allocate
 * device memory the way torch_npu's own caching allocator does (plain
 * aclrtMalloc, and an expandable segment: reserve, physical, map) and copy
 * to and from it; each returns the runtime's code rather than raising, so
 * a test can see a refusal. Its aclrt* references are bound when it is
 * imported: to the runtime, or to libaclalloc when that is preloaded. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <string.h>

#include "acl/acl.h"

/* malloc(size) -> (code, address) */
static PyObject *npu_malloc(PyObject *self, PyObject *args) {
    (void)self;
    Py_ssize_t size;
    if (!PyArg_ParseTuple(args, "n", &size)) return NULL;
    void *p = NULL;
    aclError rc = aclrtMalloc(&p, (size_t)size, ACL_MEM_MALLOC_HUGE_FIRST);
    return Py_BuildValue("iK", (int)rc, (unsigned long long)(uintptr_t)p);
}

/* free(address) -> code */
static PyObject *npu_free(PyObject *self, PyObject *args) {
    (void)self;
    unsigned long long addr;
    if (!PyArg_ParseTuple(args, "K", &addr)) return NULL;
    return PyLong_FromLong(aclrtFree((void *)(uintptr_t)addr));
}

/* segment(size) -> (code, address, physical handle): what torch_npu's
 * expandable segments do, for one granule-multiple size. */
static PyObject *npu_segment(PyObject *self, PyObject *args) {
    (void)self;
    Py_ssize_t size;
    if (!PyArg_ParseTuple(args, "n", &size)) return NULL;
    aclrtPhysicalMemProp prop;
    memset(&prop, 0, sizeof prop);
    prop.handleType = ACL_MEM_HANDLE_TYPE_NONE;
    prop.allocationType = ACL_MEM_ALLOCATION_TYPE_PINNED;
    prop.memAttr = ACL_HBM_MEM_HUGE;
    prop.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    void *va = NULL;
    aclrtDrvMemHandle handle = NULL;
    aclError rc = aclrtReserveMemAddress(&va, (size_t)size, 0, NULL, 0);
    if (rc == ACL_SUCCESS) rc = aclrtMallocPhysical(&handle, (size_t)size, &prop, 0);
    if (rc == ACL_SUCCESS) rc = aclrtMapMem(va, (size_t)size, 0, handle, 0);
    return Py_BuildValue("iKK", (int)rc, (unsigned long long)(uintptr_t)va,
                         (unsigned long long)(uintptr_t)handle);
}

/* release_segment(address, handle) -> code: unmap, free, release. */
static PyObject *npu_release_segment(PyObject *self, PyObject *args) {
    (void)self;
    unsigned long long va, handle;
    if (!PyArg_ParseTuple(args, "KK", &va, &handle)) return NULL;
    aclError rc = aclrtUnmapMem((void *)(uintptr_t)va);
    if (rc == ACL_SUCCESS) rc = aclrtFreePhysical((aclrtDrvMemHandle)(uintptr_t)handle);
    if (rc == ACL_SUCCESS) rc = aclrtReleaseMemAddress((void *)(uintptr_t)va);
    return PyLong_FromLong(rc);
}

/* write(address, bytes) -> code: a host-to-device copy. */
static PyObject *npu_write(PyObject *self, PyObject *args) {
    (void)self;
    unsigned long long addr;
    Py_buffer data;
    if (!PyArg_ParseTuple(args, "Ky*", &addr, &data)) return NULL;
    aclError rc = aclrtMemcpy((void *)(uintptr_t)addr, (size_t)data.len, data.buf, (size_t)data.len,
                              ACL_MEMCPY_HOST_TO_DEVICE);
    PyBuffer_Release(&data);
    return PyLong_FromLong(rc);
}

/* read(address, count) -> (code, bytes): a device-to-host copy. */
static PyObject *npu_read(PyObject *self, PyObject *args) {
    (void)self;
    unsigned long long addr;
    Py_ssize_t count;
    if (!PyArg_ParseTuple(args, "Kn", &addr, &count)) return NULL;
    PyObject *out = PyBytes_FromStringAndSize(NULL, count);
    if (out == NULL) return NULL;
    aclError rc = aclrtMemcpy(PyBytes_AS_STRING(out), (size_t)count, (void *)(uintptr_t)addr,
                              (size_t)count, ACL_MEMCPY_DEVICE_TO_HOST);
    return Py_BuildValue("iN", (int)rc, out);
}

static PyMethodDef methods[] = {
    {"malloc", npu_malloc, METH_VARARGS, "aclrtMalloc"},
    {"free", npu_free, METH_VARARGS, "aclrtFree"},
    {"segment", npu_segment, METH_VARARGS, "reserve, physical, map"},
    {"release_segment", npu_release_segment, METH_VARARGS, "unmap, free physical, release"},
    {"write", npu_write, METH_VARARGS, "aclrtMemcpy host to device"},
    {"read", npu_read, METH_VARARGS, "aclrtMemcpy device to host"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "npu_c", NULL, -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit_npu_c(void) { return PyModule_Create(&module); }
