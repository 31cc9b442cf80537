/*
 * A CPython extension module linking the ACL runtime, as pyACL's `acl`
 * module and torch_npu's extension do: `import vendorapp;
 * vendorapp.run(MODE)` runs alloc_app.c's inference loop (linked into the
 * module) and returns its exit code. Python opens the module with dlopen
 * (RTLD_LOCAL), which brings the runtime in.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

int alloc_app_main(int argc, char **argv);

static PyObject *run(PyObject *self, PyObject *args) {
    (void)self;
    const char *mode = NULL;
    if (!PyArg_ParseTuple(args, "s", &mode)) {
        return NULL;
    }
    char *argv[] = {"vendorapp", (char *)mode, NULL};
    int rc = alloc_app_main(2, argv);
    fflush(stdout);
    return PyLong_FromLong(rc);
}

static PyMethodDef methods[] = {
    {"run", run, METH_VARARGS, "Runs the inference loop in MODE; returns its exit code."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "vendorapp",
    .m_doc = "alloc_app.c's inference loop on the ACL runtime the module links",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit_vendorapp(void) { return PyModule_Create(&module); }
