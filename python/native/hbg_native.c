/* hbg._native: the calls the hbg package makes per task, per layer and per
 * bind, in C instead of ctypes: tensor views, hbg_submit_task,
 * hbg_submit_graph / hbg_submit_graph_n (and the record callback's
 * hbg_record_*), bind begin / launch / wait / end, buffer write / read.
 *
 * Stable ABI (Py_LIMITED_API 3.8, an abi3 module): one build serves every
 * CPython >= 3.8. libhbg's entry points are taken with dlsym from the file
 * the package's loader chose (hbg._lib: HBG_LIBRARY, a copy next to the
 * package, the system's search path), so this module and the ctypes calls
 * always reach the same copy of the library, and the module carries no
 * link-time dependency on where libhbg lies.
 *
 * The Python classes (hbg._core) keep the state checks (closed runtime,
 * ended bind) and pass raw pointers here as ints; errors come back as the
 * exception the package's error factory builds from (code, call, the C
 * message of hbg_last_error()). Nothing here keeps a runtime or bind alive.
 */
#ifndef Py_LIMITED_API
#define Py_LIMITED_API 0x03080000
#endif
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "hbg/hbg.h"

/* The pre-3.0 buffer calls are in the stable ABI for good (the headers of
 * 3.13 and later no longer declare them). They take a contiguous buffer. */
#if PY_VERSION_HEX >= 0x030D0000
PyAPI_FUNC(int) PyObject_AsReadBuffer(PyObject *obj, const void **buffer,
                                      Py_ssize_t *buffer_len);
PyAPI_FUNC(int) PyObject_AsWriteBuffer(PyObject *obj, void **buffer,
                                       Py_ssize_t *buffer_len);
#endif
#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif

/* ---- libhbg entry points (process-wide, set once by init()) ---- */

#define NATIVE_FNS(X)                                                          \
  X(hbg_last_error)                                                            \
  X(hbg_tensor_contig)                                                         \
  X(hbg_tensor_extent)                                                         \
  X(hbg_bind_begin)                                                            \
  X(hbg_submit_task)                                                           \
  X(hbg_submit_graph)                                                          \
  X(hbg_record_task)                                                           \
  X(hbg_record_tensors)                                                        \
  X(hbg_record_scalars)                                                        \
  X(hbg_bind_launch)                                                           \
  X(hbg_bind_wait)                                                             \
  X(hbg_bind_end)                                                              \
  X(hbg_buffer_write)                                                          \
  X(hbg_buffer_read)

/* Optional entry points (NULL where the library lacks them: the calls then
 * raise HBG_E_UNSUPPORTED), by signature, so that this file builds against
 * headers that do not declare them yet: DLPack interop (issue 38). */
#define NATIVE_OPT_FNS(X)                                                      \
  X(hbg_buffer_import, int, (hbg_runtime *, uint64_t, uint64_t, uint64_t *))   \
  X(hbg_buffer_host_ptr, int, (hbg_runtime *, uint64_t, uint64_t, void **))    \
  X(hbg_bind_launch_on, int, (hbg_bind *, void *))

static struct {
#define FN_FIELD(name) __typeof__(&name) name;
  NATIVE_FNS(FN_FIELD)
#undef FN_FIELD
  __typeof__(&hbg_submit_graph_n) hbg_submit_graph_n; /* optional */
#define OPT_FIELD(name, ret, args) ret(*name) args;
  NATIVE_OPT_FNS(OPT_FIELD)
#undef OPT_FIELD
  void *dl;
  PyObject *error_factory; /* fn(code, where, message, rt_ptr) -> exc */
  PyObject *tensor_cls;    /* hbg.Tensor (a TensorBase subclass) */
  PyObject *recorder_cls;  /* hbg.Recorder: Recorder(rec_ptr) */
  PyObject *scalar_cls;    /* hbg.Scalar (value, kind, index) */
  PyObject *range_error;   /* fn(what, value, limits) -> OutOfRangeError */
} F;

#define MAX_STACK_TENSORS 64
#define MAX_STACK_U64 64

/* Raise the exception the package's error factory makes of (code, call,
 * message, runtime pointer or 0). */
static PyObject *raise_made(int rc, const char *where, const char *msg,
                            void *rt) {
  PyObject *exc = PyObject_CallFunction(F.error_factory, "isyK", rc, where,
                                        msg ? msg : "",
                                        (unsigned long long)(uintptr_t)rt);
  if (exc) {
    PyObject *type = PyObject_Type(exc);
    PyErr_SetObject(type, exc);
    Py_DECREF(type);
    Py_DECREF(exc);
  }
  return NULL;
}

/* rc from call `where`. with_msg: the call clears hbg_last_error() on
 * entry, so the slot holds this failure's message; HBG_E_BUSY (another
 * thread is inside a call on the runtime) always writes one. */
static PyObject *fail(int rc, const char *where, int with_msg, void *rt) {
  return raise_made(rc, where,
                    with_msg || rc == HBG_E_BUSY ? F.hbg_last_error() : "",
                    rt);
}

/* A bad argument caught here, before any call (HBG_E_INVAL). */
static PyObject *arg_error(const char *text) {
  return raise_made(HBG_E_INVAL, "", text, NULL);
}

static int not_ready(void) {
  if (F.error_factory)
    return 0;
  PyErr_SetString(PyExc_RuntimeError, "hbg._native: init() not called");
  return -1;
}

/* The n positional arguments of a per-call function, borrowed (cheaper
 * than PyArg_ParseTuple's format parsing on the per-layer path). */
static int unpack(PyObject *args, Py_ssize_t n, PyObject **out,
                  const char *name) {
  if (PyTuple_Size(args) != n) {
    PyErr_Format(PyExc_TypeError, "%s takes %zd arguments", name, n);
    return -1;
  }
  for (Py_ssize_t i = 0; i < n; i++)
    out[i] = PyTuple_GetItem(args, i);
  return 0;
}

/* An int argument (or anything int() takes) as u64, wrapping like C. */
static int as_u64(PyObject *o, unsigned long long *out) {
  PyObject *v = PyLong_Check(o) ? o : PyNumber_Long(o);
  if (!v)
    return -1;
  *out = PyLong_AsUnsignedLongLongMask(v);
  if (v != o)
    Py_DECREF(v);
  return *out == (unsigned long long)-1 && PyErr_Occurred() ? -1 : 0;
}

static void *as_ptr(PyObject *o) {
  if (o == Py_None)
    return NULL;
  return PyLong_AsVoidPtr(o);
}

/* ---- numbers to C fields, checked (the rules of hbg/_convert.py) ---- */

/* An argument's name for a message: "what", "what i" (i >= 0), or
 * "replay r, what i" (r >= 0). */
static const char *what_str(char *buf, size_t cap, const char *what,
                            Py_ssize_t i, Py_ssize_t r) {
  if (r >= 0)
    snprintf(buf, cap, "replay %zd, %s %zd", r, what, i);
  else if (i >= 0)
    snprintf(buf, cap, "%s %zd", what, i);
  else
    snprintf(buf, cap, "%s", what);
  return buf;
}

/* Raise the package's OutOfRangeError for value. @return -1. */
static int range_fail(const char *what, Py_ssize_t i, Py_ssize_t r,
                      PyObject *value, const char *limits) {
  char w[96];
  PyObject *exc = PyObject_CallFunction(F.range_error, "sOs",
                                        what_str(w, sizeof w, what, i, r),
                                        value, limits);
  if (exc) {
    PyObject *type = PyObject_Type(exc);
    PyErr_SetObject(type, exc);
    Py_DECREF(type);
    Py_DECREF(exc);
  }
  return -1;
}

/* TypeError "what: <want>, not <type name>". @return -1. */
static int type_fail(const char *what, Py_ssize_t i, Py_ssize_t r,
                     PyObject *value, const char *want) {
  char w[96];
  PyObject *name = PyObject_GetAttrString((PyObject *)Py_TYPE(value),
                                          "__name__");
  if (name) {
    PyErr_Format(PyExc_TypeError, "%s: %s, not %U",
                 what_str(w, sizeof w, what, i, r), want, name);
    Py_DECREF(name);
  }
  return -1;
}

#define INT_LIMITS "an integer scalar is a u64 or an i64: -2**63 .. 2**64-1"

/* An int (a PyLong) as u64 bits: itself, or a negative one's i64 two's
 * complement. */
static int long_bits(PyObject *v, const char *what, Py_ssize_t i,
                     Py_ssize_t r, PyObject *orig, uint64_t *out) {
  unsigned long long u = PyLong_AsUnsignedLongLong(v);
  if (!(u == (unsigned long long)-1 && PyErr_Occurred())) {
    *out = u;
    return 0;
  }
  PyErr_Clear();
  long long sv = PyLong_AsLongLong(v);
  if (sv == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    return range_fail(what, i, r, orig, INT_LIMITS);
  }
  *out = (uint64_t)sv;
  return 0;
}

/* x as an int: a new reference to a PyLong, or NULL (no exception set)
 * when x has no __index__ (a float); NULL with an exception on errors. */
static PyObject *index_of(PyObject *x) {
  if (PyLong_Check(x)) {
    Py_INCREF(x);
    return x;
  }
  if (PyFloat_Check(x))
    return NULL;
  PyObject *v = PyNumber_Index(x);
  if (!v && PyErr_ExceptionMatches(PyExc_TypeError))
    PyErr_Clear();
  return v;
}

/* A key: an int, same range as an integer scalar. */
static int int_bits(PyObject *x, const char *what, Py_ssize_t i,
                    Py_ssize_t r, uint64_t *out) {
  PyObject *v = index_of(x);
  if (!v)
    return PyErr_Occurred() ? -1 : type_fail(what, i, r, x, "expected an int");
  int rc = long_bits(v, what, i, r, x, out);
  Py_DECREF(v);
  return rc;
}

/* A kernel or task id: an int in 0 .. 2**32-1. */
static int u32_of(PyObject *x, const char *what, Py_ssize_t i, uint32_t *out) {
  PyObject *v = index_of(x);
  if (!v)
    return PyErr_Occurred() ? -1 : type_fail(what, i, -1, x, "expected an int");
  unsigned long u = PyLong_AsUnsignedLong(v);
  Py_DECREF(v);
  if ((u == (unsigned long)-1 && PyErr_Occurred()) || u > UINT32_MAX) {
    PyErr_Clear();
    return range_fail(what, i, -1, x, "0 .. 2**32-1");
  }
  *out = (uint32_t)u;
  return 0;
}

/* The bits of the f32 nearest to d; a finite d may not round to inf. */
static int f32_of(double d, const char *what, Py_ssize_t i, Py_ssize_t r,
                  PyObject *orig, uint64_t *out) {
  float f = (float)d; /* IEEE: rounds to nearest, inf past the range */
  if (isinf(f) && !isinf(d))
    return range_fail(what, i, r, orig,
                      "beyond the f32 range, +-3.4028235e38");
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  *out = u;
  return 0;
}

/* A scalar: an int as its u64 bits, a float (or anything with __float__
 * and no __index__) as f32 bits. */
static int scalar_bits(PyObject *x, const char *what, Py_ssize_t i,
                       Py_ssize_t r, uint64_t *out) {
  if (PyLong_Check(x))
    return long_bits(x, what, i, r, x, out);
  PyObject *v = index_of(x);
  if (v) {
    int rc = long_bits(v, what, i, r, x, out);
    Py_DECREF(v);
    return rc;
  }
  if (PyErr_Occurred())
    return -1;
  double d = PyFloat_AsDouble(x); /* __float__ */
  if (d == -1.0 && PyErr_Occurred()) {
    if (!PyErr_ExceptionMatches(PyExc_TypeError))
      return -1;
    PyErr_Clear();
    return type_fail(what, i, r, x, "a scalar is an int or a float");
  }
  return f32_of(d, what, i, r, x, out);
}

/* ---- TensorBase: an hbg_tensor inline in the object ---- */

typedef struct {
  PyObject_HEAD hbg_tensor t;
} TensorObject;

static PyTypeObject *TensorBase_type;

static int is_tensor(PyObject *o) {
  return PyObject_TypeCheck(o, TensorBase_type);
}

static hbg_tensor *tensor_of(PyObject *o) { return &((TensorObject *)o)->t; }

static PyObject *tensor_new_of(PyObject *cls, const hbg_tensor *t) {
  allocfunc alloc =
      (allocfunc)PyType_GetSlot((PyTypeObject *)cls, Py_tp_alloc);
  PyObject *o = alloc((PyTypeObject *)cls, 0);
  if (o)
    *tensor_of(o) = *t;
  return o;
}

/* One dim or stride (an int: __index__, never a float's truncation): the
 * value, or -1 when outside 0 .. 2**32-1; -2 with a Python exception. */
static long long dim_of(PyObject *o) {
  PyObject *v = PyNumber_Index(o);
  if (!v)
    return -2;
  long long x = PyLong_AsLongLong(v);
  Py_DECREF(v);
  if (x == -1 && PyErr_Occurred()) {
    if (!PyErr_ExceptionMatches(PyExc_OverflowError))
      return -2;
    PyErr_Clear();
    return -1;
  }
  return x >= 0 && x <= (long long)UINT32_MAX ? x : -1;
}

/* Dims of a shape (an int or a sequence of ints) into dims[]; -1 on error
 * (a Python exception set). A value outside 0 .. 2**32-1 becomes 0 (an
 * invalid dim), or, with bad set, sets *bad; more than HBG_MAX_DIMS
 * leaves *ndim past it. */
static int shape_dims(PyObject *shape, uint32_t *dims, int *ndim, int *bad) {
  if (PyLong_Check(shape)) {
    long long v = dim_of(shape);
    if (v == -2)
      return -1;
    dims[0] = v > 0 ? (uint32_t)v : 0;
    if (v < 0 && bad)
      *bad = 1;
    *ndim = 1;
    return 0;
  }
  PyObject *seq = PySequence_Fast(shape, "shape must be an int or a sequence");
  if (!seq)
    return -1;
  Py_ssize_t n = PySequence_Size(seq);
  int rc = 0;
  if (n < 0) {
    rc = -1;
  } else if (n > HBG_MAX_DIMS) {
    *ndim = (int)n;
  } else {
    *ndim = (int)n;
    for (Py_ssize_t i = 0; i < n; i++) {
      PyObject *item = PySequence_GetItem(seq, i);
      long long v = item ? dim_of(item) : -2;
      Py_XDECREF(item);
      if (v == -2) {
        rc = -1;
        break;
      }
      if (v < 0 && bad)
        *bad = 1;
      dims[i] = v > 0 ? (uint32_t)v : 0;
    }
  }
  Py_DECREF(seq);
  return rc;
}

/* addr / offset of a tensor: an int in 0 .. 2**64-1. */
static int u64_field(PyObject *o, const char *what, unsigned long long *out) {
  *out = PyLong_AsUnsignedLongLong(o);
  if (*out == (unsigned long long)-1 && PyErr_Occurred()) {
    if (!PyErr_ExceptionMatches(PyExc_OverflowError))
      return -1;
    PyErr_Clear();
    return range_fail(what, -1, -1, o, "0 .. 2**64-1");
  }
  return 0;
}

/* _set(addr, offset, dtype, mode, shape, strides) -> 0, HBG_E_INVAL (bad
 * shape) or -2 (strides not one per dim in 0 .. 2**32-1) */
static PyObject *tensor_set(PyObject *self, PyObject *args) {
  PyObject *ao, *oo;
  unsigned long long addr, offset;
  unsigned int dtype, mode;
  PyObject *shape, *strides;
  if (!PyArg_ParseTuple(args, "OOIIOO", &ao, &oo, &dtype, &mode, &shape,
                        &strides) ||
      u64_field(ao, "tensor addr", &addr) < 0 ||
      u64_field(oo, "tensor offset", &offset) < 0)
    return NULL;
  uint32_t dims[HBG_MAX_DIMS] = {0}, st[HBG_MAX_DIMS] = {0};
  int ndim = 0, nst = 0, bad = 0;
  if (shape_dims(shape, dims, &ndim, NULL) < 0)
    return NULL;
  if (ndim < 1 || ndim > HBG_MAX_DIMS)
    return PyLong_FromLong(HBG_E_INVAL);
  hbg_tensor *t = tensor_of(self);
  if (strides == Py_None) {
    return PyLong_FromLong(F.hbg_tensor_contig(t, addr, offset, dtype,
                                              (uint32_t)ndim, dims, mode));
  }
  if (shape_dims(strides, st, &nst, &bad) < 0)
    return NULL;
  if (nst != ndim || bad)
    return PyLong_FromLong(-2);
  memset(t, 0, sizeof *t);
  t->addr = addr;
  t->offset = offset;
  memcpy(t->shape, dims, sizeof dims);
  memcpy(t->strides, st, sizeof st);
  t->dtype = (uint8_t)dtype;
  t->ndim = (uint8_t)ndim;
  t->mode = (uint8_t)mode;
  return PyLong_FromLong(0);
}

static PyObject *dims_tuple(const uint32_t *v, int n) {
  PyObject *t = PyTuple_New(n);
  for (int i = 0; t && i < n; i++) {
    PyObject *x = PyLong_FromUnsignedLong(v[i]);
    if (!x) {
      Py_DECREF(t);
      return NULL;
    }
    PyTuple_SetItem(t, i, x);
  }
  return t;
}

static PyObject *tensor_get_addr(PyObject *self, void *c) {
  (void)c;
  return PyLong_FromUnsignedLongLong(tensor_of(self)->addr);
}
static int tensor_put_addr(PyObject *self, PyObject *v, void *c) {
  (void)c;
  unsigned long long a = v ? PyLong_AsUnsignedLongLong(v) : 0;
  if (!v || (a == (unsigned long long)-1 && PyErr_Occurred())) {
    if (!v)
      PyErr_SetString(PyExc_AttributeError, "cannot delete");
    return -1;
  }
  tensor_of(self)->addr = a;
  return 0;
}
static PyObject *tensor_get_offset(PyObject *self, void *c) {
  (void)c;
  return PyLong_FromUnsignedLongLong(tensor_of(self)->offset);
}
static PyObject *tensor_get_dtype(PyObject *self, void *c) {
  (void)c;
  return PyLong_FromLong(tensor_of(self)->dtype);
}
static PyObject *tensor_get_mode(PyObject *self, void *c) {
  (void)c;
  return PyLong_FromLong(tensor_of(self)->mode);
}
static int tensor_put_mode(PyObject *self, PyObject *v, void *c) {
  (void)c;
  long m = v ? PyLong_AsLong(v) : -1;
  if (!v || (m == -1 && PyErr_Occurred())) {
    if (!v)
      PyErr_SetString(PyExc_AttributeError, "cannot delete");
    return -1;
  }
  tensor_of(self)->mode = (uint8_t)m;
  return 0;
}
static PyObject *tensor_get_shape(PyObject *self, void *c) {
  (void)c;
  hbg_tensor *t = tensor_of(self);
  return dims_tuple(t->shape, t->ndim);
}
static PyObject *tensor_get_strides(PyObject *self, void *c) {
  (void)c;
  hbg_tensor *t = tensor_of(self);
  return dims_tuple(t->strides, t->ndim);
}
static PyObject *tensor_get_extent(PyObject *self, void *c) {
  (void)c;
  return PyLong_FromUnsignedLongLong(F.hbg_tensor_extent(tensor_of(self)));
}

static PyObject *tensor_copy(PyObject *self, PyObject *unused) {
  (void)unused;
  PyObject *cls = PyObject_Type(self);
  PyObject *o = cls ? tensor_new_of(cls, tensor_of(self)) : NULL;
  Py_XDECREF(cls);
  return o;
}

static PyGetSetDef tensor_getset[] = {
    {"_addr", tensor_get_addr, tensor_put_addr, NULL, NULL},
    {"_offset", tensor_get_offset, NULL, NULL, NULL},
    {"_dtype", tensor_get_dtype, NULL, NULL, NULL},
    {"_mode", tensor_get_mode, tensor_put_mode, NULL, NULL},
    {"_shape", tensor_get_shape, NULL, NULL, NULL},
    {"_strides", tensor_get_strides, NULL, NULL, NULL},
    {"_extent", tensor_get_extent, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyMethodDef tensor_methods[] = {
    {"_set", tensor_set, METH_VARARGS, NULL},
    {"_copy", tensor_copy, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL}};

static PyType_Slot tensor_slots[] = {
    {Py_tp_doc, (void *)"An hbg_tensor held in the object (native)."},
    {Py_tp_getset, tensor_getset},
    {Py_tp_methods, tensor_methods},
    {0, NULL}};

static PyType_Spec tensor_spec = {"hbg._native.TensorBase",
                                  sizeof(TensorObject), 0,
                                  Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
                                  tensor_slots};

/* ---- argument arrays ---- */

/* A tensor list's structs: a packed bytes object (pack()) is used in place;
 * a sequence of TensorBase objects is copied into buf (or a heap array,
 * *heap set, when it holds more than MAX_STACK_TENSORS). */
typedef struct {
  const hbg_tensor *v;
  hbg_tensor *heap;
  Py_ssize_t n;
} tensor_arr;

/* PySequence_Fast(o) and room for its *n items of elem bytes: buf when
 * they fit in cap, else a heap array (*heap, the caller frees it).
 * @return the sequence (a new reference), or NULL with an exception. */
static PyObject *seq_room(PyObject *o, const char *what, void *buf,
                          Py_ssize_t cap, size_t elem, void **dst,
                          void **heap, Py_ssize_t *n) {
  PyObject *seq = PySequence_Fast(o, what);
  if (!seq)
    return NULL;
  *n = PySequence_Size(seq);
  *dst = buf;
  if (*n > cap) {
    *dst = *heap = PyMem_Malloc((size_t)*n * elem);
    if (!*dst) {
      Py_DECREF(seq);
      PyErr_NoMemory();
      return NULL;
    }
  }
  return seq;
}

/* Drop a seq_room sequence and heap array after a failure. */
static int seq_fail(PyObject *seq, void **heap) {
  Py_DECREF(seq);
  PyMem_Free(*heap);
  *heap = NULL;
  return -1;
}

static int tensors_get(PyObject *o, hbg_tensor *buf, tensor_arr *out,
                       hbg_tensor **writable) {
  out->heap = NULL;
  if (PyBytes_Check(o)) {
    if (writable) {
      arg_error("recorded tasks take a list of Tensors");
      return -1;
    }
    out->v = (const hbg_tensor *)PyBytes_AsString(o);
    out->n = PyBytes_Size(o) / (Py_ssize_t)sizeof(hbg_tensor);
    return 0;
  }
  hbg_tensor *dst;
  Py_ssize_t n;
  PyObject *seq = seq_room(o, "tensors must be a list of Tensors", buf,
                           MAX_STACK_TENSORS, sizeof *dst, (void **)&dst,
                           (void **)&out->heap, &n);
  if (!seq)
    return -1;
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *t = PySequence_GetItem(seq, i);
    if (!t || !is_tensor(t)) {
      Py_XDECREF(t);
      if (!PyErr_Occurred())
        arg_error("tensors must be hbg.Tensor objects");
      return seq_fail(seq, (void **)&out->heap);
    }
    dst[i] = *tensor_of(t);
    Py_DECREF(t);
  }
  Py_DECREF(seq);
  out->v = dst;
  out->n = n;
  if (writable)
    *writable = dst;
  return 0;
}

/* A sequence of numbers as u64 (uint32 task ids when ids) into buf or the
 * heap: scalars follow scalar_bits (boundary scalars, variant values),
 * ids u32_of; `what` and row name an element in an error. */
typedef struct {
  void *v;
  void *heap;
  Py_ssize_t n;
} int_arr;

static int ints_get(PyObject *o, int ids, const char *what, Py_ssize_t row,
                    uint64_t *buf, int_arr *out) {
  out->heap = NULL;
  out->v = buf;
  out->n = 0;
  if (o == Py_None)
    return 0;
  uint64_t *dst;
  Py_ssize_t n;
  PyObject *seq = seq_room(o, "expected a sequence of numbers", buf,
                           MAX_STACK_U64, sizeof *dst, (void **)&dst,
                           &out->heap, &n);
  if (!seq)
    return -1;
  uint32_t *d32 = (uint32_t *)dst;
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *x = PySequence_GetItem(seq, i);
    int bad = !x;
    if (x && ids)
      bad = u32_of(x, what, i, &d32[i]) < 0;
    else if (x)
      bad = scalar_bits(x, what, i, row, &dst[i]) < 0;
    Py_XDECREF(x);
    if (bad)
      return seq_fail(seq, &out->heap);
  }
  Py_DECREF(seq);
  out->v = dst;
  out->n = n;
  return 0;
}

/* Task scalars: numbers (static, scalar_bits), or hbg.Scalar objects. */
static int scalars_get(PyObject *o, hbg_scalar *buf, Py_ssize_t cap,
                       Py_ssize_t *n_out) {
  *n_out = 0;
  if (o == Py_None)
    return 0;
  PyObject *seq = PySequence_Fast(o, "scalars must be a sequence");
  if (!seq)
    return -1;
  Py_ssize_t n = PySequence_Size(seq);
  if (n > cap) {
    Py_DECREF(seq);
    fail(HBG_E_LIMIT, "hbg_submit_task", 0, NULL);
    return -1;
  }
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *x = PySequence_GetItem(seq, i);
    hbg_scalar s = {0, HBG_SCALAR_STATIC, 0};
    int bad = !x;
    if (x && PyLong_Check(x)) {
      bad = long_bits(x, "scalar", i, -1, x, &s.value) < 0;
    } else if (x && PyObject_IsInstance(x, F.scalar_cls) == 1) {
      PyObject *v = PyObject_GetAttrString(x, "value");
      PyObject *k = v ? PyObject_GetAttrString(x, "kind") : NULL;
      PyObject *ix = k ? PyObject_GetAttrString(x, "index") : NULL;
      bad = !ix || int_bits(v, "scalar", i, -1, &s.value) < 0 ||
            u32_of(k, "scalar kind", i, &s.kind) < 0 ||
            u32_of(ix, "scalar index", i, &s.index) < 0;
      Py_XDECREF(v);
      Py_XDECREF(k);
      Py_XDECREF(ix);
    } else if (x && !PyErr_Occurred()) {
      bad = scalar_bits(x, "scalar", i, -1, &s.value) < 0;
    }
    Py_XDECREF(x);
    if (bad || PyErr_Occurred()) {
      Py_DECREF(seq);
      return -1;
    }
    buf[i] = s;
  }
  Py_DECREF(seq);
  *n_out = n;
  return 0;
}

/* A task from (kernel, args, scalars, deps). The caller frees ta->heap and
 * da->heap. */
typedef struct {
  hbg_task task;
  hbg_tensor tbuf[MAX_STACK_TENSORS];
  hbg_scalar sbuf[64]; /* HBG_IMG_MAX_SCALARS_PER_NODE */
  uint64_t dbuf[MAX_STACK_U64];
  tensor_arr ta;
  int_arr da;
  hbg_tensor *writable;
} task_build;

static int task_get(task_build *tb, unsigned kernel, PyObject *args,
                    PyObject *scalars, PyObject *deps, int writable) {
  Py_ssize_t ns = 0;
  tb->da.heap = NULL;
  if (tensors_get(args, tb->tbuf, &tb->ta,
                  writable ? &tb->writable : NULL) < 0)
    return -1;
  if (scalars_get(scalars, tb->sbuf, 64, &ns) < 0 ||
      ints_get(deps, 1, "dependency", -1, tb->dbuf, &tb->da) < 0) {
    PyMem_Free(tb->ta.heap);
    return -1;
  }
  tb->task.kernel = kernel;
  tb->task.n_args = (uint32_t)tb->ta.n;
  tb->task.args = (hbg_tensor *)tb->ta.v; /* written only when recording */
  tb->task.n_scalars = (uint32_t)ns;
  tb->task.scalars = ns ? tb->sbuf : NULL;
  tb->task.n_deps = (uint32_t)tb->da.n;
  tb->task.deps = tb->da.n ? (const hbg_task_id *)tb->da.v : NULL;
  return 0;
}

static void task_free(task_build *tb) {
  PyMem_Free(tb->ta.heap);
  PyMem_Free(tb->da.heap);
}

/* ---- binds ---- */

static PyObject *n_bind_begin(PyObject *m, PyObject *args) {
  (void)m;
  PyObject *rto;
  if (not_ready() || !PyArg_ParseTuple(args, "O", &rto))
    return NULL;
  hbg_runtime *rt = as_ptr(rto);
  if (PyErr_Occurred())
    return NULL;
  hbg_bind *b = NULL;
  int rc;
  Py_BEGIN_ALLOW_THREADS
  rc = F.hbg_bind_begin(rt, &b);
  Py_END_ALLOW_THREADS
  if (rc < 0)
    return fail(rc, "hbg_bind_begin", 0, rt);
  return PyLong_FromVoidPtr(b);
}

/* launch / wait / end: (bind_ptr) -> rc (launch raises; wait returns rc
 * so that the caller can read the stats first). */
static PyObject *n_bind_launch(PyObject *m, PyObject *args) {
  (void)m;
  PyObject *bo, *rto;
  if (!PyArg_ParseTuple(args, "OO", &bo, &rto))
    return NULL;
  hbg_bind *b = as_ptr(bo);
  if (PyErr_Occurred())
    return NULL;
  int rc;
  Py_BEGIN_ALLOW_THREADS
  rc = F.hbg_bind_launch(b);
  Py_END_ALLOW_THREADS
  if (rc < 0)
    return fail(rc, "hbg_bind_launch", 0, as_ptr(rto));
  Py_RETURN_NONE;
}

static PyObject *n_bind_wait(PyObject *m, PyObject *bo) {
  (void)m;
  hbg_bind *b = as_ptr(bo);
  if (PyErr_Occurred())
    return NULL;
  int rc;
  Py_BEGIN_ALLOW_THREADS
  rc = F.hbg_bind_wait(b);
  Py_END_ALLOW_THREADS
  return PyLong_FromLong(rc);
}

static PyObject *n_bind_end(PyObject *m, PyObject *bo) {
  (void)m;
  hbg_bind *b = as_ptr(bo);
  if (PyErr_Occurred())
    return NULL;
  Py_BEGIN_ALLOW_THREADS
  F.hbg_bind_end(b);
  Py_END_ALLOW_THREADS
  Py_RETURN_NONE;
}

/* submit_task(bind, rt, kernel, args, scalars, deps, nogil) -> task id */
static PyObject *n_submit_task(PyObject *m, PyObject *args) {
  (void)m;
  PyObject *a[7];
  uint32_t kernel;
  if (unpack(args, 7, a, "submit_task") < 0 ||
      u32_of(a[2], "kernel", -1, &kernel) < 0)
    return NULL;
  PyObject *rto = a[1], *targs = a[3], *scalars = a[4], *deps = a[5];
  int nogil = PyObject_IsTrue(a[6]);
  hbg_bind *b = as_ptr(a[0]);
  if (nogil < 0 || PyErr_Occurred())
    return NULL;
  task_build tb;
  if (task_get(&tb, kernel, targs, scalars, deps, 0) < 0)
    return NULL;
  hbg_task_id id = 0;
  int rc;
  if (nogil) {
    Py_BEGIN_ALLOW_THREADS
    rc = F.hbg_submit_task(b, &tb.task, &id);
    Py_END_ALLOW_THREADS
  } else {
    rc = F.hbg_submit_task(b, &tb.task, &id);
  }
  task_free(&tb);
  if (rc < 0)
    return fail(rc, "hbg_submit_task", 1, as_ptr(rto));
  return PyLong_FromUnsignedLong(id);
}

/* The record callback's context: the Python function and what it raised. */
typedef struct {
  PyObject *fn;
  PyObject *exc_type, *exc_value, *exc_tb;
} record_ctx;

static int record_trampoline(hbg_recorder *rec, void *user) {
  record_ctx *ctx = user;
  PyGILState_STATE g = PyGILState_Ensure();
  int rc = 0;
  PyObject *r = PyObject_CallFunction(F.recorder_cls, "N",
                                      PyLong_FromVoidPtr(rec));
  PyObject *out = r ? PyObject_CallFunctionObjArgs(ctx->fn, r, NULL) : NULL;
  if (!out) {
    if (!ctx->exc_type) /* the first exception is the one raised */
      PyErr_Fetch(&ctx->exc_type, &ctx->exc_value, &ctx->exc_tb);
    else
      PyErr_Clear();
    rc = HBG_E_RECORD;
  }
  Py_XDECREF(out);
  if (r) { /* the recorder is valid only during the call */
    PyObject *none = Py_None;
    if (PyObject_SetAttrString(r, "_p", none) < 0)
      PyErr_Clear();
    Py_DECREF(r);
  }
  PyGILState_Release(g);
  return rc;
}

/* Boundary scalars: a flat sequence of ints, or (rows) one sequence per
 * replay, each of width *width (set from the first row). */
static int scalar_rows(PyObject *o, Py_ssize_t rows, uint64_t *buf,
                       int_arr *out, Py_ssize_t *width) {
  if (rows == 0) {
    if (ints_get(o, 0, "boundary scalar", -1, buf, out) < 0)
      return -1;
    *width = out->n;
    return 0;
  }
  out->heap = NULL;
  out->v = buf;
  out->n = 0;
  *width = 0;
  if (o == Py_None)
    return 0;
  PyObject *seq = PySequence_Fast(o, "scalars must be a sequence of rows");
  if (!seq)
    return -1;
  Py_ssize_t n = PySequence_Size(seq);
  if (n != rows) {
    Py_DECREF(seq);
    arg_error("tensors and scalars differ in length");
    return -1;
  }
  uint64_t *dst = buf;
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *row = PySequence_GetItem(seq, i);
    int_arr ra;
    uint64_t rbuf[MAX_STACK_U64];
    int bad = !row || ints_get(row, 0, "boundary scalar", i, rbuf, &ra) < 0;
    Py_XDECREF(row);
    if (!bad && i == 0) {
      *width = ra.n;
      if (ra.n * rows > MAX_STACK_U64) {
        dst = out->heap = PyMem_Malloc((size_t)(ra.n * rows) * sizeof *dst);
        if (!dst) {
          PyErr_NoMemory();
          bad = 1;
        }
      }
    } else if (!bad && ra.n != *width) {
      arg_error("every replay needs the same number of boundary scalars");
      bad = 1;
    }
    if (!bad)
      memcpy(dst + i * *width, ra.v, (size_t)ra.n * sizeof *dst);
    if (!bad || row)
      PyMem_Free(ra.heap);
    if (bad) {
      Py_DECREF(seq);
      PyMem_Free(out->heap);
      out->heap = NULL;
      return -1;
    }
  }
  Py_DECREF(seq);
  out->v = dst;
  out->n = n * *width;
  return 0;
}

/* submit_graph(bind, rt, key, tensors, scalars, record, variant, deps,
 *              n, chain, nogil) -> task id (n == 0: one replay, flat
 * scalars) or list of n task ids (tensors: n * width structs; scalars: n
 * rows). */
static PyObject *n_submit_graph(PyObject *m, PyObject *args) {
  (void)m;
  PyObject *a[11];
  uint64_t key;
  if (unpack(args, 11, a, "submit_graph") < 0 ||
      int_bits(a[2], "key", -1, -1, &key) < 0)
    return NULL;
  PyObject *rto = a[1], *tensors = a[3], *scalars = a[4], *record = a[5];
  PyObject *variant = a[6], *deps = a[7];
  Py_ssize_t n = PyLong_AsSsize_t(a[8]);
  int chain = PyObject_IsTrue(a[9]), nogil = PyObject_IsTrue(a[10]);
  hbg_bind *b = as_ptr(a[0]);
  if (n < 0 || chain < 0 || nogil < 0 || PyErr_Occurred())
    return NULL;
  if (!PyCallable_Check(record))
    return arg_error("record must be callable");
  if (n > 0 && !F.hbg_submit_graph_n)
    return fail(HBG_E_UNSUPPORTED, "hbg_submit_graph_n", 0, NULL);
  hbg_tensor tbuf[MAX_STACK_TENSORS];
  uint64_t sbuf[MAX_STACK_U64], vbuf[MAX_STACK_U64], dbuf[MAX_STACK_U64];
  tensor_arr ta;
  int_arr sa = {0}, va = {0}, da = {0};
  Py_ssize_t width = 0;
  PyObject *res = NULL;
  if (tensors_get(tensors, tbuf, &ta, NULL) < 0)
    return NULL;
  if (scalar_rows(scalars, n, sbuf, &sa, &width) < 0 ||
      ints_get(variant, 0, "variant", -1, vbuf, &va) < 0 ||
      ints_get(deps, 1, "dependency", -1, dbuf, &da) < 0)
    goto out;
  Py_ssize_t rows = n > 0 ? n : 1;
  if (ta.n % rows) {
    arg_error("every replay needs the same number of boundary tensors");
    goto out;
  }
  record_ctx ctx = {record, NULL, NULL, NULL};
  hbg_graph_submit g = {
      .key = key,
      .variant = va.n ? va.v : NULL,
      .n_variant = (uint32_t)va.n,
      .n_tensors = (uint32_t)(ta.n / rows),
      .tensors = ta.n ? ta.v : NULL,
      .scalars = sa.n ? sa.v : NULL,
      .n_scalars = (uint32_t)width,
      .n_deps = (uint32_t)da.n,
      .deps = da.n ? (const hbg_task_id *)da.v : NULL,
      .record = record_trampoline,
      .user = &ctx};
  hbg_task_id one = 0, *ids = &one;
  if (n > 0) {
    ids = PyMem_Malloc((size_t)n * sizeof *ids);
    if (!ids) {
      PyErr_NoMemory();
      goto out;
    }
  }
  int rc;
  uint32_t flags = chain ? HBG_GRAPH_N_CHAIN : 0;
  if (nogil) {
    Py_BEGIN_ALLOW_THREADS
    rc = n > 0 ? F.hbg_submit_graph_n(b, &g, (uint32_t)n, flags, ids)
               : F.hbg_submit_graph(b, &g, ids);
    Py_END_ALLOW_THREADS
  } else {
    rc = n > 0 ? F.hbg_submit_graph_n(b, &g, (uint32_t)n, flags, ids)
               : F.hbg_submit_graph(b, &g, ids);
  }
  if (ctx.exc_type) { /* the callback's own exception wins */
    PyErr_Restore(ctx.exc_type, ctx.exc_value, ctx.exc_tb);
  } else if (rc < 0) {
    fail(rc, n > 0 ? "hbg_submit_graph_n" : "hbg_submit_graph", 1,
         as_ptr(rto));
  } else if (n == 0) {
    res = PyLong_FromUnsignedLong(one);
  } else {
    res = PyList_New(n);
    for (Py_ssize_t i = 0; res && i < n; i++) {
      PyObject *x = PyLong_FromUnsignedLong(ids[i]);
      if (!x) {
        Py_CLEAR(res);
        break;
      }
      PyList_SetItem(res, i, x);
    }
  }
  if (ids != &one)
    PyMem_Free(ids);
out:
  PyMem_Free(ta.heap);
  PyMem_Free(sa.heap);
  PyMem_Free(va.heap);
  PyMem_Free(da.heap);
  return res;
}

/* ---- inside a record callback ---- */

/* record_boundary(rec) -> (tensors, scalars) */
static PyObject *n_record_boundary(PyObject *m, PyObject *ro) {
  (void)m;
  hbg_recorder *rec = as_ptr(ro);
  if (PyErr_Occurred())
    return NULL;
  uint32_t nt = 0, ns = 0;
  const hbg_tensor *t = F.hbg_record_tensors(rec, &nt);
  const uint64_t *s = F.hbg_record_scalars(rec, &ns);
  PyObject *tl = PyList_New(t ? nt : 0), *sl = PyList_New(s ? ns : 0);
  for (uint32_t i = 0; tl && sl && t && i < nt; i++) {
    PyObject *x = tensor_new_of(F.tensor_cls, &t[i]);
    if (!x)
      goto fail;
    PyList_SetItem(tl, i, x);
  }
  for (uint32_t i = 0; tl && sl && s && i < ns; i++) {
    PyObject *x = PyLong_FromUnsignedLongLong(s[i]);
    if (!x)
      goto fail;
    PyList_SetItem(sl, i, x);
  }
  if (tl && sl)
    return Py_BuildValue("(NN)", tl, sl);
fail:
  Py_XDECREF(tl);
  Py_XDECREF(sl);
  return NULL;
}

/* record_task(rec, kernel, args, scalars, deps) -> inner node id; internal
 * outputs (addr 0) get the heap address written back into their Tensor. */
static PyObject *n_record_task(PyObject *m, PyObject *args) {
  (void)m;
  PyObject *ro, *ko, *targs, *scalars, *deps;
  uint32_t kernel;
  if (!PyArg_ParseTuple(args, "OOOOO", &ro, &ko, &targs, &scalars, &deps) ||
      u32_of(ko, "kernel", -1, &kernel) < 0)
    return NULL;
  hbg_recorder *rec = as_ptr(ro);
  if (PyErr_Occurred())
    return NULL;
  task_build tb;
  if (task_get(&tb, kernel, targs, scalars, deps, 1) < 0)
    return NULL;
  hbg_task_id id = 0;
  int rc = F.hbg_record_task(rec, &tb.task, &id);
  if (rc == 0) {
    PyObject *seq = PySequence_Fast(targs, "args");
    for (Py_ssize_t i = 0; seq && i < tb.ta.n; i++) {
      PyObject *t = PySequence_GetItem(seq, i);
      if (t) {
        tensor_of(t)->addr = tb.writable[i].addr;
        Py_DECREF(t);
      }
    }
    Py_XDECREF(seq);
  }
  task_free(&tb);
  if (PyErr_Occurred())
    return NULL;
  if (rc < 0)
    return fail(rc, "hbg_record_task", 1, NULL);
  return PyLong_FromUnsignedLong(id);
}

/* ---- buffers ---- */

/* A copy between a device buffer and a C-contiguous object with the
 * buffer protocol (writable for a read), the caller having checked bounds
 * and size. A memoryview is held across the copy, so the object cannot be
 * resized while the GIL is released. */
static PyObject *buffer_copy(PyObject *args, int to_device) {
  const char *where = to_device ? "hbg_buffer_write" : "hbg_buffer_read";
  PyObject *a[3];
  unsigned long long addr;
  if (unpack(args, 3, a, where) < 0 || as_u64(a[1], &addr) < 0)
    return NULL;
  hbg_runtime *rt = as_ptr(a[0]);
  if (PyErr_Occurred())
    return NULL;
  PyObject *mv = PyMemoryView_FromObject(a[2]);
  void *p = NULL;
  Py_ssize_t len = 0;
  int got = !mv ? -1
            : to_device
                ? PyObject_AsReadBuffer(mv, (const void **)&p, &len)
                : PyObject_AsWriteBuffer(mv, &p, &len);
  if (got < 0) {
    Py_XDECREF(mv);
    return NULL;
  }
  int rc;
  Py_BEGIN_ALLOW_THREADS
  rc = to_device ? F.hbg_buffer_write(rt, addr, p, (uint64_t)len)
                 : F.hbg_buffer_read(rt, p, addr, (uint64_t)len);
  Py_END_ALLOW_THREADS
  Py_DECREF(mv);
  if (rc < 0)
    return fail(rc, where, 0, rt);
  Py_RETURN_NONE;
}

/* buffer_write(rt, addr, src) */
static PyObject *n_buffer_write(PyObject *m, PyObject *args) {
  (void)m;
  return buffer_copy(args, 1);
}

/* buffer_read(rt, addr, dst) */
static PyObject *n_buffer_read(PyObject *m, PyObject *args) {
  (void)m;
  return buffer_copy(args, 0);
}

/* ---- DLPack interop ---- */

/* bind_launch_on(b, rt, stream): hbg_bind_launch_on(b, (void *)stream) */
static PyObject *n_bind_launch_on(PyObject *m, PyObject *args) {
  (void)m;
  PyObject *bo, *rto;
  unsigned long long stream;
  if (!PyArg_ParseTuple(args, "OOK", &bo, &rto, &stream))
    return NULL;
  hbg_bind *b = as_ptr(bo);
  if (PyErr_Occurred())
    return NULL;
  if (!F.hbg_bind_launch_on)
    return fail(HBG_E_UNSUPPORTED, "hbg_bind_launch_on", 0, NULL);
  int rc;
  Py_BEGIN_ALLOW_THREADS
  rc = F.hbg_bind_launch_on(b, (void *)(uintptr_t)stream);
  Py_END_ALLOW_THREADS
  if (rc < 0)
    return fail(rc, "hbg_bind_launch_on", 0, as_ptr(rto));
  Py_RETURN_NONE;
}

/* buffer_import(rt, addr, nbytes) -> the device address naming it */
static PyObject *n_buffer_import(PyObject *m, PyObject *args) {
  (void)m;
  PyObject *rto;
  unsigned long long addr, n;
  if (!PyArg_ParseTuple(args, "OKK", &rto, &addr, &n))
    return NULL;
  hbg_runtime *rt = as_ptr(rto);
  if (PyErr_Occurred())
    return NULL;
  if (!F.hbg_buffer_import)
    return fail(HBG_E_UNSUPPORTED, "hbg_buffer_import", 0, NULL);
  uint64_t out = 0;
  int rc = F.hbg_buffer_import(rt, addr, n, &out);
  if (rc < 0)
    return fail(rc, "hbg_buffer_import", 1, rt);
  return PyLong_FromUnsignedLongLong(out);
}

/* buffer_host_ptr(rt, addr, nbytes) -> the host address of the range */
static PyObject *n_buffer_host_ptr(PyObject *m, PyObject *args) {
  (void)m;
  PyObject *rto;
  unsigned long long addr, n;
  if (!PyArg_ParseTuple(args, "OKK", &rto, &addr, &n))
    return NULL;
  hbg_runtime *rt = as_ptr(rto);
  if (PyErr_Occurred())
    return NULL;
  if (!F.hbg_buffer_host_ptr)
    return fail(HBG_E_UNSUPPORTED, "hbg_buffer_host_ptr", 0, NULL);
  void *out = NULL;
  int rc = F.hbg_buffer_host_ptr(rt, addr, n, &out);
  if (rc < 0)
    return fail(rc, "hbg_buffer_host_ptr", 0, rt);
  return PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)out);
}

/* pack(tensors) -> bytes: the hbg_tensor structs of a list of Tensors. */
static PyObject *n_pack(PyObject *m, PyObject *o) {
  (void)m;
  hbg_tensor tbuf[MAX_STACK_TENSORS];
  tensor_arr ta;
  if (not_ready() || tensors_get(o, tbuf, &ta, NULL) < 0)
    return NULL;
  PyObject *r = PyBytes_FromStringAndSize((const char *)ta.v,
                                          ta.n * (Py_ssize_t)sizeof *ta.v);
  PyMem_Free(ta.heap);
  return r;
}

/* init(library_path, error_factory, tensor_cls, recorder_cls, scalar_cls,
 *      range_error) */
static PyObject *n_init(PyObject *m, PyObject *args) {
  (void)m;
  const char *path;
  PyObject *ef, *tc, *rc, *sc, *re;
  if (!PyArg_ParseTuple(args, "sOOOOO", &path, &ef, &tc, &rc, &sc, &re))
    return NULL;
  if (!PyObject_IsSubclass(tc, (PyObject *)TensorBase_type)) {
    if (!PyErr_Occurred())
      PyErr_SetString(PyExc_TypeError, "tensor class is no TensorBase");
    return NULL;
  }
  void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!dl) {
    PyErr_Format(PyExc_ImportError, "hbg._native: dlopen(%s): %s", path,
                 dlerror());
    return NULL;
  }
#define FN_LOAD(name)                                                          \
  if (!(*(void **)&F.name = dlsym(dl, #name))) {                              \
    PyErr_Format(PyExc_ImportError, "hbg._native: %s has no %s", path,        \
                 #name);                                                       \
    dlclose(dl);                                                               \
    return NULL;                                                               \
  }
  NATIVE_FNS(FN_LOAD)
#undef FN_LOAD
  *(void **)&F.hbg_submit_graph_n = dlsym(dl, "hbg_submit_graph_n");
#define OPT_LOAD(name, ret, args) *(void **)&F.name = dlsym(dl, #name);
  NATIVE_OPT_FNS(OPT_LOAD)
#undef OPT_LOAD
  if (F.dl)
    dlclose(F.dl);
  F.dl = dl;
  Py_INCREF(ef);
  Py_INCREF(tc);
  Py_INCREF(rc);
  Py_INCREF(sc);
  Py_INCREF(re);
  Py_XDECREF(F.error_factory);
  Py_XDECREF(F.tensor_cls);
  Py_XDECREF(F.recorder_cls);
  Py_XDECREF(F.scalar_cls);
  Py_XDECREF(F.range_error);
  F.error_factory = ef;
  F.tensor_cls = tc;
  F.recorder_cls = rc;
  F.scalar_cls = sc;
  F.range_error = re;
  Py_RETURN_NONE;
}

static PyMethodDef native_methods[] = {
    {"init", n_init, METH_VARARGS,
     "init(lib_path, error_factory, Tensor, Recorder, Scalar, range_error): "
     "bind to the loaded libhbg."},
    {"bind_begin", n_bind_begin, METH_VARARGS, NULL},
    {"bind_launch", n_bind_launch, METH_VARARGS, NULL},
    {"bind_wait", n_bind_wait, METH_O, NULL},
    {"bind_end", n_bind_end, METH_O, NULL},
    {"submit_task", n_submit_task, METH_VARARGS, NULL},
    {"submit_graph", n_submit_graph, METH_VARARGS, NULL},
    {"record_boundary", n_record_boundary, METH_O, NULL},
    {"record_task", n_record_task, METH_VARARGS, NULL},
    {"buffer_write", n_buffer_write, METH_VARARGS, NULL},
    {"buffer_read", n_buffer_read, METH_VARARGS, NULL},
    {"pack", n_pack, METH_O, NULL},
    {"bind_launch_on", n_bind_launch_on, METH_VARARGS, NULL},
    {"buffer_import", n_buffer_import, METH_VARARGS, NULL},
    {"buffer_host_ptr", n_buffer_host_ptr, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef native_module = {
    PyModuleDef_HEAD_INIT, "hbg._native",
    "The hbg package's per-task and per-layer calls in C (stable ABI).", -1,
    native_methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__native(void) {
  PyObject *m = PyModule_Create(&native_module);
  if (!m)
    return NULL;
  TensorBase_type = (PyTypeObject *)PyType_FromSpec(&tensor_spec);
  if (!TensorBase_type ||
      PyModule_AddObject(m, "TensorBase", (PyObject *)TensorBase_type) < 0) {
    Py_XDECREF(TensorBase_type);
    Py_DECREF(m);
    return NULL;
  }
  Py_INCREF(TensorBase_type);
  return m;
}
