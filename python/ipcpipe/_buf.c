/* ipcpipe._core: buffers taken from Python objects without a copy.  An
 * object with __cuda_array_interface__ (PyTorch's and CuPy's CUDA tensors)
 * gives its device pointer, else the buffer protocol (NumPy arrays,
 * bytearray, memoryview), else DLPack (PyTorch's CPU tensors); it must be
 * C-contiguous, and a receive buffer writable (DLPack says nothing of
 * that: its producer's word). */
#include "_core.h"

#include <stdlib.h>
#include <string.h>

#include "ipcpipe_cuda.h"

void core_buf_release(core_buf_t *b)
{
    /* An exception being raised is kept: the releases may run
     * deallocations that call the library. */
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    if (b->has_view)
        PyBuffer_Release(&b->view);
    b->has_view = 0;
    if (b->dl && b->dl->deleter)
        b->dl->deleter(b->dl);
    b->dl = NULL;
    if (b->mem_export)
        core_mem_untake(b);
    b->mem_export = 0;
    Py_CLEAR(b->owner);
    Py_CLEAR(b->also);
    PyErr_Restore(type, value, tb);
}

/* Bytes of one element of an array-interface type string ("<f4": 4). */
static int core_typestr_size(PyObject *ts, size_t *size)
{
    const char *s = PyUnicode_Check(ts) ? PyUnicode_AsUTF8(ts) : NULL;
    long n;
    char *end;
    if (!s || strlen(s) < 3)
        return -1;
    n = strtol(s + 2, &end, 10);
    if (*end || n <= 0)
        return -1;
    *size = (size_t)n;
    return 0;
}

/* __cuda_array_interface__ (version 2 and later): 1 when obj has one and b
 * was filled, 0 when it has none, -1 with an exception set. */
static int core_buf_cai(PyObject *obj, int writable, core_buf_t *b)
{
    PyObject *cai = PyObject_GetAttrString(obj, "__cuda_array_interface__");
    if (!cai) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            return -1;
        PyErr_Clear();
        return 0;
    }
    PyObject *data =
        PyDict_Check(cai) ? PyDict_GetItemString(cai, "data") : NULL;
    PyObject *shape =
        PyDict_Check(cai) ? PyDict_GetItemString(cai, "shape") : NULL;
    PyObject *ts =
        PyDict_Check(cai) ? PyDict_GetItemString(cai, "typestr") : NULL;
    PyObject *strides =
        PyDict_Check(cai) ? PyDict_GetItemString(cai, "strides") : NULL;
    size_t item = 0, n = 1;
    int rc = -1;
    if (!data || !PyTuple_Check(data) || PyTuple_Size(data) != 2 || !shape ||
        !PyTuple_Check(shape) || !ts || core_typestr_size(ts, &item) != 0) {
        PyErr_SetString(PyExc_ValueError,
                        "__cuda_array_interface__ lacks data, shape or "
                        "typestr");
        goto out;
    }
    for (Py_ssize_t i = 0; i < PyTuple_Size(shape); i++) {
        long long d = PyLong_AsLongLong(PyTuple_GetItem(shape, i));
        if (d < 0 || PyErr_Occurred())
            goto bad_shape;
        n *= (size_t)d;
    }
    /* Strides, when given, must be those of C order. */
    if (strides && strides != Py_None &&
        (!PyTuple_Check(strides) ||
         PyTuple_Size(strides) != PyTuple_Size(shape))) {
        PyErr_SetString(PyExc_ValueError,
                        "__cuda_array_interface__ has bad strides");
        goto out;
    }
    if (strides && strides != Py_None) {
        size_t want = item;
        for (Py_ssize_t i = PyTuple_Size(shape) - 1; i >= 0; i--) {
            long long st = PyLong_AsLongLong(PyTuple_GetItem(strides, i));
            long long d = PyLong_AsLongLong(PyTuple_GetItem(shape, i));
            if (d > 1 && (size_t)st != want) {
                PyErr_SetString(PyExc_ValueError,
                                "the CUDA array is not C-contiguous");
                goto out;
            }
            want *= (size_t)d;
        }
    }
    if (writable && PyObject_IsTrue(PyTuple_GetItem(data, 1))) {
        PyErr_SetString(PyExc_ValueError,
                        "a receive buffer must be writable; this CUDA array "
                        "is read-only");
        goto out;
    }
    b->ptr = PyLong_AsVoidPtr(PyTuple_GetItem(data, 0));
    if (PyErr_Occurred())
        goto out;
    b->len = n * item;
    b->owner = obj;
    Py_INCREF(obj);
    rc = 1;
    goto out;
bad_shape:
    PyErr_SetString(PyExc_ValueError,
                    "__cuda_array_interface__ has a bad shape");
out:
    Py_DECREF(cai);
    return rc;
}

/* DLPack (obj.__dlpack__()): 1 when obj has it and b was filled, 0 when
 * it has none, -1 with an exception set.  The tensor is ours once taken
 * (the capsule renamed "used_dltensor"); its deleter runs at release. */
static int core_buf_dlpack(PyObject *obj, core_buf_t *b)
{
    if (!PyObject_HasAttrString(obj, "__dlpack__"))
        return 0;
    PyObject *cap = PyObject_CallMethod(obj, "__dlpack__", NULL);
    if (!cap)
        return -1;
    core_dl_managed_t *m = PyCapsule_GetPointer(cap, "dltensor");
    if (!m) {
        Py_DECREF(cap);
        return -1;
    }
    PyCapsule_SetName(cap, "used_dltensor");
    Py_DECREF(cap);
    b->dl = m;
    const core_dl_tensor_t *t = &m->dl_tensor;
    size_t item = ((size_t)t->dtype.bits * t->dtype.lanes + 7) / 8, n = 1;
    int type = t->device.device_type;
    if (type != 1 && type != 2 && type != 3 && type != 13) {
        PyErr_Format(PyExc_ValueError,
                     "a DLPack tensor on device type %d: host and CUDA "
                     "memory only",
                     type);
        return -1;
    }
    for (int32_t i = t->ndim - 1; i >= 0; i--) {
        if (t->strides && t->shape[i] > 1 && (size_t)t->strides[i] != n) {
            PyErr_SetString(PyExc_ValueError,
                            "the DLPack tensor is not C-contiguous");
            return -1;
        }
        n *= (size_t)t->shape[i];
    }
    b->ptr = (char *)t->data + t->byte_offset;
    b->len = n * item;
    b->owner = obj;
    Py_INCREF(obj);
    return 1;
}

/* ValueError naming what a buffer must be, with why (may be NULL). */
static int core_buf_refuse(int writable, PyObject *why)
{
    PyErr_Format(PyExc_ValueError,
                 "%s buffer must be C-contiguous%s and expose "
                 "__cuda_array_interface__, the buffer protocol or "
                 "__dlpack__ (%S)",
                 writable ? "a receive" : "a send",
                 writable ? " and writable" : "", why ? why : Py_None);
    return -1;
}

/* The buffer protocol first: NumPy arrays and bytearrays, the common case,
 * without the failed attribute look-ups of the others (a micro-second of a
 * small message's call).  An object whose buffer is refused (device
 * memory from Comm.alloc) may still have a CUDA array interface. */
int core_buf_get(PyObject *obj, int writable, core_buf_t *b)
{
    int flags = PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0), r;
    memset(b, 0, sizeof(*b));
    /* Memory from Comm.alloc, host or device: counted as a view while the
     * transfer holds it, so that it is not freed under it. */
    if ((r = core_mem_take(obj, b)) != 0)
        return r > 0 ? 0 : -1;
    if (PyObject_CheckBuffer(obj)) {
        if (PyObject_GetBuffer(obj, &b->view, flags) == 0) {
            b->has_view = 1;
            b->ptr = b->view.buf;
            b->len = (size_t)b->view.len;
            b->owner = obj;
            Py_INCREF(obj);
            return 0;
        }
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        if ((r = core_buf_cai(obj, writable, b)) == 0)
            core_buf_refuse(writable, value);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        return r > 0 ? 0 : -1;
    }
    if ((r = core_buf_cai(obj, writable, b)) != 0)
        return r > 0 ? 0 : -1;
    if ((r = core_buf_dlpack(obj, b)) != 0) {
        if (r < 0)
            core_buf_release(b);
        return r > 0 ? 0 : -1;
    }
    return core_buf_refuse(writable, NULL);
}

/* The CUDA stream of a stream= argument: None (*none set), an int handle,
 * or an object with cuda_stream (PyTorch) or ptr (CuPy).  0 or -1 with
 * TypeError. */
int core_stream_arg(PyObject *o, ipcp_stream_t *s, int *none)
{
    PyObject *h = NULL;
    *none = o == Py_None;
    *s = NULL;
    if (*none)
        return 0;
    if (PyLong_Check(o)) {
        h = o;
        Py_INCREF(h);
    } else if (!(h = PyObject_GetAttrString(o, "cuda_stream"))) {
        PyErr_Clear();
        h = PyObject_GetAttrString(o, "ptr");
    }
    if (!h || !PyLong_Check(h)) {
        PyErr_Clear();
        Py_XDECREF(h);
        PyErr_Format(PyExc_TypeError,
                     "stream %R: a CUDA stream handle (int), or an object with "
                     "cuda_stream (torch.cuda.Stream) or ptr (cupy Stream)",
                     o);
        return -1;
    }
    *s = (ipcp_stream_t)PyLong_AsVoidPtr(h);
    Py_DECREF(h);
    return PyErr_Occurred() ? -1 : 0;
}
