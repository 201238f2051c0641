/* ipcpipe._core: memory peers can map (Comm.alloc -> Memory), regions
 * opened to one-sided access (Comm.register -> Registration, whose packed
 * bytes a peer attaches: Comm.attach -> Remote), and put and get.
 *
 * A Memory hands its bytes out without a copy: the buffer protocol (host
 * memory), __cuda_array_interface__ (device memory) and DLPack (both).
 * Each view holds the Memory, so it is freed only once the last view is
 * gone; Memory.free() and Comm.close() refuse while views are alive. */
#include "_core.h"

#include <string.h>
#include <structmember.h>

#include "ipcpipe_cuda.h"

/* ---- Memory -------------------------------------------------------------- */

struct core_mem {
    PyObject_HEAD core_comm_t *comm; /* a reference */
    void *ptr;                       /* NULL once freed */
    size_t len;
    int device;               /* -1: host memory */
    Py_ssize_t exports;       /* buffer views, DLPack tensors, transfers */
    Py_ssize_t orphaned;      /* of those, transfers a signal left running */
    Py_ssize_t shape[1];      /* of a buffer view */
    core_mem_t *next, **prev; /* comm->mems */
};

static PyTypeObject core_mem_type;

static void core_mem_unlink(core_mem_t *m)
{
    if (!m->prev)
        return;
    *m->prev = m->next;
    if (m->next)
        m->next->prev = m->prev;
    m->next = NULL;
    m->prev = NULL;
}

static int core_mem_valid(core_mem_t *m)
{
    if (m->ptr)
        return 0;
    PyErr_SetString(core_error,
                    "the memory was freed (Memory.free or Comm.close)");
    return -1;
}

/* Frees it (its communicator open), unless views are alive: 0, or -1 with
 * BufferError. */
static int core_mem_release(core_mem_t *m)
{
    if (m->exports > 0) {
        PyErr_Format(PyExc_BufferError,
                     "%zd view%s of this memory (NumPy arrays, tensors, "
                     "memoryviews) %s alive: drop them first",
                     m->exports, m->exports == 1 ? "" : "s",
                     m->exports == 1 ? "is" : "are");
        return -1;
    }
    if (m->ptr && m->comm->comm)
        (void)ipcp_mem_free(m->comm->comm, m->ptr);
    m->ptr = NULL;
    core_mem_unlink(m);
    return 0;
}

int core_mems_check(core_comm_t *self)
{
    for (core_mem_t *m = self->mems; m; m = m->next)
        if (m->exports > m->orphaned) {
            PyErr_Format(PyExc_BufferError,
                         "memory from Comm.alloc (%zu bytes) is still viewed: "
                         "drop its views before closing the communicator",
                         m->len);
            return -1;
        }
    return 0;
}

void core_mems_gone(core_comm_t *self)
{
    while (self->mems) {
        core_mem_t *m = self->mems;
        m->ptr = NULL; /* finalize freed it */
        core_mem_unlink(m);
    }
}

int core_mem_take(PyObject *obj, core_buf_t *b)
{
    if (Py_TYPE(obj) != &core_mem_type)
        return 0;
    core_mem_t *m = (core_mem_t *)obj;
    if (core_mem_valid(m) != 0)
        return -1;
    b->ptr = m->ptr;
    b->len = m->len;
    b->owner = core_ref(obj);
    b->mem_export = 1;
    m->exports++;
    return 1;
}

void core_mem_untake(core_buf_t *b)
{
    core_mem_t *m = (core_mem_t *)b->owner;
    m->exports--;
    if (b->orphaned)
        m->orphaned--;
    b->orphaned = 0;
}

void core_mem_orphan(core_buf_t *b)
{
    if (!b->mem_export || b->orphaned)
        return;
    ((core_mem_t *)b->owner)->orphaned++;
    b->orphaned = 1;
}

PyObject *core_alloc(core_comm_t *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"nbytes", "device", NULL};
    Py_ssize_t n;
    PyObject *dev = Py_None;
    ipcp_alloc_params_t p;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "n|O", kwlist, &n, &dev))
        return NULL;
    if (core_comm_open(self) != 0)
        return NULL;
    if (n < 1) {
        PyErr_SetString(PyExc_ValueError, "nbytes must be at least 1");
        return NULL;
    }
    ipcp_alloc_params_init(&p);
    if (dev != Py_None) {
        long d = PyLong_AsLong(dev);
        if (d < 0 || PyErr_Occurred()) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError,
                         "device %R: a CUDA device ordinal, or None for host "
                         "memory",
                         dev);
            return NULL;
        }
        p.type = IPCP_MEM_CUDA;
        p.device = (int)d;
    }
    core_mem_t *m = PyObject_New(core_mem_t, &core_mem_type);
    if (!m)
        return NULL;
    m->comm = self;
    Py_INCREF(self);
    m->ptr = NULL;
    m->len = (size_t)n;
    m->device = dev == Py_None ? -1 : p.device;
    m->exports = 0;
    m->orphaned = 0;
    m->next = NULL;
    m->prev = NULL;
    ipcp_comm_t *c = self->comm;
    CORE_ENTER(self);
    PyThreadState *ts = PyEval_SaveThread();
    ipcp_status_t st = ipcp_mem_alloc(c, m->len, &p, &m->ptr);
    PyEval_RestoreThread(ts);
    CORE_LEAVE(self);
    if (st != IPCP_OK) {
        PyObject *e = core_raise(st);
        m->ptr = NULL;
        Py_DECREF(m);
        return e;
    }
    m->next = self->mems;
    if (m->next)
        m->next->prev = &m->next;
    m->prev = &self->mems;
    self->mems = m;
    return (PyObject *)m;
}

static void core_mem_dealloc(core_mem_t *m)
{
    m->exports = 0; /* a view holds the Memory: none is left */
    (void)core_mem_release(m);
    Py_CLEAR(m->comm);
    Py_TYPE(m)->tp_free((PyObject *)m);
}

static PyObject *core_mem_free(core_mem_t *m, PyObject *unused)
{
    (void)unused;
    if (core_mem_release(m) != 0)
        return NULL;
    Py_RETURN_NONE;
}

static int core_mem_getbuffer(core_mem_t *m, Py_buffer *view, int flags)
{
    if (core_mem_valid(m) != 0)
        return -1;
    if (m->device >= 0) {
        PyErr_SetString(PyExc_BufferError,
                        "device memory has no buffer protocol: use "
                        "__cuda_array_interface__ or DLPack");
        return -1;
    }
    if (PyBuffer_FillInfo(view, (PyObject *)m, m->ptr, (Py_ssize_t)m->len, 0,
                          flags) != 0)
        return -1;
    m->exports++;
    return 0;
}

static void core_mem_releasebuffer(core_mem_t *m, Py_buffer *view)
{
    (void)view;
    m->exports--;
}

static PyBufferProcs core_mem_buffer = {
    .bf_getbuffer = (getbufferproc)core_mem_getbuffer,
    .bf_releasebuffer = (releasebufferproc)core_mem_releasebuffer,
};

static PyObject *core_mem_cai(core_mem_t *m, void *unused)
{
    (void)unused;
    if (core_mem_valid(m) != 0)
        return NULL;
    if (m->device < 0) {
        PyErr_SetString(PyExc_AttributeError,
                        "host memory has no __cuda_array_interface__");
        return NULL;
    }
    return Py_BuildValue("{s:(n),s:s,s:(NO),s:O,s:i}", "shape",
                         (Py_ssize_t)m->len, "typestr", "|u1", "data",
                         PyLong_FromVoidPtr(m->ptr), Py_False, "strides",
                         Py_None, "version", 2);
}

/* DLPack (ABI 0.x): a one-dimensional uint8 tensor over the memory; the
 * tensor holds the Memory until its deleter runs. */
typedef struct {
    core_dl_managed_t t;
    int64_t shape[1];
} core_mem_dl_t;

static void core_mem_dl_delete(core_dl_managed_t *t)
{
    PyGILState_STATE g = PyGILState_Ensure();
    core_mem_t *m = t->manager_ctx;
    m->exports--;
    Py_DECREF(m);
    PyMem_RawFree(t);
    PyGILState_Release(g);
}

static void core_mem_capsule_free(PyObject *cap)
{
    /* Not consumed: ours to delete. */
    if (PyCapsule_IsValid(cap, "dltensor")) {
        core_dl_managed_t *t = PyCapsule_GetPointer(cap, "dltensor");
        if (t && t->deleter)
            t->deleter(t);
    }
}

static PyObject *core_mem_dlpack(core_mem_t *m, PyObject *args, PyObject *kw)
{
    (void)args;
    (void)kw; /* stream=: the memory is ready when alloc returns */
    if (core_mem_valid(m) != 0)
        return NULL;
    core_mem_dl_t *d = PyMem_RawCalloc(1, sizeof(*d));
    if (!d)
        return PyErr_NoMemory();
    d->shape[0] = (int64_t)m->len;
    d->t.dl_tensor.data = m->ptr;
    d->t.dl_tensor.device.device_type = m->device >= 0 ? 2 : 1;
    d->t.dl_tensor.device.device_id = m->device >= 0 ? m->device : 0;
    d->t.dl_tensor.ndim = 1;
    d->t.dl_tensor.dtype.code = 1; /* unsigned integer */
    d->t.dl_tensor.dtype.bits = 8;
    d->t.dl_tensor.dtype.lanes = 1;
    d->t.dl_tensor.shape = d->shape;
    d->t.manager_ctx = m;
    d->t.deleter = core_mem_dl_delete;
    PyObject *cap = PyCapsule_New(&d->t, "dltensor", core_mem_capsule_free);
    if (!cap) {
        PyMem_RawFree(d);
        return NULL;
    }
    Py_INCREF(m);
    m->exports++;
    return cap;
}

static PyObject *core_mem_dlpack_device(core_mem_t *m, PyObject *unused)
{
    (void)unused;
    return Py_BuildValue("(ii)", m->device >= 0 ? 2 : 1,
                         m->device >= 0 ? m->device : 0);
}

static PyObject *core_mem_get(core_mem_t *m, void *which)
{
    if (which == (void *)0)
        return PyLong_FromSize_t(m->len);
    if (which == (void *)1)
        return m->device >= 0 ? PyLong_FromLong(m->device) : core_ref(Py_None);
    if (core_mem_valid(m) != 0)
        return NULL;
    return PyLong_FromVoidPtr(m->ptr);
}

static Py_ssize_t core_mem_length(core_mem_t *m)
{
    return (Py_ssize_t)m->len;
}

static PyObject *core_mem_repr(core_mem_t *m)
{
    if (m->device >= 0)
        return PyUnicode_FromFormat("Memory(%zu bytes on CUDA device %d%s)",
                                    m->len, m->device, m->ptr ? "" : ", freed");
    return PyUnicode_FromFormat("Memory(%zu bytes of host memory%s)", m->len,
                                m->ptr ? "" : ", freed");
}

static PyMethodDef core_mem_methods[] = {
    {"free", (PyCFunction)core_mem_free, METH_NOARGS,
     "Frees the memory now (refused while views of it are alive)."},
    {"__dlpack__", (PyCFunction)(void (*)(void))core_mem_dlpack,
     METH_VARARGS | METH_KEYWORDS, "A DLPack capsule of the memory (uint8)."},
    {"__dlpack_device__", (PyCFunction)core_mem_dlpack_device, METH_NOARGS,
     "(device type, device id) as DLPack numbers them."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef core_mem_getset[] = {
    {"nbytes", (getter)core_mem_get, NULL, "its size in bytes", (void *)0},
    {"device", (getter)core_mem_get, NULL,
     "its CUDA device, or None for host memory", (void *)1},
    {"ptr", (getter)core_mem_get, NULL, "its address", (void *)2},
    {"__cuda_array_interface__", (getter)core_mem_cai, NULL,
     "device memory as a one-dimensional uint8 CUDA array", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods core_mem_seq = {
    .sq_length = (lenfunc)core_mem_length,
};

static PyTypeObject core_mem_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ipcpipe.Memory",
    .tp_basicsize = sizeof(core_mem_t),
    .tp_dealloc = (destructor)core_mem_dealloc,
    .tp_repr = (reprfunc)core_mem_repr,
    .tp_as_buffer = &core_mem_buffer,
    .tp_as_sequence = &core_mem_seq,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Memory peers can map, from Comm.alloc: receiving into it "
              "lets the sender write it directly.",
    .tp_methods = core_mem_methods,
    .tp_getset = core_mem_getset,
};

/* ---- Registrations and remote regions ------------------------------------ */

typedef struct {
    PyObject_HEAD core_comm_t *comm; /* a reference */
    ipcp_mem_t *mem;                 /* NULL once deregistered */
    core_buf_t buf;                  /* the registered memory, held */
} core_reg_t;

typedef struct {
    PyObject_HEAD core_comm_t *comm;
    ipcp_rmem_t *rm; /* NULL once released */
} core_rem_t;

static PyTypeObject core_reg_type, core_rem_type;

PyObject *core_register(core_comm_t *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"buf", NULL};
    PyObject *obj;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O", kwlist, &obj) ||
        core_comm_open(self) != 0)
        return NULL;
    core_reg_t *r = PyObject_New(core_reg_t, &core_reg_type);
    if (!r)
        return NULL;
    r->comm = self;
    Py_INCREF(self);
    r->mem = NULL;
    /* Writable: peers put into it. */
    if (core_buf_get(obj, 1, &r->buf) != 0) {
        memset(&r->buf, 0, sizeof(r->buf));
        Py_DECREF(r);
        return NULL;
    }
    ipcp_comm_t *c = self->comm;
    CORE_ENTER(self);
    PyThreadState *ts = PyEval_SaveThread();
    ipcp_status_t st = ipcp_mem_register(c, r->buf.ptr, r->buf.len, &r->mem);
    PyEval_RestoreThread(ts);
    CORE_LEAVE(self);
    if (st != IPCP_OK) {
        PyObject *e = core_raise(st);
        r->mem = NULL;
        Py_DECREF(r);
        return e;
    }
    return (PyObject *)r;
}

/* Ends the registration (waits until no peer's operation on it is in
 * flight); 0 or -1 with the error raised.  The handle is taken first, so
 * that a second close on another thread meanwhile finds none.  When a
 * peer did not confirm in time (IPCP_ERR_TIMEOUT) the buffer is kept for
 * good: a stopped peer could still write it when it resumes. */
static int core_reg_end(core_reg_t *r)
{
    ipcp_status_t st = IPCP_OK;
    ipcp_mem_t *mem = r->mem;
    core_comm_t *c = r->comm;
    r->mem = NULL;
    if (mem && c->comm) {
        CORE_ENTER(c);
        PyThreadState *ts = PyEval_SaveThread();
        st = ipcp_mem_deregister(mem);
        PyEval_RestoreThread(ts);
        CORE_LEAVE(c);
    }
    PyObject *e = st != IPCP_OK ? core_raise(st) : NULL;
    core_buf_t *kept;
    if (st == IPCP_ERR_TIMEOUT && (kept = PyMem_Malloc(sizeof(*kept)))) {
        *kept = r->buf; /* never released */
        memset(&r->buf, 0, sizeof(r->buf));
    }
    core_buf_release(&r->buf);
    (void)e;
    return st == IPCP_OK ? 0 : -1;
}

static void core_reg_dealloc(core_reg_t *r)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    if (core_reg_end(r) != 0)
        PyErr_WriteUnraisable((PyObject *)r);
    PyErr_Restore(type, value, tb);
    Py_CLEAR(r->comm);
    Py_TYPE(r)->tp_free((PyObject *)r);
}

static PyObject *core_reg_close(core_reg_t *r, PyObject *unused)
{
    (void)unused;
    return core_reg_end(r) == 0 ? core_ref(Py_None) : NULL;
}

static PyObject *core_reg_pack(core_reg_t *r, PyObject *unused)
{
    unsigned char d[IPCP_DESC_MAX];
    size_t n = 0;
    (void)unused;
    if (!r->mem || core_comm_open(r->comm) != 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(core_error, "the registration was closed");
        return NULL;
    }
    ipcp_status_t st = ipcp_mem_pack(r->mem, d, sizeof(d), &n);
    if (st != IPCP_OK)
        return core_raise(st);
    return PyBytes_FromStringAndSize((const char *)d, (Py_ssize_t)n);
}

static PyObject *core_enter(PyObject *self, PyObject *unused)
{
    (void)unused;
    return core_ref(self);
}

static PyObject *core_reg_exit(core_reg_t *r, PyObject *args)
{
    (void)args;
    return core_reg_close(r, NULL);
}

static PyMethodDef core_reg_methods[] = {
    {"pack", (PyCFunction)core_reg_pack, METH_NOARGS,
     "The descriptor a peer attaches (Comm.attach), as bytes."},
    {"close", (PyCFunction)core_reg_close, METH_NOARGS,
     "Ends the registration once no peer's put or get on it is in flight "
     "(ipcp_mem_deregister)."},
    {"__enter__", core_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)core_reg_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject core_reg_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ipcpipe.Registration",
    .tp_basicsize = sizeof(core_reg_t),
    .tp_dealloc = (destructor)core_reg_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A buffer opened to peers' put and get (Comm.register); it "
              "holds the buffer until closed.",
    .tp_methods = core_reg_methods,
};

PyObject *core_attach(core_comm_t *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"desc", NULL};
    Py_buffer d;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "y*", kwlist, &d))
        return NULL;
    if (core_comm_open(self) != 0) {
        PyBuffer_Release(&d);
        return NULL;
    }
    core_rem_t *r = PyObject_New(core_rem_t, &core_rem_type);
    if (!r) {
        PyBuffer_Release(&d);
        return NULL;
    }
    r->comm = self;
    Py_INCREF(self);
    r->rm = NULL;
    ipcp_comm_t *c = self->comm;
    CORE_ENTER(self);
    PyThreadState *ts = PyEval_SaveThread();
    ipcp_status_t st = ipcp_rmem_import(c, d.buf, (size_t)d.len, &r->rm);
    PyEval_RestoreThread(ts);
    CORE_LEAVE(self);
    PyBuffer_Release(&d);
    if (st != IPCP_OK) {
        PyObject *e = core_raise(st);
        r->rm = NULL;
        Py_DECREF(r);
        return e;
    }
    return (PyObject *)r;
}

static int core_rem_end(core_rem_t *r)
{
    ipcp_status_t st = IPCP_OK;
    if (r->rm && r->comm->comm)
        st = ipcp_rmem_release(r->rm);
    if (st != IPCP_OK) {
        core_raise(st);
        return -1;
    }
    r->rm = NULL;
    return 0;
}

static void core_rem_dealloc(core_rem_t *r)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    /* Requests hold it: none is in flight. */
    if (core_rem_end(r) != 0)
        PyErr_WriteUnraisable((PyObject *)r);
    PyErr_Restore(type, value, tb);
    Py_CLEAR(r->comm);
    Py_TYPE(r)->tp_free((PyObject *)r);
}

static PyObject *core_rem_close(core_rem_t *r, PyObject *unused)
{
    (void)unused;
    return core_rem_end(r) == 0 ? core_ref(Py_None) : NULL;
}

static PyObject *core_rem_exit(core_rem_t *r, PyObject *args)
{
    (void)args;
    return core_rem_close(r, NULL);
}

static int core_rem_open(core_rem_t *r)
{
    if (core_comm_open(r->comm) != 0)
        return -1;
    if (r->rm)
        return 0;
    PyErr_SetString(core_error, "the remote region was closed");
    return -1;
}

static PyObject *core_rem_get(core_rem_t *r, void *which)
{
    if (core_rem_open(r) != 0)
        return NULL;
    if (which == (void *)0)
        return PyLong_FromSize_t(ipcp_rmem_size(r->rm));
    return PyLong_FromLong(ipcp_rmem_owner(r->rm));
}

static PyMethodDef core_rem_methods[] = {
    {"close", (PyCFunction)core_rem_close, METH_NOARGS,
     "Lets the region go (refused while a put or get on it runs)."},
    {"__enter__", core_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)core_rem_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef core_rem_getset[] = {
    {"nbytes", (getter)core_rem_get, NULL, "the region's size", (void *)0},
    {"owner", (getter)core_rem_get, NULL, "the rank that registered it",
     (void *)1},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject core_rem_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ipcpipe.Remote",
    .tp_basicsize = sizeof(core_rem_t),
    .tp_dealloc = (destructor)core_rem_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A peer's registered region (Comm.attach), for put and get.",
    .tp_methods = core_rem_methods,
    .tp_getset = core_rem_getset,
};

/* ---- Put and get --------------------------------------------------------- */

/* Posts a put (get 0) or get of buf against a Remote, in stream order when
 * a stream is given; returns a Request holding buf and the Remote. */
static PyObject *core_onesided(core_comm_t *self, PyObject *args, PyObject *kw,
                               int get)
{
    static char *kwlist[] = {"buf", "remote", "offset", "stream", NULL};
    PyObject *obj, *stream = Py_None;
    core_rem_t *rem;
    Py_ssize_t off = 0;
    ipcp_request_t *req = NULL;
    core_buf_t b;
    ipcp_status_t st;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO!|nO", kwlist, &obj,
                                     &core_rem_type, &rem, &off, &stream) ||
        core_rem_open(rem) != 0)
        return NULL;
    if (rem->comm != self) {
        PyErr_SetString(PyExc_ValueError,
                        "the remote region was attached by another "
                        "communicator");
        return NULL;
    }
    if (off < 0) {
        PyErr_SetString(PyExc_ValueError, "offset must be >= 0");
        return NULL;
    }
    ipcp_stream_t s;
    int none;
    if (core_stream_arg(stream, &s, &none) != 0 ||
        core_buf_get(obj, get, &b) != 0)
        return NULL;
    ipcp_comm_t *c = self->comm;
    ipcp_rmem_t *rm = rem->rm;
    CORE_ENTER(self);
    PyThreadState *ts = PyEval_SaveThread();
    if (!none)
        st =
            get ? ipcp_iget_on_stream(c, b.ptr, b.len, rm, (size_t)off, s, &req)
                : ipcp_iput_on_stream(c, b.ptr, b.len, rm, (size_t)off, s,
                                      &req);
    else
        st = get ? ipcp_iget(c, b.ptr, b.len, rm, (size_t)off, &req)
                 : ipcp_iput(c, b.ptr, b.len, rm, (size_t)off, &req);
    PyEval_RestoreThread(ts);
    CORE_LEAVE(self);
    if (st != IPCP_OK) {
        PyObject *e = core_raise(st);
        core_buf_release(&b);
        return e;
    }
    /* The Remote may not be released while the operation runs. */
    b.also = core_ref((PyObject *)rem);
    return core_req_new(self, req, &b);
}

PyObject *core_iput(core_comm_t *self, PyObject *args, PyObject *kw)
{
    return core_onesided(self, args, kw, 0);
}

PyObject *core_iget(core_comm_t *self, PyObject *args, PyObject *kw)
{
    return core_onesided(self, args, kw, 1);
}

PyObject *core_put(core_comm_t *self, PyObject *args, PyObject *kw)
{
    return core_req_finish(core_onesided(self, args, kw, 0));
}

PyObject *core_get(core_comm_t *self, PyObject *args, PyObject *kw)
{
    return core_req_finish(core_onesided(self, args, kw, 1));
}

int core_mem_types(PyObject *m)
{
    PyTypeObject *types[] = {&core_mem_type, &core_reg_type, &core_rem_type};
    const char *names[] = {"Memory", "Registration", "Remote"};
    for (int i = 0; i < 3; i++) {
        if (PyType_Ready(types[i]) < 0)
            return -1;
        Py_INCREF(types[i]);
        if (PyModule_AddObject(m, names[i], (PyObject *)types[i]) < 0)
            return -1;
    }
    return 0;
}
