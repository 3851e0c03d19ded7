/* wire._headerc: the ROCKETMQ (binary) header's fields in C.
 *
 * The Java benchmark tools, and any client started with -Drocketmq.serialize.type=ROCKETMQ, send every
 * request with this header, and the broker answers in kind. Walked in Python, the length-prefixed
 * extFields cost a struct call and a slice per key and per value: about a sixth of the broker's CPU per
 * single send. This module does the byte work only; wire/serialization.py builds the RemotingCommand,
 * and its Python functions remain the specification (tests/wire/test_headerc.py runs both on the same
 * input).
 *
 * Layout (big-endian): int16 code, uint8 language, int16 version, int32 opaque, int32 flag,
 * int32 remarkLen + remark (UTF-8), int32 extLen + extFields, each field uint16 keyLen + key,
 * int32 valueLen + value.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define FIXED 13 /* code, language, version, opaque, flag */

static inline uint32_t rd32(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

static inline void wr16(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 8);
    p[1] = (unsigned char)v;
}

static inline void wr32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

/* The fields in [pos, end) as a dict of str; NULL with ValueError (UnicodeDecodeError for bad UTF-8). */
static PyObject *decode_fields(const unsigned char *buf, Py_ssize_t pos, Py_ssize_t end) {
    PyObject *ext = PyDict_New();
    if (ext == NULL)
        return NULL;
    while (pos < end) {
        if (end - pos < 2) {
            PyErr_SetString(PyExc_ValueError, "unreadable extFields (a key length is cut off)");
            goto fail;
        }
        Py_ssize_t klen = ((Py_ssize_t)buf[pos] << 8) | buf[pos + 1];
        pos += 2;
        if (end - pos < klen + 4) {
            PyErr_SetString(PyExc_ValueError, "unreadable extFields (a key or its value length is cut off)");
            goto fail;
        }
        PyObject *key = PyUnicode_DecodeUTF8((const char *)buf + pos, klen, "strict");
        if (key == NULL)
            goto fail;
        pos += klen;
        int32_t vlen = (int32_t)rd32(buf + pos);
        pos += 4;
        if (vlen < 0 || vlen > end - pos) {
            PyErr_Format(PyExc_ValueError, "value of '%U' overruns the header", key);
            Py_DECREF(key);
            goto fail;
        }
        PyObject *value = PyUnicode_DecodeUTF8((const char *)buf + pos, vlen, "strict");
        if (value == NULL) {
            Py_DECREF(key);
            goto fail;
        }
        pos += vlen;
        int rc = PyDict_SetItem(ext, key, value);
        Py_DECREF(key);
        Py_DECREF(value);
        if (rc < 0)
            goto fail;
    }
    return ext;
fail:
    Py_DECREF(ext);
    return NULL;
}

/* decode(data) -> (code, language, version, opaque, flag, remark | None, ext | None); raises ValueError */
static PyObject *py_decode(PyObject *self, PyObject *arg) {
    Py_buffer data;
    if (PyObject_GetBuffer(arg, &data, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *buf = data.buf;
    Py_ssize_t size = data.len, pos = FIXED;
    PyObject *remark = NULL, *ext = NULL, *out = NULL;
    if (size < FIXED + 8) {
        PyErr_Format(PyExc_ValueError, "%zd bytes, shorter than its 21-byte fixed part", size);
        goto done;
    }
    int32_t rlen = (int32_t)rd32(buf + pos);
    pos += 4;
    if (rlen < 0 || rlen > size - pos - 4) {
        PyErr_SetString(PyExc_ValueError, "remark length overruns the header");
        goto done;
    }
    if (rlen) {
        remark = PyUnicode_DecodeUTF8((const char *)buf + pos, rlen, "strict");
        if (remark == NULL) {
            PyErr_SetString(PyExc_ValueError, "remark is not UTF-8");
            goto done;
        }
    } else {
        remark = Py_NewRef(Py_None);
    }
    pos += rlen;
    int32_t elen = (int32_t)rd32(buf + pos);
    pos += 4;
    if (elen < 0 || elen > size - pos) {
        PyErr_SetString(PyExc_ValueError, "extFields length overruns the header");
        goto done;
    }
    if (elen) {
        ext = decode_fields(buf, pos, pos + elen);
        if (ext == NULL)
            goto done;
    } else {
        ext = Py_NewRef(Py_None);
    }
    out = Py_BuildValue("(iiiiiOO)", (int)(int16_t)((buf[0] << 8) | buf[1]), (int)buf[2],
                        (int)(int16_t)((buf[3] << 8) | buf[4]), (int)(int32_t)rd32(buf + 5),
                        (int)(int32_t)rd32(buf + 9), remark, ext);
done:
    Py_XDECREF(remark);
    Py_XDECREF(ext);
    PyBuffer_Release(&data);
    return out;
}

/* encode(code, language, version, opaque, flag, remark | None, ext | None) -> bytes, or None when an
 * extFields are not a dict of str (the Python encoder then converts the values as fastjson would). */
static PyObject *py_encode(PyObject *self, PyObject *args) {
    int code, language, version, opaque, flag;
    PyObject *remark, *ext;
    if (!PyArg_ParseTuple(args, "iiiiiOO:encode", &code, &language, &version, &opaque, &flag, &remark, &ext))
        return NULL;
    const char *rbuf = NULL;
    Py_ssize_t rlen = 0, elen = 0, pos = 0;
    PyObject *key, *value;
    if (remark != Py_None) {
        if (!PyUnicode_Check(remark)) {
            PyErr_SetString(PyExc_TypeError, "remark must be a str or None");
            return NULL;
        }
        rbuf = PyUnicode_AsUTF8AndSize(remark, &rlen);
        if (rbuf == NULL)
            return NULL;
    }
    if (ext != Py_None) {
        if (!PyDict_Check(ext))
            Py_RETURN_NONE;
        while (PyDict_Next(ext, &pos, &key, &value)) {
            if (key == Py_None || value == Py_None)
                continue; /* skipped, as Java skips null entries */
            if (!PyUnicode_CheckExact(key) || !PyUnicode_CheckExact(value))
                Py_RETURN_NONE;
            Py_ssize_t klen, vlen;
            if (PyUnicode_AsUTF8AndSize(key, &klen) == NULL || PyUnicode_AsUTF8AndSize(value, &vlen) == NULL)
                return NULL;
            if (klen > 0xFFFF) {
                PyErr_SetString(PyExc_ValueError, "an extFields key is longer than 65535 bytes");
                return NULL;
            }
            elen += 6 + klen + vlen;
        }
    }
    if (rlen > INT32_MAX - elen - FIXED - 8) {
        PyErr_SetString(PyExc_ValueError, "ROCKETMQ header too long");
        return NULL;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, FIXED + 4 + rlen + 4 + elen);
    if (out == NULL)
        return NULL;
    unsigned char *p = (unsigned char *)PyBytes_AS_STRING(out);
    wr16(p, (uint32_t)code);
    p[2] = (unsigned char)language;
    wr16(p + 3, (uint32_t)version);
    wr32(p + 5, (uint32_t)opaque);
    wr32(p + 9, (uint32_t)flag);
    p += FIXED;
    wr32(p, (uint32_t)rlen);
    p += 4;
    if (rlen) {
        memcpy(p, rbuf, (size_t)rlen);
        p += rlen;
    }
    wr32(p, (uint32_t)elen);
    p += 4;
    pos = 0;
    if (ext != Py_None) {
        while (PyDict_Next(ext, &pos, &key, &value)) {
            if (key == Py_None || value == Py_None)
                continue;
            Py_ssize_t klen, vlen;
            const char *k = PyUnicode_AsUTF8AndSize(key, &klen); /* cached by the first pass */
            const char *v = PyUnicode_AsUTF8AndSize(value, &vlen);
            wr16(p, (uint32_t)klen);
            memcpy(p + 2, k, (size_t)klen);
            p += 2 + klen;
            wr32(p, (uint32_t)vlen);
            memcpy(p + 4, v, (size_t)vlen);
            p += 4 + vlen;
        }
    }
    return out;
}

static PyMethodDef methods[] = {
    {"decode", py_decode, METH_O, "decode(data) -> (code, language, version, opaque, flag, remark, ext)"},
    {"encode", py_encode, METH_VARARGS,
     "encode(code, language, version, opaque, flag, remark, ext) -> bytes, or None for non-str extFields"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "wire._headerc", NULL, -1, methods};

PyMODINIT_FUNC PyInit__headerc(void) { return PyModule_Create(&module); }
