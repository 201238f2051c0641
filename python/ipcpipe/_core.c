/* ipcpipe._core: the public C API (include/ipcpipe.h) as Python types.
 *
 * A buffer is taken without a copy: an object with __cuda_array_interface__
 * (PyTorch's and CuPy's CUDA tensors) gives its device pointer, else the
 * buffer protocol (NumPy arrays, bytearray, memoryview), else DLPack
 * (PyTorch's CPU tensors); it must be C-contiguous, and a receive buffer
 * writable (DLPack says nothing of that: its producer's word).  Blocking calls
 * release the GIL.  A request keeps its buffer (and the object behind it)
 * until it is waited for or tested done; one dropped before that is
 * waited for, so that no transfer outlives its memory. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <string.h>

#include "ipcpipe.h"

static PyObject *core_error; /* ipcpipe.Error */

/* Raises ipcpipe.Error(status, name, message) from the last error. */
static PyObject *core_raise(ipcp_status_t st, const char *what)
{
    PyObject *args =
        Py_BuildValue("(iss)", (int)st, ipcp_strerror(st), ipcp_last_error());
    if (args) {
        PyErr_SetObject(core_error, args);
        Py_DECREF(args);
    }
    (void)what;
    return NULL;
}

/* ---- Buffers ------------------------------------------------------------- */

/* DLPack's exchange structures (dlpack.h, ABI version 0.x), as the
 * producer's capsule "dltensor" holds them. */
typedef struct {
    int32_t device_type; /* 1 CPU, 2 CUDA, 3 CUDA host, 13 CUDA managed */
    int32_t device_id;
} core_dl_device_t;

typedef struct {
    void *data;
    core_dl_device_t device;
    int32_t ndim;
    struct {
        uint8_t code, bits;
        uint16_t lanes;
    } dtype;
    int64_t *shape;
    int64_t *strides; /* in elements; NULL: C order */
    uint64_t byte_offset;
} core_dl_tensor_t;

typedef struct core_dl_managed {
    core_dl_tensor_t dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct core_dl_managed *self);
} core_dl_managed_t;

typedef struct core_buf {
    void *ptr;
    size_t len;
    int has_view; /* view holds a buffer-protocol export */
    Py_buffer view;
    PyObject *owner;       /* the object behind ptr (a reference) */
    core_dl_managed_t *dl; /* a DLPack tensor we consumed */
} core_buf_t;

static void core_buf_release(core_buf_t *b)
{
    if (b->has_view)
        PyBuffer_Release(&b->view);
    b->has_view = 0;
    if (b->dl && b->dl->deleter)
        b->dl->deleter(b->dl);
    b->dl = NULL;
    Py_CLEAR(b->owner);
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

/* The memory of obj, as a receive buffer when writable. */
static int core_buf_get(PyObject *obj, int writable, core_buf_t *b)
{
    memset(b, 0, sizeof(*b));
    int r = core_buf_cai(obj, writable, b);
    if (r)
        return r > 0 ? 0 : -1;
    int flags = PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
    if (!PyObject_CheckBuffer(obj) && (r = core_buf_dlpack(obj, b)) != 0) {
        if (r < 0)
            core_buf_release(b);
        return r > 0 ? 0 : -1;
    }
    if (PyObject_GetBuffer(obj, &b->view, flags) != 0) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_Format(PyExc_ValueError,
                     "%s buffer must be C-contiguous%s and expose "
                     "__cuda_array_interface__, the buffer protocol or "
                     "__dlpack__ (%S)",
                     writable ? "a receive" : "a send",
                     writable ? " and writable" : "", value ? value : Py_None);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        return -1;
    }
    b->has_view = 1;
    b->ptr = b->view.buf;
    b->len = (size_t)b->view.len;
    b->owner = obj;
    Py_INCREF(obj);
    return 0;
}

/* ---- Info ---------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD Py_ssize_t nbytes;
    PyObject *path;
} core_info_t;

static void core_info_dealloc(core_info_t *self)
{
    Py_XDECREF(self->path);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *core_info_repr(core_info_t *self)
{
    return PyUnicode_FromFormat("Info(nbytes=%zd, path=%R)", self->nbytes,
                                self->path);
}

static PyMemberDef core_info_members[] = {
    {"nbytes", T_PYSSIZET, offsetof(core_info_t, nbytes), READONLY,
     "bytes moved"},
    {"path", T_OBJECT, offsetof(core_info_t, path), READONLY,
     "the path that moved them: 'direct', 'staged', 'eager', 'striped' or "
     "'lane'"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject core_info_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ipcpipe.Info",
    .tp_basicsize = sizeof(core_info_t),
    .tp_dealloc = (destructor)core_info_dealloc,
    .tp_repr = (reprfunc)core_info_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "What a completed transfer moved, and how.",
    .tp_members = core_info_members,
};

static PyObject *core_info_new(const ipcp_xfer_info_t *info)
{
    core_info_t *i = PyObject_New(core_info_t, &core_info_type);
    if (!i)
        return NULL;
    i->nbytes = (Py_ssize_t)info->nbytes;
    i->path = PyUnicode_FromString(ipcp_path_name(info->path));
    if (!i->path) {
        Py_DECREF(i);
        return NULL;
    }
    return (PyObject *)i;
}

/* ---- Comm ---------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD ipcp_comm_t *comm;
} core_comm_t;

static int core_comm_open(core_comm_t *self)
{
    if (self->comm)
        return 0;
    PyErr_SetString(core_error, "the communicator is closed");
    return -1;
}

static int core_path_arg(PyObject *o, ipcp_path_t *path)
{
    static const ipcp_path_t paths[] = {IPCP_PATH_AUTO, IPCP_PATH_DIRECT,
                                        IPCP_PATH_STAGED, IPCP_PATH_BOUNCE};
    const char *s = o == Py_None ? "auto" : PyUnicode_AsUTF8(o);
    if (!s)
        return -1;
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
        if (strcmp(s, ipcp_path_name(paths[i])) == 0) {
            *path = paths[i];
            return 0;
        }
    PyErr_Format(PyExc_ValueError,
                 "path %R: 'auto', 'direct', 'staged' or 'bounce' (None: "
                 "IPCPIPE_PATH)",
                 o);
    return -1;
}

static int core_comm_init(core_comm_t *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"rank", "size", "job", "timeout", "path", NULL};
    PyObject *rank = Py_None, *size = Py_None, *timeout = Py_None,
             *path = Py_None;
    const char *job = NULL;
    ipcp_comm_params_t p;
    ipcp_status_t st;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|OOzOO", kwlist, &rank, &size,
                                     &job, &timeout, &path))
        return -1;
    if (self->comm) {
        PyErr_SetString(core_error, "the communicator is open already");
        return -1;
    }
    ipcp_comm_params_init(&p);
    if (rank != Py_None && (p.rank = (int)PyLong_AsLong(rank)) < 0)
        goto bad;
    if (size != Py_None && (p.size = (int)PyLong_AsLong(size)) < 1)
        goto bad;
    if (timeout != Py_None && !((p.timeout_s = PyFloat_AsDouble(timeout)) > 0))
        goto bad;
    if (core_path_arg(path, &p.path) != 0)
        return -1;
    p.job_id = job;
    PyThreadState *ts = PyEval_SaveThread();
    st = ipcp_init(&p, &self->comm);
    PyEval_RestoreThread(ts);
    if (st != IPCP_OK) {
        self->comm = NULL;
        core_raise(st, "init");
        return -1;
    }
    return 0;
bad:
    if (!PyErr_Occurred())
        PyErr_SetString(PyExc_ValueError,
                        "rank must be >= 0, size >= 1 and timeout > 0");
    return -1;
}

static PyObject *core_comm_close(core_comm_t *self, PyObject *unused)
{
    ipcp_status_t st = IPCP_OK;
    ipcp_comm_t *c = self->comm;
    (void)unused;
    self->comm = NULL;
    if (c) {
        PyThreadState *ts = PyEval_SaveThread();
        st = ipcp_finalize(c);
        PyEval_RestoreThread(ts);
    }
    if (st != IPCP_OK)
        return core_raise(st, "finalize");
    Py_RETURN_NONE;
}

static void core_comm_dealloc(core_comm_t *self)
{
    if (self->comm) {
        PyThreadState *ts = PyEval_SaveThread();
        (void)ipcp_finalize(self->comm);
        PyEval_RestoreThread(ts);
        self->comm = NULL;
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *core_comm_barrier(core_comm_t *self, PyObject *unused)
{
    ipcp_status_t st;
    (void)unused;
    if (core_comm_open(self) != 0)
        return NULL;
    PyThreadState *ts = PyEval_SaveThread();
    st = ipcp_barrier(self->comm);
    PyEval_RestoreThread(ts);
    if (st != IPCP_OK)
        return core_raise(st, "barrier");
    Py_RETURN_NONE;
}

static PyObject *core_comm_enter(PyObject *self, PyObject *unused)
{
    (void)unused;
    Py_INCREF(self);
    return self;
}

static PyObject *core_comm_exit(core_comm_t *self, PyObject *args)
{
    (void)args;
    return core_comm_close(self, NULL);
}

static PyObject *core_comm_get(core_comm_t *self, void *which)
{
    if (core_comm_open(self) != 0)
        return NULL;
    if (which == (void *)0)
        return PyLong_FromLong(ipcp_comm_rank(self->comm));
    if (which == (void *)1)
        return PyLong_FromLong(ipcp_comm_size(self->comm));
    return PyUnicode_FromString(ipcp_comm_job(self->comm));
}

/* ---- Request ------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD ipcp_request_t *req;
    core_buf_t buf;
    PyObject *comm; /* keeps the communicator open while it runs */
} core_req_t;

static PyTypeObject core_req_type;

static void core_req_end(core_req_t *self)
{
    self->req = NULL;
    core_buf_release(&self->buf);
    Py_CLEAR(self->comm);
}

static PyObject *core_req_wait(core_req_t *self, PyObject *unused)
{
    ipcp_xfer_info_t info;
    ipcp_status_t st;
    (void)unused;
    if (!self->req) {
        PyErr_SetString(core_error, "the request was completed already");
        return NULL;
    }
    PyThreadState *ts = PyEval_SaveThread();
    st = ipcp_wait(self->req, &info);
    PyEval_RestoreThread(ts);
    core_req_end(self);
    if (st != IPCP_OK)
        return core_raise(st, "wait");
    return core_info_new(&info);
}

static PyObject *core_req_test(core_req_t *self, PyObject *unused)
{
    ipcp_xfer_info_t info;
    int done = 0;
    (void)unused;
    if (!self->req) {
        PyErr_SetString(core_error, "the request was completed already");
        return NULL;
    }
    ipcp_status_t st = ipcp_test(self->req, &done, &info);
    if (!done)
        Py_RETURN_NONE;
    core_req_end(self);
    if (st != IPCP_OK)
        return core_raise(st, "test");
    return core_info_new(&info);
}

static void core_req_dealloc(core_req_t *self)
{
    /* Its memory must outlive the transfer. */
    if (self->req) {
        PyThreadState *ts = PyEval_SaveThread();
        (void)ipcp_wait(self->req, NULL);
        PyEval_RestoreThread(ts);
    }
    core_req_end(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef core_req_methods[] = {
    {"wait", (PyCFunction)core_req_wait, METH_NOARGS,
     "Waits for the transfer; returns its Info, or raises ipcpipe.Error."},
    {"test", (PyCFunction)core_req_test, METH_NOARGS,
     "Info when the transfer completed, None while it runs."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject core_req_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ipcpipe.Request",
    .tp_basicsize = sizeof(core_req_t),
    .tp_dealloc = (destructor)core_req_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A transfer posted with isend or irecv.",
    .tp_methods = core_req_methods,
};

/* ---- Transfers ----------------------------------------------------------- */

/* Posts a send (recv 0) or receive of buf; returns a new Request. */
static PyObject *core_post(core_comm_t *self, PyObject *args, PyObject *kw,
                           int recv)
{
    static char *kwlist[] = {"buf", "peer", "tag", "stream", NULL};
    PyObject *obj, *stream = Py_None;
    int peer, tag = 0;
    ipcp_status_t st;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "Oi|iO", kwlist, &obj, &peer,
                                     &tag, &stream))
        return NULL;
    if (core_comm_open(self) != 0)
        return NULL;
    if (stream != Py_None) {
        PyErr_SetString(PyExc_NotImplementedError,
                        "stream-ordered transfers are not in this version "
                        "of the Python package; pass stream=None");
        return NULL;
    }
    core_req_t *r = PyObject_New(core_req_t, &core_req_type);
    if (!r)
        return NULL;
    r->req = NULL;
    r->comm = NULL;
    if (core_buf_get(obj, recv, &r->buf) != 0) {
        memset(&r->buf, 0, sizeof(r->buf));
        Py_DECREF(r);
        return NULL;
    }
    PyThreadState *ts = PyEval_SaveThread();
    st = recv ? ipcp_irecv(self->comm, r->buf.ptr, r->buf.len, peer, tag,
                           &r->req)
              : ipcp_isend(self->comm, r->buf.ptr, r->buf.len, peer, tag,
                           &r->req);
    PyEval_RestoreThread(ts);
    if (st != IPCP_OK) {
        r->req = NULL;
        Py_DECREF(r);
        return core_raise(st, recv ? "irecv" : "isend");
    }
    r->comm = (PyObject *)self;
    Py_INCREF(self);
    return (PyObject *)r;
}

static PyObject *core_isend(core_comm_t *self, PyObject *args, PyObject *kw)
{
    return core_post(self, args, kw, 0);
}

static PyObject *core_irecv(core_comm_t *self, PyObject *args, PyObject *kw)
{
    return core_post(self, args, kw, 1);
}

static PyObject *core_blocking(core_comm_t *self, PyObject *args, PyObject *kw,
                               int recv)
{
    PyObject *r = core_post(self, args, kw, recv);
    if (!r)
        return NULL;
    PyObject *info = core_req_wait((core_req_t *)r, NULL);
    Py_DECREF(r);
    return info;
}

static PyObject *core_send(core_comm_t *self, PyObject *args, PyObject *kw)
{
    return core_blocking(self, args, kw, 0);
}

static PyObject *core_recv(core_comm_t *self, PyObject *args, PyObject *kw)
{
    return core_blocking(self, args, kw, 1);
}

static PyMethodDef core_comm_methods[] = {
    {"send", (PyCFunction)(void (*)(void))core_send,
     METH_VARARGS | METH_KEYWORDS,
     "send(buf, peer, tag=0, stream=None) -> Info: sends buf and returns "
     "once it is in the peer's receive buffer."},
    {"recv", (PyCFunction)(void (*)(void))core_recv,
     METH_VARARGS | METH_KEYWORDS,
     "recv(buf, peer, tag=0, stream=None) -> Info: receives into buf."},
    {"isend", (PyCFunction)(void (*)(void))core_isend,
     METH_VARARGS | METH_KEYWORDS,
     "isend(buf, peer, tag=0, stream=None) -> Request."},
    {"irecv", (PyCFunction)(void (*)(void))core_irecv,
     METH_VARARGS | METH_KEYWORDS,
     "irecv(buf, peer, tag=0, stream=None) -> Request."},
    {"barrier", (PyCFunction)core_comm_barrier, METH_NOARGS,
     "Returns once every rank of the job called it."},
    {"close", (PyCFunction)core_comm_close, METH_NOARGS,
     "Leaves the job (ipcp_finalize); later calls raise ipcpipe.Error."},
    {"__enter__", core_comm_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)core_comm_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef core_comm_getset[] = {
    {"rank", (getter)core_comm_get, NULL, "this process's rank", (void *)0},
    {"size", (getter)core_comm_get, NULL, "ranks in the job", (void *)1},
    {"job", (getter)core_comm_get, NULL, "the job's name", (void *)2},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject core_comm_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ipcpipe.Comm",
    .tp_basicsize = sizeof(core_comm_t),
    .tp_dealloc = (destructor)core_comm_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Comm(rank=None, size=None, job=None, timeout=None, path=None):"
              " joins the job as ipcp_init does (None: from the launcher's "
              "variables and IPCPIPE_*).",
    .tp_methods = core_comm_methods,
    .tp_getset = core_comm_getset,
    .tp_init = (initproc)core_comm_init,
    .tp_new = PyType_GenericNew,
};

/* ---- Module -------------------------------------------------------------- */

static PyObject *core_version(PyObject *m, PyObject *unused)
{
    (void)m;
    (void)unused;
    return PyUnicode_FromString(ipcp_version_string());
}

static PyMethodDef core_methods[] = {
    {"version", core_version, METH_NOARGS, "The C library's version."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef core_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "ipcpipe._core",
    .m_doc = "The ipcpipe C library's communicator, transfers and requests.",
    .m_size = -1,
    .m_methods = core_methods,
};

PyMODINIT_FUNC PyInit__core(void)
{
    PyObject *m = PyModule_Create(&core_module);
    if (!m)
        return NULL;
    core_error = PyErr_NewExceptionWithDoc(
        "ipcpipe.Error",
        "A failed call: args are (status code, status name, message).", NULL,
        NULL);
    if (!core_error || PyType_Ready(&core_info_type) < 0 ||
        PyType_Ready(&core_req_type) < 0 || PyType_Ready(&core_comm_type) < 0)
        goto fail;
    Py_INCREF(core_error);
    Py_INCREF(&core_info_type);
    Py_INCREF(&core_req_type);
    Py_INCREF(&core_comm_type);
    if (PyModule_AddObject(m, "Error", core_error) < 0 ||
        PyModule_AddObject(m, "Info", (PyObject *)&core_info_type) < 0 ||
        PyModule_AddObject(m, "Request", (PyObject *)&core_req_type) < 0 ||
        PyModule_AddObject(m, "Comm", (PyObject *)&core_comm_type) < 0)
        goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
