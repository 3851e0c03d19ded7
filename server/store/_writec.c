/* server.store._writec: pwrite that keeps the GIL.
 *
 * The put paths write commit-log records with pwrite rather than storing through the segment's mapping
 * (MappedFile.write_at says why). os.pwrite lets go of the GIL around the call, as every blocking call in
 * CPython does; on the reactor, a put at a time, that handed the GIL to the store's background threads
 * and cost more than the write itself (single sends, SYNC_FLUSH: ~20 µs more broker CPU per message).
 * Copying a few KiB into the page cache does not block for long, so here the GIL is kept.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <unistd.h>

/* pwrite_all(fd, data, offset) -> None; writes all of data or raises OSError */
static PyObject *pwrite_all(PyObject *self, PyObject *args) {
    int fd;
    Py_buffer data;
    long long offset;
    if (!PyArg_ParseTuple(args, "iy*L:pwrite_all", &fd, &data, &offset))
        return NULL;
    const char *p = data.buf;
    Py_ssize_t left = data.len;
    while (left > 0) {
        ssize_t n = pwrite(fd, p, (size_t)left, (off_t)offset);
        if (n < 0) {
            if (errno == EINTR) {
                if (PyErr_CheckSignals() < 0)
                    goto fail;
                continue;
            }
            PyErr_SetFromErrno(PyExc_OSError);
            goto fail;
        }
        if (n == 0) {
            errno = EIO;
            PyErr_SetFromErrno(PyExc_OSError);
            goto fail;
        }
        p += n;
        left -= n;
        offset += n;
    }
    PyBuffer_Release(&data);
    Py_RETURN_NONE;
fail:
    PyBuffer_Release(&data);
    return NULL;
}

static PyMethodDef methods[] = {
    {"pwrite_all", pwrite_all, METH_VARARGS, "pwrite all of data at offset, keeping the GIL"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_writec", "pwrite that keeps the GIL", -1, methods};

PyMODINIT_FUNC PyInit__writec(void) { return PyModule_Create(&module); }
