/* What the files of ipcpipe._core share: errors, buffers taken from
 * Python objects, the communicator and request types (_core.c), and the
 * memory types (_mem.c). */
#ifndef IPCPIPE_PY_CORE_H
#define IPCPIPE_PY_CORE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "ipcpipe.h"

/* Py_NewRef came with Python 3.10. */
static inline PyObject *core_ref(PyObject *o)
{
    Py_INCREF(o);
    return o;
}

/* ipcpipe.Error, and the class of a status (a subclass of it). */
extern PyObject *core_error;
/* Raises the class of st with the last error's message; returns NULL. */
PyObject *core_raise(ipcp_status_t st);

/* ---- Buffers (_buf.c) ---------------------------------------------------- */

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
    PyObject *also;        /* another object its transfer holds, or NULL */
    int mem_export;        /* owner is a Memory, counted in its exports */
    int orphaned;          /* ... and in its orphaned (an orphan's) */
    core_dl_managed_t *dl; /* a DLPack tensor we consumed */
} core_buf_t;

/* The CUDA stream of a stream= argument: None (*none set), an int handle,
 * or an object with cuda_stream (PyTorch) or ptr (CuPy); 0, or -1 with
 * TypeError. */
struct CUstream_st;
int core_stream_arg(PyObject *o, struct CUstream_st **s, int *none);

/* The memory of obj, as a receive buffer when writable (0, or -1 with an
 * exception set); released with core_buf_release. */
int core_buf_get(PyObject *obj, int writable, core_buf_t *b);
void core_buf_release(core_buf_t *b);

/* ---- The communicator and requests (_core.c) ----------------------------- */

typedef struct core_mem core_mem_t;

typedef struct {
    PyObject_HEAD ipcp_comm_t *comm;
    core_mem_t *mems;  /* its allocations still open (_mem.c) */
    PyObject *orphans; /* Requests of blocking calls a signal interrupted */
    int calls;         /* calls of threads that released the GIL in it */
} core_comm_t;

/* 0 when the communicator is open, else -1 with ipcpipe.Error set. */
int core_comm_open(core_comm_t *self);
/* Around a call that releases the GIL: Comm.close refuses meanwhile (a
 * finalize must not run beside another call of the communicator). */
#define CORE_ENTER(c) ((c)->calls++)
#define CORE_LEAVE(c) ((c)->calls--)
/* A Request for req, holding b (moved in) and the communicator. */
PyObject *core_req_new(core_comm_t *comm, ipcp_request_t *req, core_buf_t *b);
/* Waits for a Request and returns its Info (the reference is stolen). */
PyObject *core_req_finish(PyObject *r);

/* ---- Memory (_mem.c) ----------------------------------------------------- */

/* Comm.alloc, register, attach, put, get, iput, iget. */
PyObject *core_alloc(core_comm_t *self, PyObject *args, PyObject *kw);
PyObject *core_register(core_comm_t *self, PyObject *args, PyObject *kw);
PyObject *core_attach(core_comm_t *self, PyObject *args, PyObject *kw);
PyObject *core_put(core_comm_t *self, PyObject *args, PyObject *kw);
PyObject *core_get(core_comm_t *self, PyObject *args, PyObject *kw);
PyObject *core_iput(core_comm_t *self, PyObject *args, PyObject *kw);
PyObject *core_iget(core_comm_t *self, PyObject *args, PyObject *kw);
/* Before the communicator is finalized: -1 (with an exception) while one
 * of its allocations is viewed (but by an orphan); after it,
 * core_mems_gone marks them freed (finalize freed their memory). */
int core_mems_check(core_comm_t *self);
void core_mems_gone(core_comm_t *self);
/* A Memory taken as a transfer's buffer, counted in its exports: 1 when
 * obj is one (b filled), 0 when it is not, -1 when it was freed. */
int core_mem_take(PyObject *obj, core_buf_t *b);
void core_mem_untake(core_buf_t *b);
void core_mem_orphan(core_buf_t *b);
/* The types, readied and added to the module: 0 or -1. */
int core_mem_types(PyObject *m);

#endif
