"""The ctypes implementation of the hot-path calls (hbg._native's
functions, same names and arguments). Used when the extension is not built
or when HBG_PY_NATIVE=0 asks for it; the test suite runs under both."""
import ctypes
import operator
import threading
from ctypes import byref, c_uint32, c_uint64, c_void_p

from . import _convert as _C
from . import _lib as L
from ._lib import lib

_F = {}  # error_factory, tensor_cls, recorder_cls, scalar_cls (by init)


def init(path, error_factory, tensor_cls, recorder_cls, scalar_cls,
         range_error):
    _F.update(error_factory=error_factory, tensor_cls=tensor_cls,
              recorder_cls=recorder_cls, scalar_cls=scalar_cls)


def _fail(rc, where, with_msg, rt):
    # HBG_E_BUSY (another thread is inside a call) always writes a message
    msg = lib.hbg_last_error() if with_msg or rc == -21 else b""
    raise _F["error_factory"](rc, where, msg or b"", rt or 0)


def _arg_error(text):
    raise _F["error_factory"](-1, "", text.encode(), 0)


def _dim(v, what):
    """A shape dim or stride as a u32; -1 when out of range."""
    v = _C.u32(v, what) if v.__class__ is not int else v
    return v if 0 <= v < _C.U32 else -1


class TensorBase:
    """An hbg_tensor held in a ctypes struct (``_c``)."""
    __slots__ = ("_c",)

    def _set(self, addr, offset, dtype, mode, shape, strides):
        """0, HBG_E_INVAL (bad shape), or -2 (a stride outside 0..2**32-1
        or not one per dim). addr and offset past u64 raise."""
        if not 0 <= addr < _C.U64:
            raise _C.out_of_range("tensor addr", addr, "0 .. 2**64-1")
        if not 0 <= offset < _C.U64:
            raise _C.out_of_range("tensor offset", offset, "0 .. 2**64-1")
        shape = tuple(operator.index(d) for d in (
            shape if hasattr(shape, "__len__") else (shape,)))
        c = L.Tensor_c()
        self._c = c
        if not 0 < len(shape) <= L.MAX_DIMS:
            return -1
        if strides is None:
            dims = (c_uint32 * len(shape))(
                *[d if 0 < d < _C.U32 else 0 for d in shape])
            return lib.hbg_tensor_contig(byref(c), addr, offset, dtype,
                                         len(shape), dims, mode)
        strides = tuple(_dim(s, "stride") for s in strides)
        if len(strides) != len(shape) or -1 in strides:
            return -2
        c.addr, c.offset = addr, offset
        for i, (d, s) in enumerate(zip(shape, strides)):
            c.shape[i], c.strides[i] = d if 0 < d < _C.U32 else 0, s
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


# The per-call paths check an int in range inline and call _convert (and
# format an argument's name) only for anything else.
_U32, _U64 = _C.U32, _C.U64


def _u32s(v):
    v = [x if x.__class__ is int and 0 <= x < _U32 else
         _C.u32(x, "dependency %d" % i) for i, x in enumerate(v or ())]
    return (c_uint32 * max(1, len(v)))(*v), len(v)


def _u64s(v, what):
    v = [x if x.__class__ is int and 0 <= x < _U64 else
         _C.scalar_bits(x, "%s %d" % (what, i)) for i, x in enumerate(v or ())]
    return (c_uint64 * max(1, len(v)))(*v), len(v)


def _task(kernel, args, scalars, deps):
    """An hbg_task struct and its argument array (for the addresses that
    recording writes back)."""
    if kernel.__class__ is not int or not 0 <= kernel < _U32:
        kernel = _C.u32(kernel, "kernel")
    targs, n = _tensors(args)
    sc = []
    for i, s in enumerate(scalars or ()):
        if s.__class__ is int and 0 <= s < _U64:
            sc.append(L.Scalar_c(s, 0, 0))
        elif isinstance(s, _F["scalar_cls"]):
            what = "scalar %d" % i
            sc.append(L.Scalar_c(_C.int_bits(s.value, what),
                                 _C.u32(s.kind, what + " kind"),
                                 _C.u32(s.index, what + " index")))
        else:
            sc.append(L.Scalar_c(_C.scalar_bits(s, "scalar %d" % i), 0, 0))
    carr = (L.Scalar_c * max(1, len(sc)))(*sc)
    darr, nd = _u32s(deps)
    t = L.Task_c(kernel, n, targs, len(sc), nd, carr if sc else None,
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
    if key.__class__ is not int or not 0 <= key < _U64:
        key = _C.int_bits(key, "key")
    if n == 0:
        flat = [s if s.__class__ is int and 0 <= s < _U64 else
                _C.scalar_bits(s, "boundary scalar %d" % i)
                for i, s in enumerate(scalars or ())]
        ns = len(flat)
    else:
        rs = [list(r) for r in scalars] if scalars is not None else [[]] * n
        if len(rs) != n:
            _arg_error("tensors and scalars differ in length")
        ns = len(rs[0])
        if any(len(r) != ns for r in rs):
            _arg_error("every replay needs the same number of boundary "
                       "scalars")
        flat = [s if s.__class__ is int and 0 <= s < _U64 else
                _C.scalar_bits(s, "replay %d, boundary scalar %d" % (r, i))
                for r, row in enumerate(rs) for i, s in enumerate(row)]
        if not L.HAVE_BATCH:
            _fail(-5, "hbg_submit_graph_n", False, None)
    sarr = (c_uint64 * max(1, len(flat)))(*flat)
    varr, nv = _u64s(variant, "variant")
    darr, nd = _u32s(deps)
    with _rec_lock:
        tok = _rec_next[0]
        _rec_next[0] += 1
    ctx = {"fn": record, "exc": None}
    _rec_ctx[tok] = ctx
    g = L.GraphSubmit_c(key, varr, nv, nt // rows, tarr, sarr, ns, nd,
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


# ---- DLPack interop (hbg_buffer_import, hbg_buffer_host_ptr,
# hbg_bind_launch_on; optional: HBG_E_UNSUPPORTED where libhbg lacks one)

def bind_launch_on(b, rt, stream):
    """hbg_bind_launch_on(b, (void *)stream)."""
    if not L.HAVE_LAUNCH_ON:
        _fail(-5, "hbg_bind_launch_on", False, None)
    rc = lib.hbg_bind_launch_on(b, stream or None)
    if rc < 0:
        _fail(rc, "hbg_bind_launch_on", False, rt)


def buffer_import(rt, addr, nbytes):
    """hbg_buffer_import: the device address naming [addr, addr + nbytes)."""
    if not L.HAVE_IMPORT:
        _fail(-5, "hbg_buffer_import", False, None)
    out = c_uint64()
    rc = lib.hbg_buffer_import(rt, addr, nbytes, byref(out))
    if rc < 0:
        _fail(rc, "hbg_buffer_import", True, rt)
    return out.value


def buffer_host_ptr(rt, addr, nbytes):
    """hbg_buffer_host_ptr: the host address of a device range (sim)."""
    if not L.HAVE_HOST_PTR:
        _fail(-5, "hbg_buffer_host_ptr", False, None)
    out = c_void_p()
    rc = lib.hbg_buffer_host_ptr(rt, addr, nbytes, byref(out))
    if rc < 0:
        _fail(rc, "hbg_buffer_host_ptr", False, rt)
    return out.value or 0
