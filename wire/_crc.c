/* wire._crc: crc32(data, value=0) -> int, zlib.crc32 with the folding of wire/crc32_fast.h.
 *
 * For BODYCRC of single sends (wire/message.py) and the body check when recovery scans the commit log
 * (server/store/commitlog.py); batch sends compute it inside wire/_batchc.c. The GIL is kept: a body is
 * a few KiB at most, done in well under a microsecond.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "crc32_fast.h"

static PyObject *py_crc32(PyObject *self, PyObject *args) {
    Py_buffer data;
    unsigned int value = 0;
    if (!PyArg_ParseTuple(args, "y*|I:crc32", &data, &value))
        return NULL;
    uint32_t crc = crc32_fast(value, data.buf, (size_t)data.len);
    PyBuffer_Release(&data);
    return PyLong_FromUnsignedLong(crc);
}

static PyMethodDef methods[] = {
    {"crc32", py_crc32, METH_VARARGS, "crc32(data, value=0) -> int: zlib.crc32, folded with PCLMULQDQ where available"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "wire._crc", NULL, -1, methods};

PyMODINIT_FUNC PyInit__crc(void) { return PyModule_Create(&module); }
