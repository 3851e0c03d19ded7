/* wire._batchc: measure() and write() of wire/batch.py in C.
 *
 * wire/batch.py is the specification (its py_measure and py_write); this file does the same per-entry
 * work without a Python object per message, which is where a batch send's time went. The record
 * layout stays in Python: the caller hands over a template of the record's fixed part and this code
 * fills in only the fields that differ between records (their offsets are fixed for every record
 * version: they precede BORNHOST). tests/wire/test_batch.py holds both byte-for-byte equal.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <zlib.h>

#include "crc32_fast.h"

enum { POS_TOTALSIZE = 0, POS_BODYCRC = 8, POS_FLAG = 16, POS_QUEUEOFFSET = 20, POS_PHYSICALOFFSET = 28 };
enum { ENTRY_HEAD = 20, UNIT_SIZE = 20, ITEM_SIZE = 12, MAX_KEYS = 12, N_WATCHED = 4 };
enum { W_TAGS = 0, W_KEYS = 1, W_UNIQ = 2, W_WAIT = 3 };

static PyObject *record_error;   /* wire.message.RecordError(message, offset) */
static PyObject *too_long_error; /* wire.batch.PropertiesTooLong(message) */
static PyObject *watched_names;  /* (b"TAGS", b"KEYS", b"UNIQ_KEY", b"WAIT") */
static Py_ssize_t max_props_len;

typedef struct { const uint8_t *p; Py_ssize_t n; } span_t;

typedef struct {
    Py_ssize_t nkeys;
    span_t keys[MAX_KEYS];
    PyObject *suffixes; /* tuple of bytes, 2**nkeys */
    span_t values[N_WATCHED]; /* p == NULL: the container has none */
    PyObject *refs[3];
} stamp_t;

typedef struct {
    Py_ssize_t at;
    int32_t flag;
    span_t body, own, suffix;
    span_t watched[N_WATCHED];
} entry_t;

static inline int32_t rd32(const uint8_t *p) {
    return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3]);
}
static inline void wr32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
}
static inline void wr64(uint8_t *p, uint64_t v) { wr32(p, (uint32_t)(v >> 32)); wr32(p + 4, (uint32_t)v); }

/* Strict UTF-8, as Python's decoder: no overlong forms, no surrogates, nothing past U+10FFFF. */
static int utf8_valid(const uint8_t *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) { i++; continue; }
        Py_ssize_t len; uint32_t cp, min;
        if ((c & 0xE0) == 0xC0) { len = 2; cp = c & 0x1F; min = 0x80; }
        else if ((c & 0xF0) == 0xE0) { len = 3; cp = c & 0x0F; min = 0x800; }
        else if ((c & 0xF8) == 0xF0) { len = 4; cp = c & 0x07; min = 0x10000; }
        else return 0;
        if (i + len > n) return 0;
        for (Py_ssize_t j = 1; j < len; j++) {
            if ((s[i + j] & 0xC0) != 0x80) return 0;
            cp = cp << 6 | (s[i + j] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
        i += len;
    }
    return 1;
}

/* Java String.hashCode over the UTF-16 code units of valid UTF-8, as a signed 32-bit value. */
static int32_t java_hash(span_t s) {
    uint32_t h = 0;
    Py_ssize_t i = 0;
    while (i < s.n) {
        uint8_t c = s.p[i];
        uint32_t cp;
        if (c < 0x80) { cp = c; i += 1; }
        else if ((c & 0xE0) == 0xC0) { cp = (c & 0x1Fu) << 6 | (s.p[i + 1] & 0x3Fu); i += 2; }
        else if ((c & 0xF0) == 0xE0) {
            cp = (c & 0x0Fu) << 12 | (s.p[i + 1] & 0x3Fu) << 6 | (s.p[i + 2] & 0x3Fu); i += 3;
        } else {
            cp = (c & 0x07u) << 18 | (s.p[i + 1] & 0x3Fu) << 12 | (s.p[i + 2] & 0x3Fu) << 6 | (s.p[i + 3] & 0x3Fu);
            i += 4;
        }
        if (cp >= 0x10000) {
            cp -= 0x10000;
            h = 31 * h + (0xD800 + (cp >> 10));
            h = 31 * h + (0xDC00 + (cp & 0x3FF));
        } else {
            h = 31 * h + cp;
        }
    }
    return (int32_t)h;
}

static int span_of(PyObject *o, span_t *s) {
    if (o == Py_None) { s->p = NULL; s->n = 0; return 0; }
    if (!PyBytes_Check(o)) { PyErr_SetString(PyExc_TypeError, "expected bytes or None"); return -1; }
    s->p = (const uint8_t *)PyBytes_AS_STRING(o);
    s->n = PyBytes_GET_SIZE(o);
    return 0;
}

static void stamp_release(stamp_t *st) {
    for (int i = 0; i < 3; i++) Py_CLEAR(st->refs[i]);
}

/* Borrow the keys, suffixes and watched values of a wire.batch.Stamp. */
static int stamp_load(PyObject *obj, stamp_t *st) {
    memset(st, 0, sizeof *st);
    static const char *names[3] = {"keys", "suffixes", "values"};
    for (int i = 0; i < 3; i++) {
        st->refs[i] = PyObject_GetAttrString(obj, names[i]);
        if (st->refs[i] == NULL || !PyTuple_Check(st->refs[i])) {
            if (!PyErr_Occurred()) PyErr_Format(PyExc_TypeError, "stamp.%s must be a tuple", names[i]);
            goto fail;
        }
    }
    PyObject *keys = st->refs[0], *values = st->refs[2];
    st->nkeys = PyTuple_GET_SIZE(keys);
    if (st->nkeys > MAX_KEYS || PyTuple_GET_SIZE(st->refs[1]) != ((Py_ssize_t)1 << st->nkeys)
        || PyTuple_GET_SIZE(values) != N_WATCHED) {
        PyErr_SetString(PyExc_ValueError, "malformed stamp");
        goto fail;
    }
    for (Py_ssize_t i = 0; i < st->nkeys; i++)
        if (span_of(PyTuple_GET_ITEM(keys, i), &st->keys[i]) < 0) goto fail;
    for (int i = 0; i < N_WATCHED; i++)
        if (span_of(PyTuple_GET_ITEM(values, i), &st->values[i]) < 0) goto fail;
    for (Py_ssize_t i = 0; i < ((Py_ssize_t)1 << st->nkeys); i++)
        if (!PyBytes_Check(PyTuple_GET_ITEM(st->refs[1], i))) {
            PyErr_SetString(PyExc_TypeError, "stamp.suffixes must hold bytes");
            goto fail;
        }
    st->suffixes = st->refs[1];
    return 0;
fail:
    stamp_release(st);
    return -1;
}

static int raise_record_error(const char *message, Py_ssize_t at) {
    PyObject *exc = PyObject_CallFunction(record_error, "sn", message, at);
    if (exc != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
        Py_DECREF(exc);
    }
    return -1;
}

static inline int span_eq(const uint8_t *p, Py_ssize_t n, span_t s) { return n == s.n && memcmp(p, s.p, n) == 0; }

/* Read the entry at *pos: 1 and *pos advanced, 0 at the end of the body, -1 with an exception set.
 * Properties are read leniently, as wire.message.decode_properties does: segments split on 0x02, a key
 * up to the first 0x01, a segment with an empty key or value skipped, a later duplicate winning. */
static int next_entry(const uint8_t *buf, Py_ssize_t n, Py_ssize_t *pos, const stamp_t *st, entry_t *e) {
    Py_ssize_t at = *pos;
    if (at >= n) return 0;
    char msg[96];
    if (n - at < ENTRY_HEAD + 2) {
        snprintf(msg, sizeof msg, "truncated batch entry: %zd bytes left", n - at);
        return raise_record_error(msg, at);
    }
    e->at = at;
    e->flag = rd32(buf + at + 12);
    int32_t blen = rd32(buf + at + 16);
    Py_ssize_t p = at + ENTRY_HEAD;
    if (blen < 0 || p + blen + 2 > n) {
        snprintf(msg, sizeof msg, "batch entry BODYLEN %d runs past the end of the body", (int)blen);
        return raise_record_error(msg, at);
    }
    e->body.p = buf + p; e->body.n = blen;
    p += blen;
    int16_t pl = (int16_t)((uint16_t)buf[p] << 8 | buf[p + 1]);
    p += 2;
    if (pl < 0 || p + pl > n) {
        snprintf(msg, sizeof msg, "batch entry PROPLEN %d runs past the end of the body", (int)pl);
        return raise_record_error(msg, at);
    }
    e->own.p = buf + p; e->own.n = pl;
    if (!utf8_valid(e->own.p, pl)) return raise_record_error("batch entry properties are not UTF-8", at);
    for (int w = 0; w < N_WATCHED; w++) e->watched[w].p = NULL;
    unsigned mask = 0;
    const uint8_t *s = e->own.p, *end = s + pl;
    while (s <= end) {
        const uint8_t *seg_end = memchr(s, 0x02, end - s);
        if (seg_end == NULL) seg_end = end;
        Py_ssize_t len = seg_end - s;
        const uint8_t *sep = len ? memchr(s, 0x01, len) : NULL;
        if (sep != NULL && sep > s && sep < seg_end - 1) {
            Py_ssize_t klen = sep - s;
            for (Py_ssize_t i = 0; i < st->nkeys; i++)
                if (span_eq(s, klen, st->keys[i])) mask |= 1u << i;
            for (int w = 0; w < N_WATCHED; w++) {
                PyObject *name = PyTuple_GET_ITEM(watched_names, w);
                if (klen == PyBytes_GET_SIZE(name) && memcmp(s, PyBytes_AS_STRING(name), klen) == 0) {
                    e->watched[w].p = sep + 1;
                    e->watched[w].n = seg_end - sep - 1;
                }
            }
        }
        s = seg_end + 1;
    }
    for (int w = 0; w < N_WATCHED; w++)
        if (e->watched[w].p == NULL) e->watched[w] = st->values[w];
    PyObject *suffix = PyTuple_GET_ITEM(st->suffixes, mask);
    e->suffix.p = (const uint8_t *)PyBytes_AS_STRING(suffix);
    e->suffix.n = PyBytes_GET_SIZE(suffix);
    *pos = p + pl;
    return 1;
}

/* Whether a separator goes between the entry's own properties and the suffix. */
static inline int needs_separator(const entry_t *e) {
    return e->suffix.n && e->own.n && e->own.p[e->own.n - 1] != 0x02;
}

static inline Py_ssize_t stored_len(const entry_t *e) { return e->own.n + e->suffix.n + needs_separator(e); }

static int check_configured(void) {
    if (record_error == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "wire._batchc.configure() was not called");
        return -1;
    }
    return 0;
}

static PyObject *batch_measure(PyObject *self, PyObject *args) {
    Py_buffer body;
    PyObject *stamp_obj;
    Py_ssize_t overhead;
    if (check_configured() < 0 || !PyArg_ParseTuple(args, "y*On:measure", &body, &stamp_obj, &overhead)) return NULL;
    stamp_t st;
    if (stamp_load(stamp_obj, &st) < 0) { PyBuffer_Release(&body); return NULL; }
    Py_ssize_t pos = 0, count = 0, total = 0;
    int wait = 1, r;
    entry_t e;
    while ((r = next_entry(body.buf, body.len, &pos, &st, &e)) > 0) {
        Py_ssize_t plen = stored_len(&e);
        if (plen > max_props_len) {
            PyErr_Format(too_long_error, "batch entry properties are %zd bytes at byte offset %zd; at most %zd",
                         plen, e.at, max_props_len);
            r = -1;
            break;
        }
        if (count == 0) wait = !(e.watched[W_WAIT].p != NULL && e.watched[W_WAIT].n == 5
                                 && memcmp(e.watched[W_WAIT].p, "false", 5) == 0);
        count++;
        total += overhead + e.body.n + plen;
    }
    stamp_release(&st);
    PyBuffer_Release(&body);
    if (r < 0) return NULL;
    return Py_BuildValue("nnO", count, total, wait ? Py_True : Py_False);
}

typedef struct { char *p; Py_ssize_t n, cap; } growbuf_t;

static char *grow(growbuf_t *g, Py_ssize_t more) {
    if (g->n + more > g->cap) {
        Py_ssize_t cap = g->cap ? g->cap : 256;
        while (cap < g->n + more) cap *= 2;
        char *p = PyMem_Realloc(g->p, cap);
        if (p == NULL) { PyErr_NoMemory(); return NULL; }
        g->p = p; g->cap = cap;
    }
    char *at = g->p + g->n;
    g->n += more;
    return at;
}

/* CRC-32 as zlib.crc32 / java.util.zip.CRC32 compute it, continuing from ``start``. */
static uint32_t crc32_of(const uint8_t *p, Py_ssize_t n, uint32_t start) {
    return crc32_fast(start, p, (size_t)n);
}

static int add_item(growbuf_t *items, const uint8_t *key, Py_ssize_t n, uint32_t prefix_crc, int64_t phys) {
    uint32_t h = crc32_of(key, n, prefix_crc);
    uint8_t *at = (uint8_t *)grow(items, ITEM_SIZE);
    if (at == NULL) return -1;
    wr32(at, h & 0x7FFFFFFF);
    wr64(at + 4, (uint64_t)phys);
    return 0;
}

static PyObject *batch_write(PyObject *self, PyObject *args) {
    Py_buffer out, body, template, tail;
    PyObject *stamp_obj, *index_prefix, *id_prefix;
    Py_ssize_t pos;
    long long queue_offset, phys;
    if (check_configured() < 0
        || !PyArg_ParseTuple(args, "w*ny*Oy*y*LLOU:write", &out, &pos, &body, &stamp_obj, &template, &tail,
                             &queue_offset, &phys, &index_prefix, &id_prefix))
        return NULL;
    PyObject *result = NULL;
    growbuf_t units = {0}, items = {0}, ids = {0}, uniqs = {0};
    stamp_t st;
    int loaded = 0;
    Py_ssize_t id_len;
    const char *id_chars = PyUnicode_AsUTF8AndSize(id_prefix, &id_len);
    if (id_chars == NULL) goto done;
    uint32_t prefix_crc = 0;
    int indexing = index_prefix != Py_None;
    if (indexing) {
        if (!PyBytes_Check(index_prefix)) { PyErr_SetString(PyExc_TypeError, "index_prefix must be bytes or None"); goto done; }
        prefix_crc = crc32_of((const uint8_t *)PyBytes_AS_STRING(index_prefix), PyBytes_GET_SIZE(index_prefix), 0);
    }
    if (template.len < POS_PHYSICALOFFSET + 8 + 4) { PyErr_SetString(PyExc_ValueError, "template too short"); goto done; }
    if (stamp_load(stamp_obj, &st) < 0) goto done;
    loaded = 1;
    uint8_t *dst = out.buf;
    Py_ssize_t bpos = 0, flen = template.len;
    entry_t e;
    int r;
    while ((r = next_entry(body.buf, body.len, &bpos, &st, &e)) > 0) {
        int sep = needs_separator(&e);
        Py_ssize_t plen = e.own.n + sep + e.suffix.n;
        Py_ssize_t size = flen + e.body.n + tail.len + 2 + plen;
        if (pos < 0 || pos + size > out.len || plen > max_props_len) {
            PyErr_SetString(PyExc_ValueError, plen > max_props_len ? "properties too long (call measure first)"
                                                                   : "the batch does not fit in the buffer");
            goto done;
        }
        uint32_t crc = crc32_of(e.body.p, e.body.n, 0);
        uint8_t *rec = dst + pos;
        memcpy(rec, template.buf, flen);
        wr32(rec + POS_TOTALSIZE, (uint32_t)size);
        wr32(rec + POS_BODYCRC, crc & 0x7FFFFFFF);
        wr32(rec + POS_FLAG, (uint32_t)e.flag);
        wr64(rec + POS_QUEUEOFFSET, (uint64_t)queue_offset);
        wr64(rec + POS_PHYSICALOFFSET, (uint64_t)phys);
        wr32(rec + flen - 4, (uint32_t)e.body.n);
        uint8_t *p = rec + flen;
        memcpy(p, e.body.p, e.body.n); p += e.body.n;
        memcpy(p, tail.buf, tail.len); p += tail.len;
        p[0] = (uint8_t)(plen >> 8); p[1] = (uint8_t)plen; p += 2;
        memcpy(p, e.own.p, e.own.n); p += e.own.n;
        if (sep) *p++ = 0x02;
        memcpy(p, e.suffix.p, e.suffix.n);

        uint8_t *unit = (uint8_t *)grow(&units, UNIT_SIZE);
        if (unit == NULL) goto done;
        span_t tags = e.watched[W_TAGS];
        int64_t tags_code = (tags.p != NULL && tags.n) ? (int64_t)java_hash(tags) : 0;
        wr64(unit, (uint64_t)phys);
        wr32(unit + 8, (uint32_t)size);
        wr64(unit + 12, (uint64_t)tags_code);

        span_t uniq = e.watched[W_UNIQ], keys = e.watched[W_KEYS];
        if (indexing) {
            if (uniq.p != NULL && uniq.n && add_item(&items, uniq.p, uniq.n, prefix_crc, phys) < 0) goto done;
            if (keys.p != NULL) {
                const uint8_t *k = keys.p, *kend = keys.p + keys.n;
                while (k <= kend) {
                    const uint8_t *space = memchr(k, ' ', kend - k);
                    if (space == NULL) space = kend;
                    if (space > k && add_item(&items, k, space - k, prefix_crc, phys) < 0) goto done;
                    k = space + 1;
                }
            }
        }
        char *id = grow(&ids, (ids.n ? 1 : 0) + id_len + 16);
        if (id == NULL) goto done;
        if (ids.n > id_len + 16) *id++ = ',';
        memcpy(id, id_chars, id_len);
        for (int d = 15; d >= 0; d--) id[id_len + 15 - d] = "0123456789ABCDEF"[((uint64_t)phys >> (4 * d)) & 0xF];
        if (uniq.p != NULL && uniq.n) {
            char *u = grow(&uniqs, (uniqs.n ? 1 : 0) + uniq.n);
            if (u == NULL) goto done;
            if (uniqs.n > uniq.n) *u++ = ',';
            memcpy(u, uniq.p, uniq.n);
        }
        pos += size;
        phys += size;
        queue_offset++;
    }
    if (r < 0) goto done;
    result = Py_BuildValue("ny#y#s#s#", pos, units.p ? units.p : "", units.n, items.p ? items.p : "", items.n,
                           ids.p ? ids.p : "", ids.n, uniqs.p ? uniqs.p : "", uniqs.n);
done:
    if (loaded) stamp_release(&st);
    PyMem_Free(units.p); PyMem_Free(items.p); PyMem_Free(ids.p); PyMem_Free(uniqs.p);
    PyBuffer_Release(&out); PyBuffer_Release(&body); PyBuffer_Release(&template); PyBuffer_Release(&tail);
    return result;
}

static PyObject *configure(PyObject *self, PyObject *args) {
    PyObject *rec, *too_long, *names;
    Py_ssize_t max_props;
    if (!PyArg_ParseTuple(args, "OOO!n:configure", &rec, &too_long, &PyTuple_Type, &names, &max_props)) return NULL;
    if (PyTuple_GET_SIZE(names) != N_WATCHED) {
        PyErr_SetString(PyExc_ValueError, "configure: expected the 4 watched property names (TAGS, KEYS, UNIQ_KEY, WAIT)");
        return NULL;
    }
    for (int i = 0; i < N_WATCHED; i++)
        if (!PyBytes_Check(PyTuple_GET_ITEM(names, i))) { PyErr_SetString(PyExc_TypeError, "names must be bytes"); return NULL; }
    Py_INCREF(rec); Py_XSETREF(record_error, rec);
    Py_INCREF(too_long); Py_XSETREF(too_long_error, too_long);
    Py_INCREF(names); Py_XSETREF(watched_names, names);
    max_props_len = max_props;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"configure", configure, METH_VARARGS, "configure(RecordError, PropertiesTooLong, watched names, max properties length)"},
    {"measure", batch_measure, METH_VARARGS, "measure(body, stamp, overhead) -> (count, total, wait); see wire.batch.py_measure"},
    {"write", batch_write, METH_VARARGS,
     "write(buf, pos, body, stamp, template, tail, queue_offset, commitlog_offset, index_prefix, id_prefix); "
     "see wire.batch.py_write"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_batchc", "C implementation of wire.batch", -1, methods};

PyMODINIT_FUNC PyInit__batchc(void) { return PyModule_Create(&module); }
