/* ipcpipe._core: the public C API (include/ipcpipe.h, ipcpipe_cuda.h) as
 * Python types.
 *
 * Buffers are taken without a copy (_buf.c).  Blocking calls release the
 * GIL.  A request keeps its buffer (and the object behind it) until it is
 * waited for or tested done; one dropped before that is waited for, so
 * that no transfer outlives its memory.  Errors raise the subclass of
 * ipcpipe.Error of their status, with .status, .name and .message. */
#include "_core.h"

#include <stdint.h>
#include <limits.h>
#include <string.h>
#include <structmember.h>

#include "ipcpipe_cuda.h"

PyObject *core_error; /* ipcpipe.Error */

/* ---- Errors -------------------------------------------------------------- */

/* The class of each error status, by -status (index 0 unused). */
#define CORE_NERR 16
static PyObject *core_errors[CORE_NERR];

static const struct {
    ipcp_status_t st;
    const char *name;
} core_error_names[] = {
    {IPCP_ERR_INVALID, "InvalidArgument"},
    {IPCP_ERR_NOMEM, "OutOfMemory"},
    {IPCP_ERR_SYSTEM, "SystemCallFailed"},
    {IPCP_ERR_TIMEOUT, "Timeout"},
    {IPCP_ERR_PEER_LOST, "PeerLost"},
    {IPCP_ERR_TRUNCATED, "Truncated"},
    {IPCP_ERR_NOT_REGISTERED, "NotRegistered"},
    {IPCP_ERR_OUT_OF_RANGE, "OutOfRange"},
    {IPCP_ERR_BAD_DESCRIPTOR, "BadDescriptor"},
    {IPCP_ERR_STATE, "StateError"},
    {IPCP_ERR_UNSUPPORTED, "Unsupported"},
    {IPCP_ERR_CUDA, "CudaError"},
    {IPCP_ERR_BOOTSTRAP, "BootstrapFailed"},
    {IPCP_ERR_PERMISSION, "PermissionDenied"},
    {IPCP_ERR_CONFIG, "ConfigError"},
};

PyObject *core_raise(ipcp_status_t st)
{
    PyObject *cls = st < 0 && -st < CORE_NERR && core_errors[-st]
                        ? core_errors[-st]
                        : core_error;
    const char *msg = ipcp_last_error();
    if (!*msg)
        msg = ipcp_status_desc(st);
    PyObject *e = PyObject_CallFunction(cls, "s", msg);
    if (!e)
        return NULL;
    PyObject *code = PyLong_FromLong((long)st),
             *name = PyUnicode_FromString(ipcp_strerror(st)),
             *text = PyUnicode_FromString(msg);
    if (code && name && text &&
        PyObject_SetAttrString(e, "status", code) == 0 &&
        PyObject_SetAttrString(e, "name", name) == 0 &&
        PyObject_SetAttrString(e, "message", text) == 0)
        PyErr_SetObject(cls, e);
    Py_XDECREF(code);
    Py_XDECREF(name);
    Py_XDECREF(text);
    Py_DECREF(e);
    return NULL;
}

/* Makes ipcpipe.Error and its subclasses in module m: 0 or -1. */
static int core_errors_make(PyObject *m)
{
    core_error = PyErr_NewExceptionWithDoc(
        "ipcpipe.Error",
        "A failed call: .status (the ipcp_status_t), .name (its constant's "
        "name) and .message (the library's sentence).",
        NULL, NULL);
    if (!core_error || PyModule_AddObject(m, "Error", core_error) < 0)
        return -1;
    Py_INCREF(core_error);
    for (size_t i = 0;
         i < sizeof(core_error_names) / sizeof(core_error_names[0]); i++) {
        char qual[64];
        snprintf(qual, sizeof(qual), "ipcpipe.%s", core_error_names[i].name);
        PyObject *c = PyErr_NewExceptionWithDoc(
            qual, ipcp_status_desc(core_error_names[i].st), core_error, NULL);
        if (!c || PyModule_AddObject(m, core_error_names[i].name, c) < 0)
            return -1;
        Py_INCREF(c);
        core_errors[-core_error_names[i].st] = c;
    }
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

/* The name of each path, made once. */
static PyObject *core_path_names[8];

static PyObject *core_info_new(const ipcp_xfer_info_t *info)
{
    unsigned p = (unsigned)info->path;
    PyObject *name = p < 8 ? core_path_names[p] : NULL;
    if (!name &&
        !(name = PyUnicode_InternFromString(ipcp_path_name(info->path))))
        return NULL;
    if (p < 8)
        core_path_names[p] = name;
    core_info_t *i = PyObject_New(core_info_t, &core_info_type);
    if (!i) {
        if (p >= 8)
            Py_DECREF(name);
        return NULL;
    }
    i->nbytes = (Py_ssize_t)info->nbytes;
    i->path = name;
    if (p < 8)
        Py_INCREF(name);
    return (PyObject *)i;
}

/* ---- Comm ---------------------------------------------------------------- */

int core_comm_open(core_comm_t *self)
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
    long v;
    if (rank != Py_None &&
        ((v = PyLong_AsLong(rank)) < 0 || v > INT_MAX || (p.rank = (int)v) < 0))
        goto bad;
    if (size != Py_None &&
        ((v = PyLong_AsLong(size)) < 1 || v > INT_MAX || (p.size = (int)v) < 1))
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
        core_raise(st);
        return -1;
    }
    return 0;
bad:
    if (!PyErr_Occurred())
        PyErr_SetString(PyExc_ValueError,
                        "rank must be >= 0, size >= 1 and timeout > 0");
    return -1;
}

static void core_orphans_drop(PyObject *orphans);

/* Finalizes (the GIL released); then the allocations' memory and the
 * orphans' transfers are gone (finalize ended them). */
static ipcp_status_t core_comm_finalize(core_comm_t *self)
{
    ipcp_comm_t *c = self->comm;
    PyObject *orphans = self->orphans;
    self->comm = NULL;
    self->orphans = NULL;
    PyThreadState *ts = PyEval_SaveThread();
    ipcp_status_t st = ipcp_finalize(c);
    PyEval_RestoreThread(ts);
    core_mems_gone(self);
    core_orphans_drop(orphans);
    return st;
}

static PyObject *core_comm_close(core_comm_t *self, PyObject *unused)
{
    (void)unused;
    if (!self->comm)
        Py_RETURN_NONE;
    if (self->calls) {
        PyErr_Format(core_error,
                     "%d call%s of another thread still run%s on this "
                     "communicator: close it once they returned",
                     self->calls, self->calls == 1 ? "" : "s",
                     self->calls == 1 ? "s" : "");
        return NULL;
    }
    if (core_mems_check(self) != 0)
        return NULL;
    ipcp_status_t st = core_comm_finalize(self);
    if (st != IPCP_OK)
        return core_raise(st);
    Py_RETURN_NONE;
}

static void core_comm_dealloc(core_comm_t *self)
{
    /* No allocation of it is alive (each holds the communicator), and no
     * call runs. */
    if (self->comm)
        (void)core_comm_finalize(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *core_comm_barrier(core_comm_t *self, PyObject *unused)
{
    ipcp_status_t st;
    (void)unused;
    if (core_comm_open(self) != 0)
        return NULL;
    ipcp_comm_t *c = self->comm;
    CORE_ENTER(self);
    PyThreadState *ts = PyEval_SaveThread();
    st = ipcp_barrier(c);
    PyEval_RestoreThread(ts);
    CORE_LEAVE(self);
    if (st != IPCP_OK)
        return core_raise(st);
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
    PyObject *comm; /* keeps the communicator open while it runs (an
                       orphan's: NULL, the communicator holds it) */
    int busy;       /* a thread waits for it */
} core_req_t;

static PyTypeObject core_req_type;

/* Lets go of what it held; an exception being raised is kept (the
 * releases may run deallocations that call the library). */
static void core_req_end(core_req_t *self)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    self->req = NULL;
    core_buf_release(&self->buf);
    Py_CLEAR(self->comm);
    PyErr_Restore(type, value, tb);
}

/* Seconds a wait runs with the GIL released before it looks for signals
 * (Ctrl-C) and goes on. */
#define CORE_WAIT_SLICE 0.1

/* Waits for req, a slice at a time: 1 when it ended (*st, *info), 0 when
 * a signal handler raised (the request still runs). */
static int core_wait(ipcp_request_t *req, ipcp_status_t *st,
                     ipcp_xfer_info_t *info)
{
    for (;;) {
        int done = 0;
        PyThreadState *ts = PyEval_SaveThread();
        *st = ipcp_wait_for(req, CORE_WAIT_SLICE, &done, info);
        PyEval_RestoreThread(ts);
        if (done || *st != IPCP_IN_PROGRESS)
            return 1;
        if (PyErr_CheckSignals() < 0)
            return 0;
    }
}

/* A request a thread may wait for or test now: 0, or -1 (raised) when it
 * ended or another thread waits for it. */
static int core_req_usable(core_req_t *self)
{
    if (!self->req)
        PyErr_SetString(core_error, "the request was completed already");
    else if (self->busy)
        PyErr_SetString(core_error, "another thread waits for this request");
    else
        return 0;
    return -1;
}

/* Waits for a Request (the caller's thread the only one): its Info, or
 * NULL raised; interrupted, it still runs (*interrupted set). */
static PyObject *core_req_wait_in(core_req_t *self, int *interrupted)
{
    ipcp_xfer_info_t info;
    ipcp_status_t st;
    core_comm_t *c = (core_comm_t *)self->comm;
    *interrupted = 0;
    if (core_req_usable(self) != 0)
        return NULL;
    self->busy = 1;
    if (c)
        CORE_ENTER(c);
    int ended = core_wait(self->req, &st, &info);
    if (c)
        CORE_LEAVE(c);
    self->busy = 0;
    if (!ended) {
        *interrupted = 1;
        return NULL;
    }
    PyObject *ret = st == IPCP_OK ? core_info_new(&info) : core_raise(st);
    core_req_end(self);
    return ret;
}

static PyObject *core_req_wait(core_req_t *self, PyObject *unused)
{
    int interrupted; /* then it can be waited for again */
    (void)unused;
    return core_req_wait_in(self, &interrupted);
}

static PyObject *core_req_test(core_req_t *self, PyObject *unused)
{
    ipcp_xfer_info_t info;
    int done = 0;
    (void)unused;
    if (core_req_usable(self) != 0)
        return NULL;
    ipcp_status_t st = ipcp_test(self->req, &done, &info);
    if (!done && st == IPCP_IN_PROGRESS)
        Py_RETURN_NONE;
    /* Done, or refused (a handle its communicator's finalize ended). */
    PyObject *ret = st == IPCP_OK ? core_info_new(&info) : core_raise(st);
    core_req_end(self);
    return ret;
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

PyObject *core_req_new(core_comm_t *comm, ipcp_request_t *req, core_buf_t *b)
{
    core_req_t *r = PyObject_New(core_req_t, &core_req_type);
    if (!r) {
        /* Its memory must outlive the transfer. */
        PyThreadState *ts = PyEval_SaveThread();
        (void)ipcp_wait(req, NULL);
        PyEval_RestoreThread(ts);
        core_buf_release(b);
        return NULL;
    }
    r->req = req;
    r->buf = *b;
    memset(b, 0, sizeof(*b));
    r->comm = core_ref((PyObject *)comm);
    r->busy = 0;
    return (PyObject *)r;
}

/* A transfer a signal interrupted the wait for: it still runs, so its
 * buffer is kept, in its Request, which the communicator holds (and which
 * does not hold the communicator) until the transfer ends
 * (core_orphans_reap) or the communicator is finalized. */
static void core_orphan(core_comm_t *self, core_req_t *r)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    Py_CLEAR(r->comm);
    core_mem_orphan(&r->buf);
    if (self->orphans || (self->orphans = PyList_New(0)))
        if (PyList_Append(self->orphans, (PyObject *)r) < 0)
            PyErr_Clear(); /* then its wait in dealloc keeps the buffer */
    PyErr_Restore(type, value, tb);
}

PyObject *core_req_finish(PyObject *o)
{
    int interrupted;
    if (!o)
        return NULL;
    core_req_t *r = (core_req_t *)o;
    core_comm_t *c = (core_comm_t *)r->comm;
    PyObject *info = core_req_wait_in(r, &interrupted);
    if (interrupted)
        core_orphan(c, r);
    Py_DECREF(o);
    return info;
}

/* Posts a send (recv 0) or receive of buf, in stream order when a stream
 * is given; returns a new Request. */
static PyObject *core_post(core_comm_t *self, PyObject *args, PyObject *kw,
                           int recv, int *streamed)
{
    static char *kwlist[] = {"buf", "peer", "tag", "stream", NULL};
    PyObject *obj, *stream = Py_None;
    int peer, tag = 0, none;
    ipcp_stream_t s;
    ipcp_request_t *req = NULL;
    core_buf_t b;
    ipcp_status_t st;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "Oi|iO", kwlist, &obj, &peer,
                                     &tag, &stream))
        return NULL;
    if (core_comm_open(self) != 0 || core_stream_arg(stream, &s, &none) != 0 ||
        core_buf_get(obj, recv, &b) != 0)
        return NULL;
    *streamed = !none;
    ipcp_comm_t *c = self->comm;
    CORE_ENTER(self);
    PyThreadState *ts = PyEval_SaveThread();
    if (!none)
        st = recv ? ipcp_irecv_on_stream(c, b.ptr, b.len, peer, tag, s, &req)
                  : ipcp_isend_on_stream(c, b.ptr, b.len, peer, tag, s, &req);
    else
        st = recv ? ipcp_irecv(c, b.ptr, b.len, peer, tag, &req)
                  : ipcp_isend(c, b.ptr, b.len, peer, tag, &req);
    PyEval_RestoreThread(ts);
    CORE_LEAVE(self);
    if (st != IPCP_OK) {
        PyObject *e = core_raise(st);
        core_buf_release(&b);
        return e;
    }
    return core_req_new(self, req, &b);
}

static PyObject *core_isend(core_comm_t *self, PyObject *args, PyObject *kw)
{
    int streamed;
    return core_post(self, args, kw, 0, &streamed);
}

static PyObject *core_irecv(core_comm_t *self, PyObject *args, PyObject *kw)
{
    int streamed;
    return core_post(self, args, kw, 1, &streamed);
}

/* After finalize: the interrupted calls' requests are stale, their
 * buffers free. */
static void core_orphans_drop(PyObject *orphans)
{
    if (!orphans)
        return;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(orphans); i++)
        core_req_end((core_req_t *)PyList_GET_ITEM(orphans, i));
    Py_DECREF(orphans);
}

/* Drops the interrupted calls' requests that ended: the list is rebuilt
 * with those that run, and swapped in before the others are let go (which
 * may run Python code, and another thread meanwhile). */
static void core_orphans_reap(core_comm_t *self)
{
    PyObject *old = self->orphans, *keep;
    if (!old || !(keep = PyList_New(0)))
        return;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(old); i++) {
        core_req_t *r = (core_req_t *)PyList_GET_ITEM(old, i);
        int done = 0;
        ipcp_xfer_info_t info;
        if (r->req && ipcp_test(r->req, &done, &info) == IPCP_IN_PROGRESS &&
            PyList_Append(keep, (PyObject *)r) == 0)
            continue;
        PyErr_Clear();
        r->req = done || !r->req ? NULL : r->req;
    }
    self->orphans = keep;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(old); i++) {
        core_req_t *r = (core_req_t *)PyList_GET_ITEM(old, i);
        if (!r->req)
            core_req_end(r);
    }
    Py_DECREF(old);
}

/* send and recv: waited for, without a Request object, unless
 * stream-ordered (the stream carries the order; the Request is returned,
 * for its errors). */
static PyObject *core_blocking(core_comm_t *self, PyObject *args, PyObject *kw,
                               int recv)
{
    static char *kwlist[] = {"buf", "peer", "tag", "stream", NULL};
    PyObject *obj, *stream = Py_None;
    int peer, tag = 0, streamed = 0;
    ipcp_request_t *req = NULL;
    ipcp_xfer_info_t info;
    core_buf_t b;
    ipcp_status_t st;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "Oi|iO", kwlist, &obj, &peer,
                                     &tag, &stream))
        return NULL;
    if (stream != Py_None)
        return core_post(self, args, kw, recv, &streamed);
    if (core_comm_open(self) != 0 || core_buf_get(obj, recv, &b) != 0)
        return NULL;
    core_orphans_reap(self);
    ipcp_comm_t *c = self->comm;
    CORE_ENTER(self);
    PyThreadState *ts = PyEval_SaveThread();
    st = recv ? ipcp_irecv(c, b.ptr, b.len, peer, tag, &req)
              : ipcp_isend(c, b.ptr, b.len, peer, tag, &req);
    PyEval_RestoreThread(ts);
    int ended = st != IPCP_OK || core_wait(req, &st, &info);
    CORE_LEAVE(self);
    if (!ended) { /* interrupted: it still runs */
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyObject *r = core_req_new(self, req, &b);
        PyErr_Restore(type, value, tb);
        if (r) {
            core_orphan(self, (core_req_t *)r);
            Py_DECREF(r);
        }
        return NULL;
    }
    PyObject *ret = st == IPCP_OK ? core_info_new(&info) : core_raise(st);
    core_buf_release(&b);
    return ret;
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
#define CORE_KW(f)                                                             \
    (PyCFunction)(void (*)(void))(f), METH_VARARGS | METH_KEYWORDS
    {"send", CORE_KW(core_send),
     "send(buf, peer, tag=0, stream=None) -> Info: sends buf and returns "
     "once it is in the peer's receive buffer.  With a CUDA stream (an int "
     "handle, torch.cuda.Stream, a CuPy stream) it is enqueued there "
     "instead (ipcpipe_cuda.h) and a Request is returned, done when this "
     "side of the transfer is."},
    {"recv", CORE_KW(core_recv),
     "recv(buf, peer, tag=0, stream=None) -> Info: receives into buf (with "
     "a stream: enqueued there, a Request returned)."},
    {"isend", CORE_KW(core_isend),
     "isend(buf, peer, tag=0, stream=None) -> Request."},
    {"irecv", CORE_KW(core_irecv),
     "irecv(buf, peer, tag=0, stream=None) -> Request."},
    {"alloc", CORE_KW(core_alloc),
     "alloc(nbytes, device=None) -> Memory: memory peers can map (host "
     "memory, or the CUDA device's); it exposes the buffer protocol (host), "
     "__cuda_array_interface__ (device) and DLPack."},
    {"register", CORE_KW(core_register),
     "register(buf) -> Registration: buf opened to peers' put and get; "
     ".pack() gives the bytes a peer attaches."},
    {"attach", CORE_KW(core_attach),
     "attach(desc) -> Remote: a peer's registration from its packed "
     "bytes, for put and get."},
    {"put", CORE_KW(core_put),
     "put(buf, remote, offset=0) -> Info: copies buf into the peer's "
     "region at offset; returns once it is there."},
    {"get", CORE_KW(core_get),
     "get(buf, remote, offset=0) -> Info: copies the peer's region from "
     "offset into buf."},
    {"iput", CORE_KW(core_iput), "iput(buf, remote, offset=0) -> Request."},
    {"iget", CORE_KW(core_iget), "iget(buf, remote, offset=0) -> Request."},
#undef CORE_KW
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

/* [(name, value, default, doc, is_set)] of every IPCPIPE_* setting, as
 * the environment sets them now; a bad value raises ConfigError. */
static PyObject *core_settings(PyObject *m, PyObject *unused)
{
    (void)m;
    (void)unused;
    ipcp_status_t st = ipcp_settings_check();
    if (st != IPCP_OK)
        return core_raise(st);
    int n = ipcp_settings_count();
    PyObject *list = PyList_New(0);
    for (int i = 0; list && i < n; i++) {
        ipcp_setting_info_t s;
        if ((st = ipcp_setting_get(i, &s)) != IPCP_OK) {
            Py_DECREF(list);
            return core_raise(st);
        }
        PyObject *t = Py_BuildValue("(ssssO)", s.name, s.value, s.deflt, s.doc,
                                    s.is_set ? Py_True : Py_False);
        if (!t || PyList_Append(list, t) < 0) {
            Py_XDECREF(t);
            Py_CLEAR(list);
            break;
        }
        Py_DECREF(t);
    }
    return list;
}

static PyMethodDef core_methods[] = {
    {"version", core_version, METH_NOARGS, "The C library's version."},
    {"settings", core_settings, METH_NOARGS,
     "settings() -> [(name, value, default, doc, is_set)]: every IPCPIPE_* "
     "setting as the environment sets it."},
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
    if (core_errors_make(m) != 0 || core_mem_types(m) != 0 ||
        PyType_Ready(&core_info_type) < 0 || PyType_Ready(&core_req_type) < 0 ||
        PyType_Ready(&core_comm_type) < 0)
        goto fail;
    Py_INCREF(&core_info_type);
    Py_INCREF(&core_req_type);
    Py_INCREF(&core_comm_type);
    if (PyModule_AddObject(m, "Info", (PyObject *)&core_info_type) < 0 ||
        PyModule_AddObject(m, "Request", (PyObject *)&core_req_type) < 0 ||
        PyModule_AddObject(m, "Comm", (PyObject *)&core_comm_type) < 0)
        goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
