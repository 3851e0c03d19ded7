/* server.store._indexc: IndexFile.put for a run of items, in C.
 *
 * A batch send indexes every message's UNIQ_KEY (and KEYS tokens); one Python call per item was a tenth
 * of the reactor's time on that path. IndexFile.put in server/store/index.py is the specification and
 * tests/store/test_index.py holds the two byte-for-byte equal. The caller handles the file's first item
 * (it sets the file's begin fields) and keeps the header fields; this only writes items and slots.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

enum { HEADER_SIZE = 40, SLOT_SIZE = 4, ITEM_SIZE = 20, IN_SIZE = 12 };

static inline uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}
static inline void wr32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
}

/* put_items(mm, items, start, count, index_num, slot_num, items_base, begin_ts, store_ts)
 *   -> (next item, index count, new slots used, largest commit-log offset or -1)
 * items: packed (u32 key hash, i64 commit-log offset); count: the file's index count (>= 2). */
static PyObject *put_items(PyObject *self, PyObject *args) {
    Py_buffer mm, items;
    Py_ssize_t start, count, index_num, slot_num, items_base;
    long long begin_ts, store_ts;
    if (!PyArg_ParseTuple(args, "w*y*nnnnnLL:put_items", &mm, &items, &start, &count, &index_num, &slot_num,
                          &items_base, &begin_ts, &store_ts))
        return NULL;
    Py_ssize_t n = items.len / IN_SIZE;
    if (start < 0 || count < 2 || slot_num <= 0 || index_num < count
        || items_base != HEADER_SIZE + slot_num * SLOT_SIZE || mm.len < items_base + index_num * ITEM_SIZE) {
        PyBuffer_Release(&mm); PyBuffer_Release(&items);
        PyErr_SetString(PyExc_ValueError, "put_items: inconsistent index file geometry");
        return NULL;
    }
    long long d = store_ts - begin_ts;
    uint32_t diff = d < 0 ? 0 : (d / 1000 > 0x7FFFFFFF ? 0x7FFFFFFF : (uint32_t)(d / 1000));
    uint8_t *base = mm.buf;
    const uint8_t *in = items.buf;
    Py_ssize_t i = start, slots = 0;
    long long max_phys = -1;
    for (; i < n && count < index_num; i++, count++) {
        uint32_t h = rd32(in + i * IN_SIZE);
        const uint8_t *pp = in + i * IN_SIZE + 4;
        uint32_t phys_hi = rd32(pp), phys_lo = rd32(pp + 4);
        long long phys = (long long)((uint64_t)phys_hi << 32 | phys_lo);
        uint8_t *slot = base + HEADER_SIZE + (Py_ssize_t)(h % (uint32_t)slot_num) * SLOT_SIZE;
        int32_t prev = (int32_t)rd32(slot);
        if (prev <= 0 || prev > count) prev = 0;
        uint8_t *item = base + items_base + count * ITEM_SIZE;
        wr32(item, h);
        wr32(item + 4, phys_hi);
        wr32(item + 8, phys_lo);
        wr32(item + 12, diff);
        wr32(item + 16, (uint32_t)prev);
        if (prev == 0) slots++;
        /* item before slot: a torn put leaves an unreachable item, never a slot pointing at garbage */
        wr32(slot, (uint32_t)count);
        if (phys > max_phys) max_phys = phys;
    }
    PyBuffer_Release(&mm);
    PyBuffer_Release(&items);
    return Py_BuildValue("nnnL", i, count, slots, max_phys);
}

static PyMethodDef methods[] = {
    {"put_items", put_items, METH_VARARGS, "IndexFile.put for a run of packed items; see server/store/index.py"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_indexc", "C implementation of IndexFile.put_many", -1,
                                    methods};

PyMODINIT_FUNC PyInit__indexc(void) { return PyModule_Create(&module); }
