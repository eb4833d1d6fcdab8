"""The ctypes implementation of the hot-path calls (hbg._native's
functions, same names and arguments). Used when the extension is not built
or when HBG_PY_NATIVE=0 asks for it; the test suite runs under both."""
import ctypes
import threading
from ctypes import byref, c_uint32, c_uint64, c_void_p

from . import _lib as L
from ._lib import lib

_F = {}  # error_factory, tensor_cls, recorder_cls (set by init)


def init(path, error_factory, tensor_cls, recorder_cls):
    _F.update(error_factory=error_factory, tensor_cls=tensor_cls,
              recorder_cls=recorder_cls)


def _fail(rc, where, with_msg, rt):
    msg = lib.hbg_last_error() if with_msg else b""
    raise _F["error_factory"](rc, where, msg or b"", rt or 0)


def _arg_error(text):
    raise _F["error_factory"](-1, "", text.encode(), 0)


class TensorBase:
    """An hbg_tensor held in a ctypes struct (``_c``)."""
    __slots__ = ("_c",)

    def _set(self, addr, offset, dtype, mode, shape, strides):
        shape = tuple(int(d) for d in (shape if hasattr(shape, "__len__")
                                       else (shape,)))
        c = L.Tensor_c()
        self._c = c
        if not 0 < len(shape) <= L.MAX_DIMS:
            return -1
        if strides is None:
            dims = (c_uint32 * len(shape))(*[max(0, d) for d in shape])
            return lib.hbg_tensor_contig(byref(c), addr, offset, dtype,
                                         len(shape), dims, mode)
        strides = tuple(int(s) for s in strides)
        if len(strides) != len(shape):
            return -1
        c.addr, c.offset = addr, offset
        for i, (d, s) in enumerate(zip(shape, strides)):
            c.shape[i], c.strides[i] = max(0, d), max(0, s)
        c.dtype, c.ndim, c.mode = dtype, len(shape), mode
        return 0

    def _copy(self):
        t = type(self).__new__(type(self))
        t._c = L.Tensor_c()
        ctypes.pointer(t._c)[0] = self._c
        return t

    def _get_addr(self):
        return self._c.addr

    def _put_addr(self, v):
        self._c.addr = v

    def _get_mode(self):
        return self._c.mode

    def _put_mode(self, v):
        self._c.mode = v

    _addr = property(_get_addr, _put_addr)
    _mode = property(_get_mode, _put_mode)
    _offset = property(lambda self: self._c.offset)
    _dtype = property(lambda self: self._c.dtype)
    _shape = property(lambda self: tuple(self._c.shape[:self._c.ndim]))
    _strides = property(lambda self: tuple(self._c.strides[:self._c.ndim]))
    _extent = property(lambda self: lib.hbg_tensor_extent(byref(self._c)))


def _tensors(ts):
    if isinstance(ts, ctypes.Array):
        return ts, len(ts)
    ts = list(ts)
    if any(not isinstance(t, TensorBase) for t in ts):
        _arg_error("tensors must be hbg.Tensor objects")
    return (L.Tensor_c * max(1, len(ts)))(*[t._c for t in ts]), len(ts)


def pack(tensors):
    arr, n = _tensors(tensors)
    return arr if n else (L.Tensor_c * 0)()


def _u32s(v):
    v = [int(x) for x in (v or ())]
    if any(x < 0 or x > 0xFFFFFFFF for x in v):
        _arg_error("task ids must be non-negative 32-bit ints")
    return (c_uint32 * max(1, len(v)))(*v), len(v)


def _u64s(v):
    v = [int(x) & 0xFFFFFFFFFFFFFFFF for x in (v or ())]
    return (c_uint64 * max(1, len(v)))(*v), len(v)


def _task(kernel, args, scalars, deps):
    """An hbg_task struct and its argument array (for the addresses that
    recording writes back)."""
    targs, n = _tensors(args)
    sc = []
    for s in scalars or ():
        if isinstance(s, int):
            sc.append(L.Scalar_c(s & 0xFFFFFFFFFFFFFFFF, 0, 0))
        else:
            sc.append(L.Scalar_c(s.value, s.kind, s.index))
    carr = (L.Scalar_c * max(1, len(sc)))(*sc)
    darr, nd = _u32s(deps)
    t = L.Task_c(int(kernel), n, targs, len(sc), nd, carr if sc else None,
                 darr if nd else None)
    t._keep = (carr, darr)
    return t, targs


def submit_task(b, rt, kernel, args, scalars, deps, nogil):
    t, _ = _task(kernel, args, scalars, deps)
    out = c_uint32()
    rc = lib.hbg_submit_task(b, byref(t), byref(out))
    if rc < 0:
        _fail(rc, "hbg_submit_task", True, rt)
    return out.value


_rec_lock = threading.Lock()
_rec_ctx = {}
_rec_next = [1]


@L.RECORD_FN
def _record_trampoline(rec, user):
    ctx = _rec_ctx.get(user)
    if ctx is None:
        return -11
    r = None
    try:
        r = _F["recorder_cls"](rec)
        ctx["fn"](r)
        return 0
    except BaseException as e:  # surfaced by submit_graph after the C call
        if ctx["exc"] is None:
            ctx["exc"] = e
        return -11
    finally:
        if r is not None:
            r._p = None


def submit_graph(b, rt, key, tensors, scalars, record, variant, deps, n,
                 chain, nogil):
    if not callable(record):
        _arg_error("record must be callable")
    rows = n if n > 0 else 1
    tarr, nt = _tensors(tensors)
    if nt % rows:
        _arg_error("every replay needs the same number of boundary tensors")
    if n == 0:
        flat = list(scalars or ())
        ns = len(flat)
    else:
        rs = [list(r) for r in scalars] if scalars is not None else [[]] * n
        if len(rs) != n:
            _arg_error("tensors and scalars differ in length")
        ns = len(rs[0])
        if any(len(r) != ns for r in rs):
            _arg_error("every replay needs the same number of boundary "
                       "scalars")
        flat = [s for r in rs for s in r]
        if not L.HAVE_BATCH:
            _fail(-5, "hbg_submit_graph_n", False, None)
    sarr, _ = _u64s(flat)
    varr, nv = _u64s(variant)
    darr, nd = _u32s(deps)
    with _rec_lock:
        tok = _rec_next[0]
        _rec_next[0] += 1
    ctx = {"fn": record, "exc": None}
    _rec_ctx[tok] = ctx
    g = L.GraphSubmit_c(int(key), varr, nv, nt // rows, tarr, sarr, ns, nd,
                        darr, _record_trampoline, tok)
    out = (c_uint32 * rows)()
    try:
        if n == 0:
            rc = lib.hbg_submit_graph(b, byref(g), out)
        else:
            rc = lib.hbg_submit_graph_n(b, byref(g), n, 1 if chain else 0,
                                        out)
    finally:
        del _rec_ctx[tok]
    if ctx["exc"] is not None:
        raise ctx["exc"]
    if rc < 0:
        _fail(rc, "hbg_submit_graph_n" if n else "hbg_submit_graph", True, rt)
    return out[0] if n == 0 else list(out)


def record_boundary(rec):
    n = c_uint32()
    arr = lib.hbg_record_tensors(rec, byref(n))
    cls = _F["tensor_cls"]
    tensors = []
    for i in range(n.value if arr else 0):
        t = cls.__new__(cls)
        t._c = L.Tensor_c()
        ctypes.pointer(t._c)[0] = arr[i]
        tensors.append(t)
    arr = lib.hbg_record_scalars(rec, byref(n))
    return tensors, [arr[i] for i in range(n.value if arr else 0)]


def record_task(rec, kernel, args, scalars, deps):
    args = list(args)
    t, targs = _task(kernel, args, scalars, deps)
    out = c_uint32()
    rc = lib.hbg_record_task(rec, byref(t), byref(out))
    if rc == 0:
        for i, a in enumerate(args):
            a._addr = targs[i].addr
    if rc < 0:
        _fail(rc, "hbg_record_task", True, None)
    return out.value


def bind_begin(rt):
    p = c_void_p()
    rc = lib.hbg_bind_begin(rt, byref(p))
    if rc < 0:
        _fail(rc, "hbg_bind_begin", False, rt)
    return p.value


def bind_launch(b, rt):
    rc = lib.hbg_bind_launch(b)
    if rc < 0:
        _fail(rc, "hbg_bind_launch", False, rt)


def bind_wait(b):
    return lib.hbg_bind_wait(b)


def bind_end(b):
    lib.hbg_bind_end(b)


def buffer_write(rt, addr, src):
    mv = memoryview(src).cast("B")
    if mv.readonly:
        ptr = ctypes.c_char_p(mv.tobytes())
    else:
        ptr = (ctypes.c_char * mv.nbytes).from_buffer(mv)
    rc = lib.hbg_buffer_write(rt, addr, ptr, mv.nbytes)
    if rc < 0:
        _fail(rc, "hbg_buffer_write", False, rt)


def buffer_read(rt, addr, dst):
    mv = memoryview(dst).cast("B")
    ptr = (ctypes.c_char * mv.nbytes).from_buffer(mv)
    rc = lib.hbg_buffer_read(rt, ptr, addr, mv.nbytes)
    if rc < 0:
        _fail(rc, "hbg_buffer_read", False, rt)
