"""Runtimes, device buffers, tensors, binds, graphs and workloads."""
import array
import ctypes
import dataclasses
import enum
import itertools
import mmap
import os
import struct
import typing
import weakref
from typing import (Any, Callable, Iterable, List, Optional, Sequence,
                    Tuple, Union)
from ctypes import POINTER, byref, c_char_p, c_double, c_int, c_int64, \
    c_uint32, c_uint64, c_void_p

from . import _convert as _C
from . import _dlpack as _DL
from . import _lib as L
from ._backend import B as _B
from . import _errors
from ._errors import ArgumentError, HbgError, StateError, make_error
from ._lib import lib

try:  # numpy is optional: buffers and tensors work without it
    import numpy as _np
except ImportError:  # pragma: no cover - exercised only without numpy
    _np = None

#: What a dtype argument takes: a DType, its int value, a name ("f32",
#: "float32", ...) or a numpy dtype / type.
DTypeLike = Any
#: An access mode: an Access, its int value, or "in" / "out" / "inout".
ModeLike = Union["Access", int, str]
#: A shape: an int (one dim) or a sequence of ints, outermost first.
ShapeLike = Union[int, Sequence[int]]
#: A task scalar: an int (u64 or i64), a float (f32), or a Scalar.
ScalarLike = Union[int, float, "Scalar"]

__all__ = [
    "DType", "Access", "Kernel", "Scalar", "Tensor", "Runtime", "Buffer",
    "Bind", "Recorder", "TensorArray", "pack", "HostBuffer", "BufferView",
    "Queue", "BindStats", "DeviceStats", "TraceEvent",
    "Workload", "WorkloadInfo", "WorkloadNode", "policies", "workloads", "devices",
    "dtype_size", "f32", "image_dump", "version",
]


def version() -> str:
    """The linked library's version string (``hbg_version_string``)."""
    return lib.hbg_version_string().decode()


# ---------------------------------------------------------------- enums

class DType(enum.IntEnum):
    """Element types (``hbg_dtype``)."""
    F32 = 1
    F16 = 2
    BF16 = 3
    I32 = 4
    I64 = 5
    U8 = 6


class Access(enum.IntEnum):
    """Tensor access modes (``HBG_ACCESS_*``)."""
    IN = 1
    OUT = 2
    INOUT = 3


class Kernel(enum.IntEnum):
    """Built-in kernels (``hbg_kernel_id``): what each computes, its
    arguments in ``args`` order (outputs last) and scalars s0, s1.

    Every tensor of every kernel but NOP is f32, except the weights: GEMV's
    W, RMSNORM's w and COPY's input may be bf16 (widened exactly as read,
    then the same f32 arithmetic in the same order, so the result equals
    the f32 kernel on the widened weight, on the sim and the GPU alike).
    Tensors have 1 to 4 dims, no zero dim, strides in elements, at most
    2**26 elements. Inputs need mode IN (or
    INOUT), outputs OUT (or INOUT); inputs may broadcast (stride 0),
    outputs may not. "Flat": a tensor is read in its own row-major order,
    so two flat tensors need the same element count, not the same shape.
    An output may not overlap an input (their byte extents, holes of a
    strided view included), except that the element-wise kernels (COPY,
    ADD, MUL, SCALE, SILU_MUL, FILL) and ROPE run in place when the output
    is the identical tensor (same address, offset, dtype, shape,
    strides); a user kernel's OUT / INOUT tensors may not overlap its IN
    ones. Breaking a rule raises ArgumentError (HBG_E_KERNEL) at
    Bind.task / Recorder.task, naming the argument; ROPE's position and
    ATTN's length are checked on the device (DeviceSideError at wait).
    Results are bit-identical on any thread count, CPU or GPU.

    NOP       any tensors, any dtype, any scalars: does nothing
    COPY      [x, out]                   out = x                     (flat)
    ADD       [a, b, out]                out = a + b                 (flat)
    MUL       [a, b, out]                out = a * b                 (flat)
    SCALE     [x, out]; s0 f32 alpha     out = x * alpha             (flat)
    RMSNORM   [x, w, out]; s0 f32 eps    per row of the last dim d:
              out = x / sqrt(mean(x**2) + eps) * w; w has d elements
    GEMV      [W, x, out]; s0 f32 alpha optional
              W [n, k], x k elements, out n: out = W @ x (* alpha)
    ROPE      [x, cos, sin, out]; s0 int position p
              x [..., d] (d even), cos and sin [P, d/2] with p < P:
              rotate-half (NeoX / Qwen) on each row of x
    SILU_MUL  [a, b, out]                out = a / (1 + exp(-a)) * b (flat)
    SOFTMAX   [x, out]                   softmax over the last dim
    ATTN      [q, K, V, out]; s0 int length L (1 <= L <= T), s1 f32 scale
              optional (1/sqrt(D)): q [Hq, D], K and V [Hk, T, D], out
              q's shape; single-query attention over positions [0, L),
              head h reading K/V head h // (Hq // Hk)
    FILL      [out]; s0 f32 value        out = value

    The exact reduction orders are in include/hbg/hbg.h and in
    python/README.md ("Kernels")."""
    NOP = 0
    COPY = 1
    ADD = 2
    MUL = 3
    SCALE = 4
    RMSNORM = 5
    GEMV = 6
    ROPE = 7
    SILU_MUL = 8
    SOFTMAX = 9
    ATTN = 10
    FILL = 11


_DTYPE_NAMES = {
    "f32": DType.F32, "float32": DType.F32, "f16": DType.F16,
    "float16": DType.F16, "half": DType.F16, "bf16": DType.BF16,
    "bfloat16": DType.BF16, "i32": DType.I32, "int32": DType.I32,
    "i64": DType.I64, "int64": DType.I64, "u8": DType.U8, "uint8": DType.U8,
}
_NP_OF = {DType.F32: "float32", DType.F16: "float16", DType.I32: "int32",
          DType.I64: "int64", DType.U8: "uint8"}
# DLPack's (code, bits) of each hbg dtype (dlpack.h: kDLInt 0, kDLUInt 1,
# kDLFloat 2, kDLBfloat 4), and the numpy dtype that carries it.
_DL_OF = {DType.F32: (2, 32), DType.F16: (2, 16), DType.BF16: (4, 16),
          DType.I32: (0, 32), DType.I64: (0, 64), DType.U8: (1, 8)}
_OF_DL = {v: k for k, v in _DL_OF.items()}
_CARRIER = dict(_NP_OF)
_CARRIER[DType.BF16] = "uint16"


def _dtype(d):
    """hbg DType from a DType, an int, a name, or a numpy dtype/type."""
    if isinstance(d, DType):
        return d
    if isinstance(d, int) and not isinstance(d, bool):
        try:
            return DType(d)
        except ValueError:
            pass
    else:
        name = d if isinstance(d, str) else None
        if name is None and _np is not None:
            try:
                name = _np.dtype(d).name
            except TypeError:
                name = None
        if name is None:
            name = getattr(d, "__name__", None)
        if name is not None and name.lower() in _DTYPE_NAMES:
            return _DTYPE_NAMES[name.lower()]
    raise ArgumentError(-1, message="unsupported dtype %r (want one of "
                        "f32, f16, bf16, i32, i64, u8)" % (d,))


def _mode(m):
    if isinstance(m, str):
        try:
            return Access[m.upper()]
        except KeyError:
            raise ArgumentError(-1, message="bad access mode %r" % m) from None
    try:
        return Access(m)
    except ValueError:
        raise ArgumentError(-1, message="bad access mode %r" % (m,)) from None


def _np_dtype(dtype, who):
    """The numpy dtype of an hbg dtype (DType, int, or name such as
    "f32"), or of anything numpy.dtype() takes ("float64", np.int16, "<f8",
    ...)."""
    if _np is None:
        raise ImportError("%s needs numpy" % who)
    if isinstance(dtype, (int, DType)) or (
            isinstance(dtype, str) and dtype.lower() in _DTYPE_NAMES):
        d = _dtype(dtype)
        if d not in _NP_OF:
            raise ArgumentError(-1, message="numpy has no %s; use np.uint16"
                                % d.name)
        return _np.dtype(_NP_OF[d])
    try:
        return _np.dtype(dtype)
    except TypeError:
        raise ArgumentError(-1, message="%s: %r is not a dtype" % (
            who, dtype)) from None


def _data_dtype(data):
    """The numpy dtype of typed data (a numpy array or anything with a
    dtype numpy knows), or None for raw bytes: bytes-like objects, uint8 /
    int8 / void arrays."""
    dt = getattr(data, "dtype", None)
    if dt is None or _np is None:
        return None
    try:
        dt = _np.dtype(dt)
    except TypeError:
        return None
    return None if dt.itemsize == 1 or dt.kind == "V" else dt


def _dtype_fits(buf_dt, hbg_dt):
    """Does an hbg tensor dtype read a buffer of numpy dtype buf_dt as what
    it holds? BF16 is carried by uint16 (numpy has none) or a "bfloat16"
    dtype (ml_dtypes); U8 views bytes of anything."""
    if hbg_dt == DType.U8:
        return True
    if hbg_dt == DType.BF16:
        return buf_dt.name in ("uint16", "bfloat16")
    return _NP_OF.get(hbg_dt) == buf_dt.name


def dtype_size(d: DTypeLike) -> int:
    """Bytes per element of a dtype (``hbg_dtype_size``)."""
    return lib.hbg_dtype_size(int(_dtype(d)))


def f32(x: float) -> int:
    """The bits of float x as an f32 (what a float scalar carries); a
    finite x beyond the f32 range raises OutOfRangeError."""
    return _C.f32_bits(x, "f32")


def _native_error_at(ptr):
    code, msg = c_int64(), c_char_p()
    if lib.hbg_runtime_last_native_error(ptr, byref(code), byref(msg)) == 0:
        return (code.value, (msg.value or b"").decode(errors="replace"))
    return None


def _error_factory(code, where, message, rt_ptr):
    """The exception for a failed call of the hot-path backends: message
    is hbg_last_error()'s text (bytes, b"" when the call keeps none)."""
    msg = message.decode(errors="replace") if message else None
    native = _native_error_at(rt_ptr) if rt_ptr else None
    return make_error(code, where=where or None, native=native, message=msg)


_BUSY = -21  # HBG_E_BUSY: another thread is inside a call on the runtime


def _check(rc, where, rt=None, message=None):
    if rc < 0:
        native = None
        if rt is not None:
            native = rt._native_error()
        if rc == _BUSY:  # the library names the other thread's call
            message = lib.hbg_last_error().decode(errors="replace")
        raise make_error(rc, where=where, native=native, message=message)
    return rc


def _last_error(rc):
    """hbg_last_error()'s text after a failed call that clears it on entry
    (None on success or when it says nothing)."""
    if rc >= 0:
        return None
    return lib.hbg_last_error().decode(errors="replace") or None


def _names(fn):
    out = []
    i = 0
    while True:
        s = fn(i)
        if not s:
            return out
        out.append(s.decode())
        i += 1


def policies() -> List[str]:
    """Names of the upload policies this library has, in index order
    (``hbg_policy_name(i)`` for i = 0 until it returns NULL)."""
    return _names(lib.hbg_policy_name)


def workloads() -> List[str]:
    """Names of the built-in workloads (``hbg_workload_name``)."""
    return [lib.hbg_workload_name(i).decode()
            for i in range(lib.hbg_workload_count())]


def devices() -> List[Tuple[str, str]]:
    """``[(name, summary)]`` of the built-in device backends."""
    out = []
    for i in range(lib.hbg_device_count()):
        ops = lib.hbg_device_backend(i)
        if ops:
            out.append((ops.contents.name.decode(),
                        (ops.contents.summary or b"").decode()))
    return out


def image_dump(image: Any, json: bool = False) -> str:
    """Validate a Definition / Submission / window image (bytes-like) and
    return its readable form (``hbg_image_dump``). Raises ImageError, with
    the text printed so far as ``.text``, when validation fails."""
    data = bytes(image)
    libc = L.libc()
    libc.open_memstream.restype = c_void_p
    libc.open_memstream.argtypes = [POINTER(c_void_p), POINTER(ctypes.c_size_t)]
    libc.fclose.argtypes = [c_void_p]
    libc.free.argtypes = [c_void_p]
    ptr, size = c_void_p(), ctypes.c_size_t()
    f = libc.open_memstream(byref(ptr), byref(size))
    if not f:
        raise make_error(-2, where="open_memstream")
    rc = lib.hbg_image_dump(data, len(data), 1 if json else 0, f)
    libc.fclose(f)
    text = ctypes.string_at(ptr, size.value).decode(errors="replace")
    libc.free(ptr)
    if rc < 0:
        e = make_error(rc, where="hbg_image_dump")
        e.text = text
        raise e
    return text


# ---------------------------------------------------------------- tensors

class Scalar:
    """A scalar argument of a task: ``Scalar.static(v)`` is baked into the
    Definition, ``Scalar.boundary(i)`` names boundary scalar i of the graph.

    Every scalar travels as a u64 (``hbg_scalar``): an int as itself (0 ..
    2**64-1, or a negative int down to -2**63 as its i64 two's complement),
    a float (or numpy.float32 and the like) as the bits of the nearest f32.
    Plain ints and floats passed as task scalars are static scalars; graph
    boundary scalars (``Bind.graph(..., scalars=)``) follow the same rule.
    A value out of range raises OutOfRangeError (also an OverflowError),
    any other type TypeError; nothing is truncated.
    ``value`` holds the u64 bits."""
    __slots__ = ("value", "kind", "index")

    def __init__(self, value: Union[int, float] = 0, kind: int = 0,
                 index: int = 0) -> None:
        self.value = _C.scalar_bits(value, "Scalar value")
        self.kind = _C.u32(kind, "Scalar kind")
        self.index = _C.u32(index, "Scalar index")

    @classmethod
    def static(cls, value: Union[int, float]) -> "Scalar":
        """A static scalar (baked into a recorded Definition)."""
        return cls(value, 0, 0)

    @classmethod
    def boundary(cls, index: int) -> "Scalar":
        """Boundary scalar `index` of the graph being recorded."""
        return cls(0, 1, index)

    def __repr__(self) -> str:
        if self.kind:
            return "Scalar.boundary(%d)" % self.index
        return "Scalar.static(%d)" % self.value


class Tensor(_B.TensorBase):
    """A tensor argument: a view into a device buffer (``hbg_tensor``).

    Make one with ``Buffer.tensor(shape, dtype)``, ``Tensor(addr, shape,
    dtype)``, or ``Tensor.internal(shape, dtype)`` for a graph-internal
    output (placed in the graph's heap by ``Recorder.task``, which then
    fills in ``addr``). ``shape`` is outermost first; strides (elements)
    default to contiguous row-major."""
    __slots__ = ()

    def __init__(self, addr: int, shape: ShapeLike,
                 dtype: DTypeLike = DType.F32, mode: ModeLike = Access.IN,
                 offset: int = 0,
                 strides: Optional[Sequence[int]] = None) -> None:
        d = dtype if dtype.__class__ is DType else _dtype(dtype)
        m = mode if mode.__class__ is Access else _mode(mode)
        if strides is not None:
            strides = tuple(strides)
        rc = self._set(_C.int_index(addr, "tensor addr"),
                       _C.int_index(offset, "tensor offset"), d, m, shape,
                       strides)
        if rc < 0:
            if rc == -2:
                raise ArgumentError(-1, message="strides %r: one per dim of "
                                    "shape %r, each 0 .. 2**32-1" % (
                                        strides, shape))
            raise ArgumentError(-1, message="bad tensor shape %r "
                                "(1..%d positive dims)" % (shape, L.MAX_DIMS))

    @classmethod
    def internal(cls, shape: ShapeLike,
                 dtype: DTypeLike = DType.F32) -> "Tensor":
        """An output placed in the graph's internal heap (addr 0)."""
        return cls(0, shape, dtype, Access.OUT)

    @classmethod
    def _from_c(cls, c):
        t = cls.__new__(cls)
        t._set(c.addr, c.offset, c.dtype, c.mode, tuple(c.shape[:c.ndim]),
               tuple(c.strides[:c.ndim]))
        return t

    def with_mode(self, mode: ModeLike) -> "Tensor":
        """A copy of this tensor with another access mode."""
        t = self._copy()
        t._mode = int(_mode(mode))
        return t

    @property
    def addr(self) -> int:
        """Device address of the buffer (0 for a new internal output)."""
        return self._addr

    @property
    def offset(self) -> int:
        """Bytes from addr to element 0."""
        return self._offset

    @property
    def dtype(self) -> DType:
        return DType(self._dtype)

    @property
    def mode(self) -> Access:
        return Access(self._mode)

    @property
    def shape(self) -> Tuple[int, ...]:
        """Dims, outermost first."""
        return self._shape

    @property
    def strides(self) -> Tuple[int, ...]:
        """Strides in elements, one per dim."""
        return self._strides

    @property
    def extent(self) -> int:
        """Bytes from element 0 to one past the last (``hbg_tensor_extent``)."""
        return self._extent

    def __repr__(self):
        return "Tensor(addr=%#x, shape=%r, dtype=%s, mode=%s, offset=%d)" % (
            self.addr, self.shape, self.dtype.name, self.mode.name,
            self.offset)


class TensorArray:
    """Boundary tensors packed once into a C array, for graph submissions
    that reuse them every step (a decode loop's buffers do not move):
    ``pack([t0, t1, ...])`` for one replay, ``pack([[...], [...]])`` for
    the rows of ``Bind.graphs``. Saves rebuilding the array per call."""
    __slots__ = ("_arr", "n", "rows", "width")

    def __init__(self, tensors: Sequence[Any]) -> None:
        tensors = list(tensors)
        if tensors and not isinstance(tensors[0], Tensor):
            width = len(tensors[0])
            if any(len(r) != width for r in tensors):
                raise ArgumentError(-1, message="every replay needs the "
                                    "same number of boundary tensors")
            self.rows, self.width = len(tensors), width
            tensors = [t for r in tensors for t in r]
        else:
            self.rows, self.width = 1, len(tensors)
        self.n = len(tensors)
        self._arr = _B.pack(tensors)

    def __len__(self) -> int:
        return self.rows

    def tensors(self) -> List["Tensor"]:
        """The packed tensors, flat (row after row), as Tensors."""
        arr = self._arr
        if isinstance(arr, (bytes, bytearray)):
            size = ctypes.sizeof(L.Tensor_c)
            cs = [L.Tensor_c.from_buffer_copy(arr, i * size)
                  for i in range(len(arr) // size)]
        else:
            cs = list(arr)
        return [Tensor._from_c(c) for c in cs[:self.n]]


def pack(tensors: Sequence[Any]) -> "TensorArray":
    """A TensorArray of tensors (a list, or a list of equal-length rows)."""
    return TensorArray(tensors)


# ---------------------------------------------------------------- stats

@dataclasses.dataclass(frozen=True)
class BindStats:
    """Per-bind records (``hbg_bind_stats``); times in nanoseconds."""
    policy: str
    host_orch_ns: int
    graph_upload_ns: int
    window_upload_ns: int
    control_plane_ns: int
    exec_ns: int
    graph_bytes: int
    graph_copies: int
    window_bytes: int
    window_copies: int
    def_bytes: int
    h2d_bytes: int
    h2d_copies: int
    n_tasks: int
    n_graphs: int
    n_recorded: int
    leftover: int
    fallback: int
    dev_allocs: int
    arena_high_water: int
    fatal: int
    device_status: int
    n_evicted: int
    device_ns: int  # device time by device events; 0 where not kept

    @classmethod
    def _from_c(cls, s):
        return cls(
            lib.hbg_policy_name(s.policy).decode(), s.host_orch_ns,
            s.graph_upload_ns, s.window_upload_ns, s.control_plane_ns,
            s.exec_ns, s.graph.bytes, s.graph.copies, s.window.bytes,
            s.window.copies, s.def_bytes, s.h2d_bytes, s.h2d_copies,
            s.n_tasks, s.n_graphs, s.n_recorded, s.leftover, s.fallback,
            s.dev_allocs, s.arena_high_water, s.fatal, s.device_status,
            s.n_evicted, s.device_ns)


@dataclasses.dataclass(frozen=True)
class DeviceStats:
    """Counters of the runtime's device since it was opened
    (``hbg_dev_stats``); ``mem_in_use`` is device bytes allocated now."""
    h2d_copies: int
    h2d_bytes: int
    d2h_copies: int
    d2h_bytes: int
    async_copies: int
    async_degraded: int
    pinned_direct: int
    bounce_chunks: int
    handshakes: int
    mem_allocs: int
    mem_frees: int
    mem_in_use: int
    host_allocs: int
    host_frees: int
    host_in_use: int
    launches: int


@dataclasses.dataclass(frozen=True)
class TraceEvent:
    """One trace event (``hbg_trace_event``); track is HBG_TRACK_*:
    0 orchestration, 1 host uploads, 2 copy engine, 3 device execution."""
    track: int
    name: str
    start_ns: int
    dur_ns: int
    bytes: int
    bind_seq: int


@dataclasses.dataclass(frozen=True)
class WorkloadInfo:
    """Shape of a built-in workload (``hbg_workload_info``)."""
    layers: int
    n_defs: int
    min_nodes: int
    max_nodes: int
    max_btensors: int
    max_bscalars: int
    tasks_before: int
    tasks_after: int
    device_bytes: int
    node_heap_bytes: int
    weight_bytes: int = 0
    kv_bytes: int = 0
    hidden: int = 0
    vocab: int = 0


@dataclasses.dataclass(frozen=True)
class WorkloadNode:
    """One kernel call of a step (``hbg_workload_node``): kernel, the
    bind's task index it belongs to, its tensors (absolute addresses) and
    its scalars (raw u64 bits, resolved)."""
    kernel: int
    task: int
    tensors: tuple
    scalars: tuple


# ---------------------------------------------------------------- runtime

class _Handle:
    """The C runtime pointer, shared by a Runtime and its children, so a
    finalizer can tell whether the runtime is still open."""
    __slots__ = ("ptr", "children", "tracing", "deferred", "readonly",
                 "queues", "kind", "last_launched", "imports",
                 "__weakref__")

    def __init__(self):
        self.ptr = None
        self.children = weakref.WeakSet()
        self.tracing = False  # a Python trace callback may need the GIL
        # (addr, DLPack owner or None) a finalizer could not free
        self.deferred = []
        self.readonly = {}  # token -> (addr, nbytes, name): read-only imports
        self.queues = {}  # handle -> weakref of a live Queue
        self.kind = None  # the device's name ("sim", "cuda"), once asked
        self.last_launched = None  # weakref of the last launched Bind
        self.imports = {}  # addr -> (host addr, nbytes, weakref): imports


def _destroy_runtime(h):
    if h.ptr is None:
        return
    # binds end first (they may use the others' memory), then workloads
    for c in sorted(h.children, key=lambda c: c._order):
        c._release()
    _flush_frees(h)
    ptr, h.ptr = h.ptr, None
    lib.hbg_runtime_destroy(ptr)
    # imports a busy runtime kept: forgotten with it, so released now
    left, h.deferred = h.deferred, []
    for _addr, owner in left:
        if owner is not None:
            owner.release()


def _free_buffer(h, addr, owner=None, child=False, ro=None):
    # A finalizer runs on whichever thread collects the Buffer; when
    # another thread is inside a call on the runtime (HBG_E_BUSY), the
    # free waits in the handle for the runtime's next alloc, bind or close.
    # owner: a DLPack import's producer (its deleter runs once hbg has
    # forgotten the memory); child: an import inside another one (no C
    # import of its own); ro: its token in h.readonly.
    if ro is not None:
        h.readonly.pop(ro, None)
    if child:
        if owner is not None:
            owner.release()
        return
    h.imports.pop(addr, None)
    if h.ptr is not None and addr:
        if lib.hbg_buffer_free(h.ptr, addr) == _BUSY:
            h.deferred.append((addr, owner))
            return
    if owner is not None:
        owner.release()


def _flush_frees(h):
    """Free what finalizers could not (the runtime was busy then)."""
    while h.deferred and h.ptr is not None:
        addr, owner = h.deferred.pop()
        if lib.hbg_buffer_free(h.ptr, addr) == _BUSY:
            h.deferred.append((addr, owner))
            return
        if owner is not None:
            owner.release()


@dataclasses.dataclass
class UserKernel:
    """A user kernel for ``Runtime.register_kernels`` (``hbg_kernel_impl``;
    the contract is hbg_kernel.h's lane model, docs/USER_KERNELS.md).

    ``id`` (>= 0x1000); ``phases`` per call, or per row of tensor
    ``rows_of`` (an index, None: per call); ``scratch_floats`` shared by a
    call's lanes. For the sim, the host build: ``host_library`` (a shared
    object built by cc from the kernel's source) and the function's name
    ``symbol``. For cuda (exec=device), the device code: ``image`` (bytes
    of PTX, a cubin or a fatbin built with nvcc -rdc=true) defining
    ``symbol``. Give both to register the same kernel anywhere."""
    id: int
    symbol: str
    phases: int = 1
    rows_of: typing.Optional[int] = None
    scratch_floats: int = 0
    image: typing.Optional[bytes] = None
    host_library: typing.Optional[str] = None


class Runtime:
    """An hbg runtime: one device, a policy, pipeline slots.

    ``Runtime(policy="coalesced", device="sim", device_options="workers=2",
    arena_bytes=0, pipeline_depth=0, coalesce_chunk_bytes=0, orch_id=0,
    graph_cache_max=0, poison_staging=False, no_launch=False, deps=None,
    record=None)``: ``deps`` is "explicit" or "inferred" (hbg_config.deps:
    whether a bind's entries also wait for the earlier ones whose bytes
    they overlap), ``record`` "once" or "per-bind" (hbg_config.record).
    None or 0 keeps the library's
    default (and its ``HBG_*`` environment overrides). Use it as a context
    manager, or call ``close()``; a runtime dropped without either is closed
    when collected. Buffers, binds and workloads keep their runtime alive.
    Like the C runtime it is used from one thread at a time, and the
    library checks it: a call made while another thread is inside one on
    the same runtime raises StateError (HBG_E_BUSY) naming that call and
    changes nothing.
    """

    def __init__(self, policy: Union[str, int, None] = None,
                 device: Optional[str] = None,
                 device_options: Optional[str] = None, arena_bytes: int = 0,
                 pipeline_depth: int = 0, coalesce_chunk_bytes: int = 0,
                 orch_id: int = 0, graph_cache_max: int = 0,
                 poison_staging: bool = False, no_launch: bool = False,
                 deps: Optional[str] = None,
                 record: Optional[str] = None) -> None:
        cfg = L.out_struct(L.Config_c)
        lib.hbg_config_init(ctypes.addressof(cfg))
        if policy is not None:
            cfg.policy = _policy_index(policy)
        if deps is not None:
            cfg.deps = _named(lib.hbg_deps_parse, "deps", deps)
        if record is not None:
            cfg.record = _named(lib.hbg_record_parse, "record", record)
        self._strs = []
        self._libs = []  # host builds of registered user kernels
        if device is not None:
            cfg.device = self._keep(device)
        if device_options is not None:
            cfg.device_options = self._keep(device_options)
        self._device_options = device_options
        if arena_bytes:
            cfg.arena_bytes = int(arena_bytes)
        if pipeline_depth:
            cfg.pipeline_depth = int(pipeline_depth)
        if coalesce_chunk_bytes:
            cfg.coalesce_chunk_bytes = int(coalesce_chunk_bytes)
        if orch_id:
            cfg.orch_id = int(orch_id)
        if graph_cache_max:
            cfg.graph_cache_max = int(graph_cache_max)
        cfg.flags |= (1 if poison_staging else 0) | (2 if no_launch else 0)
        self._h = _Handle()
        ptr = c_void_p()
        rc = lib.hbg_runtime_create(ctypes.addressof(cfg), byref(ptr))
        if rc < 0:
            msg = lib.hbg_device_open_error()
            native = (None, msg.decode()) if msg else None
            raise make_error(rc, where="hbg_runtime_create", native=native)
        self._h.ptr = ptr.value
        self._trace_fn = None
        self._finalizer = weakref.finalize(self, _destroy_runtime, self._h)

    def _keep(self, s):
        b = s.encode() if isinstance(s, str) else bytes(s)
        self._strs.append(b)
        return b

    def _ptr(self):
        p = self._h.ptr
        if p is None:
            raise StateError(-7, message="runtime is closed")
        return p

    def _native_error(self):
        if self._h.ptr is None:
            return None
        return _native_error_at(self._h.ptr)

    # -- lifetime
    def close(self) -> None:
        """End open binds, destroy workloads, free buffers, then destroy
        the runtime (waits for binds in flight). Idempotent."""
        self._finalizer()

    @property
    def closed(self) -> bool:
        return self._h.ptr is None

    def __enter__(self) -> "Runtime":
        self._ptr()
        return self

    def __exit__(self, *exc: Any) -> bool:
        self.close()
        return False

    def __repr__(self) -> str:
        if self.closed:
            return "<hbg.Runtime closed>"
        return "<hbg.Runtime policy=%s>" % self.policy

    # -- properties
    @property
    def policy(self) -> str:
        """The runtime's policy name."""
        return lib.hbg_policy_name(lib.hbg_runtime_policy(self._ptr())).decode()

    @property
    def native_error(self) -> Optional[Tuple[int, str]]:
        """``(code, message)`` of the device's last native error, or None."""
        self._ptr()
        return self._native_error()

    def device_stats(self) -> "DeviceStats":
        """DeviceStats of the runtime's device (``hbg_dev_stats_get``)."""
        dev = lib.hbg_runtime_device(self._ptr())
        st = L.out_struct(L.DevStats_c)
        st.struct_size = ctypes.sizeof(L.DevStats_c)
        _check(lib.hbg_dev_stats_get(dev, ctypes.addressof(st)),
               "hbg_dev_stats_get", self)
        return DeviceStats(*[getattr(st, f.name)
                             for f in dataclasses.fields(DeviceStats)])

    def register_kernels(self, kernels: Iterable["UserKernel"]) -> None:
        """Register UserKernels on the runtime's device
        (``hbg_kernel_register``), all or none: the sim runs each
        host_library's function, cuda links the images with its executor.
        Raises ArgumentError (a bad field, bytes that are not device code),
        HbgError (HBG_E_BUSY: an id taken; HBG_E_NOTFOUND: the image lacks
        the symbol; HBG_E_KERNEL: the linker refused it, its log in the
        message; HBG_E_UNSUPPORTED: a device that runs no user code)."""
        if not L.HAVE_KERNEL_REGISTER:
            raise HbgError(-5, where="register_kernels",
                           message="libhbg has no hbg_kernel_register")
        kernels = list(kernels)
        arr = (L.KernelImpl_c * len(kernels))()
        keep = []
        for i, k in enumerate(kernels):
            c = arr[i]
            c.struct_size = ctypes.sizeof(L.KernelImpl_c)
            c.kernel = int(k.id)
            c.phases = int(k.phases)
            c.rows_of = 0 if k.rows_of is None else int(k.rows_of) + 1
            c.scratch_floats = int(k.scratch_floats)
            c.symbol = self._keep(k.symbol) if k.symbol else None
            if k.image is not None:
                img = ctypes.create_string_buffer(bytes(k.image),
                                                  len(k.image))
                keep.append(img)
                c.image = ctypes.addressof(img)
                c.image_size = len(k.image)
            if k.host_library is not None:
                so = ctypes.CDLL(k.host_library)
                fn = getattr(so, k.symbol)
                self._libs.append(so)  # the sim calls it until close
                c.fn = ctypes.cast(fn, c_void_p).value
        dev = lib.hbg_runtime_device(self._ptr())
        rc = lib.hbg_kernel_register(dev, arr, len(kernels))
        if rc < 0:
            raise make_error(rc, where="hbg_kernel_register",
                             message=lib.hbg_last_error().decode())
        del keep  # hbg copied the images

    # -- buffers
    def alloc(self, nbytes: int, dtype: Any = None) -> "Buffer":
        """A new device Buffer of nbytes (contents undefined). ``dtype``
        (an hbg or numpy dtype) makes it a typed buffer from the start:
        see Buffer.dtype."""
        return Buffer(self, nbytes, dtype)

    def host_buffer(self, nbytes: int) -> "HostBuffer":
        """A HostBuffer of nbytes: host memory that numpy views in place
        and the device copies from / to directly where it can."""
        return HostBuffer(self, nbytes)

    def buffer(self, data: Any, dtype: Any = None) -> "Buffer":
        """A new device Buffer holding a copy of data (numpy array, bytes,
        or any object with the buffer protocol). The buffer takes the
        array's dtype (Buffer.dtype); with ``dtype`` given, a numpy array
        is converted to it first (``astype``) and the buffer has it."""
        if dtype is not None:
            dt = _np_dtype(dtype, "hbg.Runtime.buffer")
            ddt = _data_dtype(data)  # (numpy: dtype(None) == float64)
            if ddt is not None and ddt != dt:
                data = _np.ascontiguousarray(data).astype(dt)
        else:
            dt = _data_dtype(data)
        mv = memoryview(data)
        if not mv.c_contiguous:
            raise ArgumentError(-1, message="data must be C-contiguous")
        mv = mv.cast("B")
        b = Buffer(self, max(1, mv.nbytes), dt)
        if mv.nbytes:
            b.write(mv)
        return b

    # -- DLPack interop
    def _device_kind(self):
        h = self._h
        if h.kind is None:
            name = lib.hbg_device_name(lib.hbg_runtime_device(self._ptr()))
            h.kind = (name or b"").decode()
        return h.kind

    def _cuda_ordinal(self):
        import os
        import re
        opts = self._device_options
        if opts is None:
            opts = os.environ.get("HBG_DEVICE_OPTIONS", "")
        m = re.search(r"(?:^|[,\s])device=(\d+)", opts or "")
        return int(m.group(1)) if m else 0

    def _dl_device(self):
        """(DLDeviceType, id) of this runtime's memory, or None."""
        kind = self._device_kind()
        if kind == "sim":
            return (_DL.kDLCPU, 0)
        if kind == "cuda":
            return (_DL.kDLCUDA, self._cuda_ordinal())
        return None

    def _wait_last_launched(self):
        """Wait (host) for the last bind launched on the runtime, if it is
        still open and not waited: what a CUDA consumer's stream needs
        before it reads a DLPack export (no device-side wait exists)."""
        ref = self._h.last_launched
        b = ref() if ref is not None else None
        if b is not None and b._state == _LAUNCHED:
            b.wait()

    def forget_stream(self, stream: Any) -> None:
        """Forget a stream ``Bind.launch(stream=)`` used (waiting for the
        binds launched on it; ``hbg_runtime_stream_forget``) before its
        owner destroys it: a torch.cuda.Stream, say. A Queue does this
        itself when closed. HBG_E_NOTFOUND: never launched on."""
        if not L.HAVE_STREAM_FORGET:
            raise HbgError(-5, where="hbg_runtime_stream_forget",
                           message="libhbg has no hbg_runtime_stream_forget")
        handle = self._stream_handle(stream)
        _check(lib.hbg_runtime_stream_forget(self._ptr(), handle),
               "hbg_runtime_stream_forget", self)

    def queue(self) -> "Queue":
        """A new device queue (``hbg_dev_queue_create``) to launch binds on
        (``Bind.launch(stream=q)``): on the sim the only kind of stream a
        bind takes. A context manager; destroyed by ``close()``, when
        collected, or with the runtime."""
        return Queue(self)

    def _stream_handle(self, stream, what="stream"):
        """The void * a stream argument names for hbg_bind_launch_on: an
        hbg Queue of this runtime (any device); on cuda also a CUstream
        (see hbg._dlpack.cuda_stream_of: an int, __cuda_stream__,
        .cuda_stream); on the sim an int only as the handle of a live
        Queue of this runtime."""
        h = self._h
        if stream.__class__ is Queue:
            if stream.runtime is not self:
                raise ArgumentError(-1, message="%s: the Queue belongs to "
                                    "another runtime" % what)
            if stream.closed:
                raise StateError(-7, message="%s: the Queue is closed" % what)
            return stream.handle
        kind = self._device_kind()
        if kind == "cuda":
            # hbg_bind_launch_on takes no NULL: the NULL stream is the
            # legacy default stream, CU_STREAM_LEGACY
            return _DL.cuda_stream_of(stream, what) or 1
        if isinstance(stream, int) and not isinstance(stream, bool):
            ref = h.queues.get(stream)
            if ref is not None and ref() is not None:
                return stream
            raise ArgumentError(-1, message="%s: %d names no live Queue of "
                                "this runtime; on the %s device a stream is "
                                "an hbg.Queue (rt.queue())" % (
                                    what, stream, kind))
        if (getattr(type(stream), "__cuda_stream__", None) is not None or
                getattr(stream, "cuda_stream", None) is not None):
            raise ArgumentError(-1, message="%s: a CUDA stream (%s) cannot "
                                "run binds of the %s device; use an "
                                "hbg.Queue (rt.queue())" % (
                                    what, type(stream).__name__, kind))
        raise TypeError("%s: %s is not a stream (want an hbg.Queue from "
                        "rt.queue(); on cuda also an int CUstream or an "
                        "object with __cuda_stream__() or .cuda_stream)" % (
                            what, type(stream).__name__))

    def from_dlpack(self, x: Any, *, stream: Any = None) -> "Buffer":
        """Import a tensor zero-copy as a Buffer: a torch tensor, a numpy
        array, anything with ``__dlpack__`` / ``__dlpack_device__``, or a
        raw "dltensor" capsule (consumed: renamed "used_dltensor").

        The sim takes kDLCPU memory, cuda kDLCUDA memory of its own GPU
        (anything else raises ArgumentError naming the device). On cuda
        ``x.__dlpack__(stream=S)`` is called with S the stream hbg will use
        (``stream``: a Queue, an int CUstream, ``__cuda_stream__`` or
        ``.cuda_stream``; None or the NULL stream: 1, the legacy default
        stream); on the sim ``x.__dlpack__()`` with no stream.

        The Buffer covers the tensor's extent (from element 0, byte_offset
        included, to one past its last element: a strided tensor's holes
        too) and knows its ``dtype`` (f32, f16, bf16 (carried as uint16),
        i32, i64, u8; others raise ArgumentError), ``shape`` and
        ``strides``; ``tensor()`` views the whole tensor. Negative strides
        are refused (ArgumentError: pass a contiguous copy). A zero-size
        tensor gives a Buffer of 0 bytes that no task can use.

        A read-only numpy array (``writeable`` False, which numpy will not
        export through DLPack) is imported through
        ``__array_interface__``, for reading only: a task that names it as
        an output, ``write()``, and ``tensor(mode="out")`` raise
        ArgumentError naming it, before any C call.

        The producer's memory stays alive until the Buffer is released
        (``free()``, the runtime's ``close()``, or garbage collection):
        hbg forgets the import (``hbg_buffer_free``), then calls the
        DLManagedTensor's deleter, exactly once. Writes through the Buffer
        are writes to the producer's memory."""
        p = self._ptr()
        want = self._dl_device()
        if want is None:
            raise ArgumentError(-5, message="from_dlpack: the %s device "
                                "takes no DLPack memory (the sim takes "
                                "kDLCPU, cuda kDLCUDA)" % self._device_kind())
        name = _describe(x)
        handle = None
        if stream is not None:
            handle = self._stream_handle(stream)
        if _DL.is_capsule(x):
            m = _DL.consume(x)
        else:
            dlp = getattr(x, "__dlpack__", None)
            if dlp is None:
                raise TypeError("from_dlpack: %s has no __dlpack__ (want a "
                                "torch tensor, a numpy array, a DLPack "
                                "producer or a \"dltensor\" capsule)" %
                                type(x).__name__)
            devf = getattr(x, "__dlpack_device__", None)
            if devf is not None:
                dev = tuple(devf())
                _check_dl_device(dev, want, name, self._device_kind())
            try:
                if want[0] == _DL.kDLCUDA:
                    cap = dlp(stream=_DL.dlpack_stream_arg(handle))
                else:
                    cap = dlp()
            except BufferError:
                ai = getattr(x, "__array_interface__", None)
                if want[0] != _DL.kDLCPU or not isinstance(ai, dict) or \
                        not ai.get("data", (0, False))[1]:
                    raise
                return self._import_readonly(p, x, ai, name)
            m = _DL.consume(cap)
        try:
            _check_dl_device(m.device, want, name, self._device_kind())
            return self._import_managed(p, m, name, False)
        except BaseException:
            m.release()
            raise

    def _import_managed(self, p, m, name, readonly):
        if m.lanes != 1 or (m.code, m.bits) not in _OF_DL:
            raise ArgumentError(-1, message="from_dlpack: %s has dtype "
                                "%s%d%s, which hbg does not hold (f32, f16, "
                                "bf16, i32, i64, u8)" % (
                                    name, _DL._CODE_NAMES.get(m.code, "code%d"
                                                              % m.code),
                                    m.bits, "x%d" % m.lanes if m.lanes != 1
                                    else ""))
        d = _OF_DL[(m.code, m.bits)]
        shape, strides = _import_layout(m.shape, m.strides, name)
        nbytes = _DL.extent(shape, strides, dtype_size(d))
        addr, parent = self._import_range(p, m.data, nbytes)
        return Buffer._imported(self, addr, nbytes, d, shape, strides, m,
                                readonly, name, m.data, parent)

    def _import_range(self, p, host, nbytes):
        """(device address, parent Buffer or None) of host memory: inside
        a live import of the runtime (a view of a tensor imported already),
        that import's address (the library refuses overlapping imports);
        else a new import."""
        if not nbytes:
            return 0, None
        for addr, (base, n, ref) in list(self._h.imports.items()):
            parent = ref()
            if parent is not None and base <= host and \
                    host + nbytes <= base + n:
                return addr + (host - base), parent
        return _B.buffer_import(p, host, nbytes), None

    def _import_readonly(self, p, x, ai, name):
        if _np is None:  # pragma: no cover - __array_interface__ is numpy's
            raise ImportError("from_dlpack of a read-only array needs numpy")
        dt = _np.dtype(ai["typestr"])
        d = None
        for k, v in _NP_OF.items():
            if dt == _np.dtype(v):
                d = k
        if d is None:
            raise ArgumentError(-1, message="from_dlpack: %s has dtype %s, "
                                "which hbg does not hold (f32, f16, bf16, "
                                "i32, i64, u8)" % (name, dt))
        shape = tuple(ai["shape"])
        bstrides = ai.get("strides")
        strides = None
        if bstrides is not None:
            if any(b % dt.itemsize for b in bstrides):
                raise ArgumentError(-1, message="from_dlpack: %s has byte "
                                    "strides %r, not whole elements" % (
                                        name, tuple(bstrides)))
            strides = tuple(b // dt.itemsize for b in bstrides)
        keep = _KeepAlive(x)
        shape, strides = _import_layout(shape, strides, name)
        nbytes = _DL.extent(shape, strides, dt.itemsize)
        addr, parent = self._import_range(p, ai["data"][0], nbytes)
        return Buffer._imported(self, addr, nbytes, d, shape, strides, keep,
                                True, name, ai["data"][0], parent)

    # -- binds
    def bind(self) -> "Bind":
        """Begin a bind (``hbg_bind_begin``) and return it. As a context
        manager it launches, waits and ends on a normal exit, and ends
        (rolling back or abandoning) on an exception."""
        _flush_frees(self._h)
        return Bind(self)

    # -- workloads
    def workload(self, name: Optional[str] = None, layers: int = 0,
                 seed: int = 0, def_size: int = 0, *,
                 model: Optional[str] = None, weights: Any = None,
                 kv_len: int = 0) -> "Workload":
        """Create a built-in workload (its buffers) on this runtime.
        ``name`` defaults to "qwen3-14b", or to "qwen3" with a ``model``
        (a Hugging Face Qwen3 checkpoint folder, or a config.json alone for
        random weights at its dims). ``def_size`` pads every Definition to
        at least that many bytes (0 = natural size). The Qwen3 workloads at
        real dims take ``weights`` ("bf16", the default, or "f32") and
        ``kv_len`` (KV-cache positions, 0 = 512)."""
        return Workload(self, name, layers, seed, def_size, model=model,
                        weights=weights, kv_len=kv_len)

    # -- tracing
    def set_trace(self, fn: Optional[Callable[["TraceEvent"], Any]]) -> None:
        """Install fn(TraceEvent) as trace callback, or remove with None.
        It runs on the library's threads (device copy/execution too), so
        keep it quick; exceptions in it are printed, not raised."""
        p = self._ptr()
        if fn is None:
            _check(lib.hbg_runtime_set_trace(p, L.TRACE_FN(), None),
                   "hbg_runtime_set_trace", self)
            self._trace_fn = None
            self._h.tracing = False
            return

        def cb(_user, ev):
            e = ev.contents
            fn(TraceEvent(e.track, (e.name or b"").decode(), e.start_ns,
                          e.dur_ns, e.bytes, e.bind_seq))
        cfn = L.TRACE_FN(cb)
        _check(lib.hbg_runtime_set_trace(p, cfn, None),
               "hbg_runtime_set_trace", self)
        self._trace_fn = cfn
        self._h.tracing = True


class _KeepAlive:
    """The owner of a read-only import: a reference to the array."""
    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def release(self):
        self.obj = None


def _describe(x):
    """A short name of an imported object for messages: "numpy.ndarray
    float32 (4, 4)", "torch.Tensor torch.float32 (8,)"."""
    t = type(x)
    mod = t.__module__.split(".")[0]
    n = "%s.%s" % (mod, t.__name__) if mod != "builtins" else t.__name__
    if _DL.is_capsule(x):
        return "a DLPack capsule"
    dt, sh = getattr(x, "dtype", None), getattr(x, "shape", None)
    if dt is not None and sh is not None:
        try:
            return "%s %s %s" % (n, dt, tuple(sh))
        except TypeError:  # pragma: no cover
            pass
    return n


def _check_dl_device(dev, want, name, kind):
    if dev[0] != want[0] or (want[0] == _DL.kDLCUDA and dev[1] != want[1]):
        raise ArgumentError(-1, message="from_dlpack: %s lives on %s device "
                            "%d; this runtime's %s device takes %s device %d"
                            " memory%s" % (
                                name, _DL.device_name(dev[0]), dev[1], kind,
                                _DL.device_name(want[0]), want[1],
                                " (copy it there first, e.g. x.cpu() / "
                                "x.cuda())" if dev[0] != want[0] else ""))


def _import_layout(shape, strides, name):
    """shape and strides (elements, None: compact) of an import, checked:
    no negative dim or stride (a dim of 1 takes the compact stride)."""
    shape = tuple(int(d) for d in shape)
    if any(d < 0 for d in shape):
        raise ArgumentError(-1, message="from_dlpack: %s has shape %r" % (
            name, shape))
    if strides is None:
        return shape, None
    strides = list(int(s) for s in strides)
    acc = 1
    for i in range(len(shape) - 1, -1, -1):
        if shape[i] == 1:
            strides[i] = acc
        acc *= max(1, shape[i])
    if any(s < 0 for s in strides):
        raise ArgumentError(-1, message="from_dlpack: %s has strides %r: "
                            "negative strides are not supported (hbg "
                            "tensors have none); import a contiguous copy "
                            "(x.contiguous(), numpy.ascontiguousarray(x))" %
                            (name, tuple(strides)))
    if strides == _compact(shape):
        return shape, None
    return shape, tuple(strides)


def _compact(shape):
    out, acc = [0] * len(shape), 1
    for i in range(len(shape) - 1, -1, -1):
        out[i] = acc
        acc *= max(1, shape[i])
    return out


def _named(parse, what, name):
    out = c_int()
    rc = parse(str(name).encode(), byref(out))
    if rc < 0:
        raise ArgumentError(rc, message="unknown %s %r" % (what, name))
    return out.value


def _policy_index(policy):
    if isinstance(policy, int) and not isinstance(policy, bool):
        if lib.hbg_policy_name(policy):
            return policy
        raise ArgumentError(-1, message="unknown policy %d" % policy)
    out = c_int()
    rc = lib.hbg_policy_parse(str(policy).encode(), byref(out))
    if rc < 0:
        raise ArgumentError(rc, message="unknown policy %r (have: %s)" % (
            policy, ", ".join(policies())))
    return out.value


class Buffer:
    """Device memory from ``hbg_buffer_alloc``; freed by ``free()`` or
    when collected. Keeps its runtime alive.

    A buffer remembers the dtype of what it holds (``dtype``), so that
    bytes written as one type are not read by a task as another (a
    float64 array read as f32 gives wrong numbers, silently). It is set by
    ``Runtime.alloc(n, dtype=)``, ``Runtime.buffer(array)``, the first
    typed ``write()`` or the first ``tensor()`` view of an untyped buffer,
    whichever comes first. After that, ``write()`` of an array of another
    dtype raises ArgumentError unless ``cast=True`` (converted with
    numpy's ``astype``), and ``tensor()`` of another dtype raises
    ArgumentError. Raw bytes are untyped and always fit: bytes,
    bytearray, memoryviews of bytes, uint8 / int8 arrays, HostBuffers,
    and U8 tensors. Assign ``buf.dtype`` to reinterpret on purpose (None
    makes the buffer untyped again).

    ``Runtime.from_dlpack`` makes Buffers of memory it does not own (a
    torch tensor's, a numpy array's): they know their ``shape`` and
    ``strides`` too, and may be ``readonly``. Any Buffer exports itself
    through DLPack (``__dlpack__`` / ``__dlpack_device__``: ``torch.
    from_dlpack(buf)``, ``numpy.from_dlpack(buf)``), as does a
    ``view()`` of part of it."""
    _order = 2
    _owner = None  # a DLPack import's producer (deleter)
    _hdtype = None  # the hbg DType of an import (bf16's numpy is uint16)
    _shape = None  # an import's shape and strides (None: compact)
    _strides = None
    _readonly = False
    _ro = None  # its token in the runtime's table of read-only imports
    _name = None  # what an import was ("numpy.ndarray float32 (4,)")
    _exports = 0  # DLPack capsules of it that are alive

    def __init__(self, rt: "Runtime", nbytes: int, dtype: Any = None) -> None:
        nbytes = _C.int_index(nbytes, "nbytes")
        if nbytes <= 0:
            raise ArgumentError(-1, message="buffer size must be positive, "
                                "not %d" % nbytes)
        if nbytes >= _C.U64:
            raise _errors.out_of_range("nbytes", nbytes, "1 .. 2**64-1")
        dt = None if dtype is None else _np_dtype(dtype, "hbg.Buffer")
        _flush_frees(rt._h)
        addr = c_uint64()
        rc = lib.hbg_buffer_alloc(rt._ptr(), nbytes, byref(addr))
        if rc < 0:
            _check(rc, "hbg_buffer_alloc", rt, message="%d bytes: %s" % (
                nbytes, _errors.strerror(rc)))
        self.runtime = rt
        self.addr = addr.value
        self.nbytes = nbytes
        self._dtype = dt
        self._fin = weakref.finalize(self, _free_buffer, rt._h, self.addr)
        rt._h.children.add(self)

    _parent = None  # the import this one lies in (a view imported after it)
    _kids = None  # WeakSet of imports that lie in this one

    @classmethod
    def _imported(cls, rt, addr, nbytes, d, shape, strides, owner, readonly,
                  name, host=0, parent=None):
        b = cls.__new__(cls)
        b.runtime = rt
        b.addr = addr
        b.nbytes = nbytes
        b._dtype = _np.dtype(_CARRIER[d]) if _np is not None else None
        b._hdtype = d
        b._shape = shape
        b._strides = strides
        b._owner = owner
        b._readonly = readonly
        b._name = name
        h = rt._h
        b._parent = parent
        ro = None
        if readonly and addr:
            ro = next(_tokens)
            h.readonly[ro] = (addr, nbytes, name)
        b._ro = ro
        b._fin = weakref.finalize(b, _free_buffer, h, addr, owner,
                                  parent is not None, ro)
        h.children.add(b)
        if parent is not None:
            if parent._kids is None:
                parent._kids = weakref.WeakSet()
            parent._kids.add(b)
        elif addr:
            h.imports[addr] = (host, nbytes, weakref.ref(b))
        return b

    @property
    def dtype(self) -> Any:
        """The numpy dtype of what the buffer holds, or None (untyped)."""
        return self._dtype

    @property
    def shape(self) -> Optional[Tuple[int, ...]]:
        """The shape of an imported tensor (``Runtime.from_dlpack``);
        for another buffer ``(nbytes // itemsize,)`` of its dtype, or None
        while untyped."""
        if self._shape is not None:
            return self._shape
        if self._dtype is None:
            return None
        return (self.nbytes // self._dtype.itemsize,)

    @property
    def strides(self) -> Optional[Tuple[int, ...]]:
        """Strides in elements of an imported tensor that is not compact
        row-major; None otherwise."""
        return self._strides

    @property
    def readonly(self) -> bool:
        """True for a read-only import (a numpy array with writeable
        False): no task may write it."""
        return self._readonly

    @property
    def imported(self) -> bool:
        """True for memory from ``Runtime.from_dlpack``."""
        return self._owner is not None

    def _refuse_write(self, what):
        raise ArgumentError(-1, message="%s: the buffer is %s, imported "
                            "read-only (numpy writeable=False): nothing may "
                            "write it" % (what, self._name))

    def _dlpack_released(self):  # a capsule's deleter ran
        self._exports -= 1

    @dtype.setter
    def dtype(self, dtype: Any) -> None:
        self._dtype = None if dtype is None else _np_dtype(dtype,
                                                          "hbg.Buffer.dtype")

    def _release(self):
        self._fin()

    def _live(self):
        p = self.runtime._ptr()
        if not self._fin.alive:
            raise StateError(-7, message="buffer is freed")
        return p

    def free(self) -> None:
        """Free the device memory now (``hbg_buffer_free``). An import
        is forgotten by hbg, then handed back to its producer (the
        DLManagedTensor's deleter). A buffer with live DLPack exports (a
        torch tensor or numpy array viewing it) raises StateError."""
        p = self._live()
        if self._exports:
            raise StateError(-21, message="buffer has %d DLPack export(s) "
                             "alive (a tensor or array views it): drop them "
                             "before free()" % self._exports)
        kids = [k for k in self._kids or () if k._fin.alive]
        if kids:
            raise StateError(-21, message="%d import(s) of views of this "
                             "buffer's memory are alive: free them first" %
                             len(kids))
        if not self.addr or self._parent is not None:
            self._fin()  # no import of its own (zero size, or a view)
            return
        rc = lib.hbg_buffer_free(p, self.addr)
        if rc != _BUSY:  # another thread's call: the buffer stays
            self._fin.detach()
            self.runtime._h.readonly.pop(self._ro, None)
            self.runtime._h.imports.pop(self.addr, None)
            if self._owner is not None:
                self._owner.release()
        _check(rc, "hbg_buffer_free", self.runtime)

    def write(self, data: Any, offset: int = 0,
              cast: Union[bool, Any] = False) -> None:
        """Copy data (buffer protocol, or a HostBuffer: read by the device
        in place where it is pinned) into the buffer at byte offset.
        A numpy array of another dtype than the buffer's raises
        ArgumentError, unless ``cast`` is True (converted to the buffer's
        dtype) or a dtype (converted to it; the buffer must be untyped or
        of that dtype). A typed array written to an untyped buffer types
        it."""
        p = self._live()
        if self._readonly:
            self._refuse_write("Buffer.write")
        if data.__class__ is not HostBuffer:
            dt = _data_dtype(data)
            if cast is not False and cast is not None:
                want = self._dtype if cast is True else _np_dtype(
                    cast, "hbg.Buffer.write")
                if want is None:
                    raise ArgumentError(-1, message="cast=True needs a typed "
                                        "buffer; pass cast=<dtype>")
                if self._dtype is not None and self._dtype != want:
                    raise ArgumentError(-1, message="cast=%s, but the buffer "
                                        "holds %s" % (want, self._dtype))
                if dt is not None and dt != want:
                    data = _np.ascontiguousarray(data).astype(want)
                dt = want
            if dt is not None and self._dtype is not None and \
                    dt != self._dtype:
                raise ArgumentError(-1, message=(
                    "the buffer holds %s; a %s array would be stored as its "
                    "bytes and read back as %s: pass cast=True to convert "
                    "it, or set Buffer.dtype to reinterpret" % (
                        self._dtype, dt, self._dtype)))
        else:
            dt = None
        mv = memoryview(data._mm if data.__class__ is HostBuffer else data)
        if not mv.c_contiguous:
            raise ArgumentError(-1, message="data must be C-contiguous")
        mv = mv.cast("B")
        if offset < 0 or offset + mv.nbytes > self.nbytes:
            raise ArgumentError(-8, message="write of %d bytes at %d "
                                "outside a %d-byte buffer" %
                                (mv.nbytes, offset, self.nbytes))
        _B.buffer_write(p, self.addr + offset, mv)
        if dt is not None and self._dtype is None:
            self._dtype = dt

    def read_into(self, out: Any, offset: int = 0) -> Any:
        """Copy from the buffer at byte offset into out (a writable,
        C-contiguous buffer-protocol object, or a HostBuffer); returns
        out. The bytes are copied as they are, whatever out's dtype."""
        p = self._live()
        mv = memoryview(out._mm if out.__class__ is HostBuffer else out)
        if mv.readonly or not mv.c_contiguous:
            raise ArgumentError(-1, message="out must be writable and "
                                "C-contiguous")
        mv = mv.cast("B")
        if offset < 0 or offset + mv.nbytes > self.nbytes:
            raise ArgumentError(-8, message="read of %d bytes at %d outside "
                                "a %d-byte buffer" %
                                (mv.nbytes, offset, self.nbytes))
        _B.buffer_read(p, self.addr + offset, mv)
        return out

    def read(self, nbytes: Optional[int] = None, offset: int = 0) -> bytes:
        """Bytes read from the buffer (all of it by default)."""
        n = self.nbytes - offset if nbytes is None else int(nbytes)
        out = bytearray(n)
        self.read_into(out, offset)
        return bytes(out)

    def numpy(self, dtype: Any = None, shape: Any = None,
              offset: int = 0) -> Any:
        """A new numpy array read from the buffer (needs numpy), of dtype:
        an hbg dtype (DType, "f32", ...) or anything numpy.dtype() takes
        ("float64", np.int16, ...). By default the buffer's own dtype, or
        float32 for an untyped buffer. Another dtype reads the bytes as
        that type (the caller asked for it)."""
        if dtype is None:
            dt = self._dtype if self._dtype is not None else \
                _np_dtype("float32", "hbg.Buffer.numpy")
        else:
            dt = _np_dtype(dtype, "hbg.Buffer.numpy")
        if shape is None:
            shape = ((self.nbytes - offset) // dt.itemsize,)
        arr = _np.empty(shape, dtype=dt)
        return self.read_into(arr, offset)

    def tensor(self, shape: Any = None, dtype: Any = None,
               mode: Any = Access.IN, offset: int = 0,
               strides: Optional[Sequence[int]] = None) -> "Tensor":
        """A Tensor viewing this buffer. Its dtype must be the buffer's
        (see Buffer.dtype; a U8 tensor views any bytes); the first view of
        an untyped buffer types it. dtype None: an import's own dtype,
        else F32. shape None: an import's whole tensor (its shape and
        strides; a 0-dim tensor as shape (1,)), else the whole buffer as
        one dim. A read-only import refuses mode out / inout."""
        self._live()
        if dtype is None:
            dtype = self._hdtype if self._hdtype is not None else DType.F32
        if shape is None:
            if self._shape is not None:
                shape = self._shape or (1,)
                if strides is None and self._shape:
                    strides = self._strides
            else:
                shape = (self.nbytes - offset) // dtype_size(dtype)
        if self._readonly and _mode(mode) & Access.OUT:
            self._refuse_write("Buffer.tensor(mode=%s)" % _mode(mode).name)
        t = Tensor(self.addr, shape, dtype, mode, offset, strides)
        if offset + t.extent > self.nbytes:
            raise ArgumentError(-8, message="tensor of %d bytes at %d outside "
                                "a %d-byte buffer" % (t.extent, offset,
                                                      self.nbytes))
        bd = self._dtype
        if bd is not None:
            if not _dtype_fits(bd, t._dtype):
                raise ArgumentError(-1, message=(
                    "the buffer holds %s; a %s tensor would read its bytes as "
                    "%s: write %s data into it (Buffer.write(arr, cast=True) "
                    "converts), or set Buffer.dtype to reinterpret" % (
                        bd, t.dtype.name, t.dtype.name,
                        _NP_OF.get(t.dtype, t.dtype.name))))
        elif _np is not None and t._dtype in _NP_OF and t._dtype != DType.U8:
            self._dtype = _np.dtype(_NP_OF[t._dtype])
        return t

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        """``np.asarray(buffer)``: a copy of the device bytes (as uint8, or
        dtype). Device memory is not host-addressable: for arrays numpy
        reads and writes in place, use a HostBuffer (or, on the sim,
        ``numpy.from_dlpack(buffer)``, a view without a copy)."""
        return self.numpy("u8" if dtype is None else dtype)

    def view(self, shape: Any = None, dtype: Any = None, offset: int = 0,
             strides: Optional[Sequence[int]] = None) -> "BufferView":
        """A BufferView: part of the buffer as a tensor to export through
        DLPack (``torch.from_dlpack(buf.view((4, 8), offset=64))``).
        dtype: an hbg dtype or a numpy one; None is the buffer's own
        (uint8 bytes while untyped). shape None: an import's shape, else
        all the bytes from offset as one dim. Strides in elements (None:
        compact row-major), not negative. offset (bytes) must be a
        multiple of the dtype's size; the view must lie inside the
        buffer. The export folds offset into its data pointer
        (byte_offset 0: torch ignores byte_offset)."""
        return BufferView(self, shape, dtype, offset, strides)

    def __dlpack__(self, *, stream: Any = None, max_version: Any = None,
                   dl_device: Any = None, copy: Any = None) -> Any:
        """A DLPack capsule of the whole buffer (``view()``'s defaults):
        see BufferView.__dlpack__."""
        return self.view().__dlpack__(stream=stream, max_version=max_version,
                                      dl_device=dl_device, copy=copy)

    def __dlpack_device__(self) -> Tuple[int, int]:
        """(kDLCPU, 0) on the sim, (kDLCUDA, ordinal) on cuda."""
        return self.view().__dlpack_device__()

    def __repr__(self) -> str:
        extra = ""
        if self._owner is not None:
            extra = " imported=%s%s" % (self._name, " readonly"
                                        if self._readonly else "")
        return "<hbg.Buffer addr=%#x nbytes=%d dtype=%s%s>" % (
            self.addr, self.nbytes, self._dtype, extra)


def _np_of_export(dtype, buf):
    """(code, bits, itemsize, hbg DType or None) of an export's dtype."""
    if dtype is None:
        if buf._hdtype is not None:
            dtype = buf._hdtype
        elif buf._dtype is None:
            dtype = DType.U8
        else:
            dtype = buf._dtype
    if isinstance(dtype, (int, DType)) or (
            isinstance(dtype, str) and dtype.lower() in _DTYPE_NAMES):
        d = _dtype(dtype)
        code, bits = _DL_OF[d]
        return code, bits, bits // 8, d
    dt = _np_dtype(dtype, "hbg.Buffer.view")
    code = {"f": 2, "i": 0, "u": 1}.get(dt.kind)
    if code is None or dt.itemsize not in (1, 2, 4, 8):
        raise ArgumentError(-1, message="hbg.Buffer.view: DLPack 0.6 has no "
                            "%s" % dt)
    return code, dt.itemsize * 8, dt.itemsize, _OF_DL.get(
        (code, dt.itemsize * 8))


class BufferView:
    """Part of a Buffer as a tensor, for DLPack consumers
    (``Buffer.view()``): ``torch.from_dlpack(view)`` and
    ``numpy.from_dlpack(view)`` see the buffer's memory, no copy.
    ``tensor(mode)`` gives the same view as an hbg Tensor."""
    __slots__ = ("buffer", "offset", "shape", "strides", "_code", "_bits",
                 "_itemsize", "_hdtype")

    def __init__(self, buf: "Buffer", shape: Any = None, dtype: Any = None,
                 offset: int = 0,
                 strides: Optional[Sequence[int]] = None) -> None:
        buf._live()
        offset = _C.int_index(offset, "view offset")
        code, bits, size, d = _np_of_export(dtype, buf)
        if shape is None:
            if buf._shape is not None and offset == 0 and dtype is None:
                shape = buf._shape
                if strides is None:
                    strides = buf._strides
            else:
                shape = (max(0, buf.nbytes - offset) // size,)
        shape = tuple(operator_index(x) for x in (
            shape if hasattr(shape, "__len__") else (shape,)))
        if strides is not None:
            strides = tuple(operator_index(x) for x in strides)
            if len(strides) != len(shape) or any(x < 0 for x in strides):
                raise ArgumentError(-1, message="view strides %r: one per "
                                    "dim of %r, none negative" % (
                                        strides, shape))
        if any(x < 0 for x in shape) or len(shape) > _DL.MAX_EXPORT_DIMS:
            raise ArgumentError(-1, message="view shape %r" % (shape,))
        if offset < 0 or offset % size:
            raise ArgumentError(-1, message="view offset %d: not a multiple "
                                "of the %d-byte element" % (offset, size))
        ext = _DL.extent(shape, strides, size)
        if offset + ext > buf.nbytes:
            raise ArgumentError(-8, message="view of %d bytes at %d outside "
                                "a %d-byte buffer" % (ext, offset,
                                                      buf.nbytes))
        self.buffer, self.offset, self.shape = buf, offset, shape
        self.strides = strides
        self._code, self._bits, self._itemsize, self._hdtype = \
            code, bits, size, d

    @property
    def nbytes(self) -> int:
        """The view's extent in bytes."""
        return _DL.extent(self.shape, self.strides, self._itemsize)

    def tensor(self, mode: ModeLike = Access.IN) -> "Tensor":
        """The view as an hbg Tensor of its buffer."""
        if self._hdtype is None:
            raise ArgumentError(-1, message="a view of dtype code %d, %d bits"
                                " is no hbg dtype" % (self._code, self._bits))
        return self.buffer.tensor(self.shape or (1,), self._hdtype, mode,
                                  self.offset, self.strides)

    def __dlpack_device__(self) -> Tuple[int, int]:
        """(kDLCPU, 0) on the sim, (kDLCUDA, ordinal) on cuda."""
        rt = self.buffer.runtime
        dev = rt._dl_device()
        if dev is None:
            raise BufferError("the %s device's memory cannot be exported "
                              "through DLPack" % rt._device_kind())
        return dev

    def __dlpack__(self, *, stream: Any = None, max_version: Any = None,
                   dl_device: Any = None, copy: Any = None) -> Any:
        """A "dltensor" capsule (DLPack 0.x, unversioned: what torch 1.13
        and numpy 1.24 take; a consumer that passes max_version takes it
        too) of the view: data is the host address of the memory on the
        sim (``hbg_buffer_host_ptr``), the device address on cuda, with
        the view's offset folded in and byte_offset 0; strides always
        given. The capsule keeps the buffer (and runtime) alive until its
        consumer calls the deleter, or until it is dropped unconsumed.

        stream (cuda): the consumer's stream (DLPack: None or 1 legacy
        default, 2 per-thread, a CUstream, -1 no synchronization); unless
        -1, the export waits on the host for the last bind launched on the
        runtime before it returns, so that the data is ready on any
        stream. The sim ignores it. dl_device other than the buffer's and
        copy=True raise BufferError (hbg exports never copy); so does a
        read-only import."""
        buf = self.buffer
        p = buf._live()
        if buf._readonly:
            raise BufferError("%s is imported read-only; DLPack cannot say "
                              "so, so hbg does not export it" % buf._name)
        if copy:
            raise BufferError("hbg exports never copy (copy=True)")
        dev = self.__dlpack_device__()
        if dl_device is not None and tuple(dl_device) != dev:
            raise BufferError("dl_device %r: the buffer lives on %s device "
                              "%d" % (tuple(dl_device),
                                      _DL.device_name(dev[0]), dev[1]))
        ext = self.nbytes
        if dev[0] == _DL.kDLCPU:
            data = (_B.buffer_host_ptr(p, buf.addr + self.offset, ext)
                    if ext else 0)
        else:
            data = buf.addr + self.offset if ext else 0
            if stream is not None and stream != -1:
                buf.runtime._wait_last_launched()
        cap = _DL.make_capsule(data, dev, self._code, self._bits, self.shape,
                               self.strides, buf)
        buf._exports += 1
        return cap

    def __repr__(self) -> str:
        return "<hbg.BufferView of %r offset=%d shape=%r strides=%r>" % (
            self.buffer, self.offset, self.shape, self.strides)


def operator_index(x):
    return _C.int_index(x, "dim")


def _destroy_queue(h, dev, handle):
    h.queues.pop(handle, None)
    if h.ptr is not None:
        if L.HAVE_STREAM_FORGET:  # waits for the binds launched on it
            lib.hbg_runtime_stream_forget(h.ptr, handle)
        lib.hbg_dev_queue_sync(dev, handle)  # binds on it finish first
        lib.hbg_dev_queue_destroy(dev, handle)


class Queue:
    """A device queue of a runtime (``Runtime.queue()``,
    ``hbg_dev_queue_create``) to launch binds on: ``b.launch(stream=q)``
    (``hbg_bind_launch_on``). On the sim it is an ``hbg_dev_queue *``,
    on cuda a CUstream; ``handle`` is that pointer as an int. A context
    manager: ``close()`` (or collection, or the runtime's close) waits for
    the work on it (``hbg_dev_queue_sync``) and destroys it."""
    _order = 3

    def __init__(self, rt: "Runtime") -> None:
        p = rt._ptr()
        dev = lib.hbg_runtime_device(p)
        q = c_void_p()
        _check(lib.hbg_dev_queue_create(dev, byref(q)),
               "hbg_dev_queue_create", rt)
        self.runtime = rt
        self.handle: int = q.value or 0
        h = rt._h
        self._fin = weakref.finalize(self, _destroy_queue, h, dev,
                                     self.handle)
        h.children.add(self)
        h.queues[self.handle] = weakref.ref(self)

    def _release(self):
        self._fin()

    def close(self) -> None:
        """Wait for the queue's work, then destroy it. Idempotent."""
        self._fin()

    @property
    def closed(self) -> bool:
        return not self._fin.alive

    def __enter__(self) -> "Queue":
        return self

    def __exit__(self, *exc: Any) -> bool:
        self.close()
        return False

    def __repr__(self) -> str:
        return "<hbg.Queue handle=%#x%s>" % (self.handle, " closed"
                                             if self.closed else "")


def _unregister_host(h, dev, addr, pinned, mm):
    if pinned and h.ptr is not None:
        lib.hbg_dev_host_unregister(dev, addr)
    del mm  # the mapping outlives its registration


class HostBuffer:
    """Host memory for device copies that numpy reads and writes in place
    (``Runtime.host_buffer``): ``np.asarray(hb)`` (``__array_interface__``,
    uint8) and ``hb.numpy(dtype, shape)`` are views of it, not copies.
    Registered with the device (``hbg_dev_host_register``) where the
    backend supports it (``pinned`` is then True): ``Buffer.write(hb)`` /
    ``Buffer.read_into(hb)`` copy straight between it and device memory.
    Where it does not (``pinned`` False) those copies are staged through
    the device's bounce buffers, as for any host memory. The memory lives
    as long as the HostBuffer or a view of it; closing the runtime only
    unregisters it."""
    _order = 2

    def __init__(self, rt: "Runtime", nbytes: int) -> None:
        nbytes = _C.int_index(nbytes, "nbytes")
        if nbytes <= 0:
            raise ArgumentError(-1, message="host buffer size must be "
                                "positive, not %d" % nbytes)
        p = rt._ptr()
        try:
            self._mm = mmap.mmap(-1, nbytes)
        except (OSError, OverflowError, ValueError) as e:
            raise make_error(-2, where="HostBuffer", message=(
                "%d bytes of host memory: %s (%s)" % (
                    nbytes, _errors.strerror(-2), e))) from e
        # an export of the mapping: it cannot be closed or resized now
        self._view = (ctypes.c_char * nbytes).from_buffer(self._mm)
        self.addr = ctypes.addressof(self._view)
        self.nbytes = nbytes
        self.runtime = rt
        dev = lib.hbg_runtime_device(p)
        rc = lib.hbg_dev_host_register(dev, self.addr, nbytes)
        if rc < 0 and rc != -5:  # HBG_E_UNSUPPORTED: plain host memory
            _check(rc, "hbg_dev_host_register", rt, message="%d bytes: %s" %
                   (nbytes, _errors.strerror(rc)))
        self.pinned = rc == 0
        self._fin = weakref.finalize(self, _unregister_host, rt._h, dev,
                                     self.addr, self.pinned, self._mm)
        rt._h.children.add(self)

    def _release(self):
        self._fin()

    @property
    def __array_interface__(self):
        return {"version": 3, "shape": (self.nbytes,), "typestr": "|u1",
                "data": (self.addr, False)}

    def numpy(self, dtype: DTypeLike = "float32",
              shape: Optional[ShapeLike] = None) -> Any:
        """A numpy view (no copy) of the memory as dtype (an hbg dtype name
        / DType, or any numpy dtype), shape (default: all of it)."""
        dt = _np_dtype(dtype, "hbg.HostBuffer.numpy")
        if shape is None:
            shape = (self.nbytes // dt.itemsize,)
        shape = tuple(shape) if hasattr(shape, "__len__") else (int(shape),)
        count = 1
        for d in shape:
            count *= int(d)
        if any(int(d) < 0 for d in shape) or count * dt.itemsize > self.nbytes:
            raise ArgumentError(-8, message="a %r %s view needs %d bytes; "
                                "the host buffer has %d" % (
                                    shape, dt.name, max(0, count) *
                                    dt.itemsize, self.nbytes))
        return _np.frombuffer(self._mm, dt, count).reshape(shape)

    def __repr__(self):
        return "<hbg.HostBuffer nbytes=%d pinned=%s>" % (self.nbytes,
                                                        self.pinned)


# ---------------------------------------------------------------- record

class Recorder:
    """Passed to a graph's record callback: the boundary being recorded,
    and ``task()`` to append inner tasks. Valid only during the call."""

    def __init__(self, ptr: int) -> None:
        self._p: Optional[int] = ptr
        self.tensors, self.scalars = _B.record_boundary(ptr)

    def task(self, kernel: int, args: Sequence["Tensor"],
             scalars: Sequence[ScalarLike] = (),
             deps: Sequence[int] = ()) -> int:
        """Append an inner task (``hbg_record_task``); internal outputs
        (``Tensor.internal``) get their heap address filled in. deps are
        earlier inner node ids. Returns the inner node id."""
        if self._p is None:
            raise StateError(-13, message="recorder used outside its "
                             "record callback")
        return _B.record_task(self._p, kernel, args, scalars, deps)


# ---------------------------------------------------------------- binds

_tokens = itertools.count(1)


def _refuse_readonly(h, tensors, where, what, width=0):
    """ArgumentError when a tensor that writes (mode out / inout) lies in
    a read-only import (h.readonly: token -> (addr, nbytes, name))."""
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor) or not t._mode & Access.OUT:
            continue
        a = t._addr + t._offset
        for base, n, name in list(h.readonly.values()):
            if base <= a < base + n:
                arg = "%s %d" % (what, i % width if width else i)
                if width:
                    arg = "replay %d, %s" % (i // width, arg)
                raise ArgumentError(-1, message="%s: %s (mode %s) writes "
                                    "%s, imported read-only (numpy "
                                    "writeable=False)" % (
                                        where, arg, Access(t._mode).name,
                                        name))


_OPEN, _LAUNCHED, _WAITED, _ENDED = range(4)  # _OPEN is 0: tested as false
_submit_graph, _submit_task = _B.submit_graph, _B.submit_task


def _end_bind(h, cell):
    if cell[0] is not None and h.ptr is not None:
        _B.bind_end(cell[0])
    cell[0] = None


class Bind:
    """One bind (orchestration round) on a pipeline slot.

    ``task()`` and ``graph()`` / ``graphs()`` add work; ``launch()``,
    ``wait()``, ``end()`` finish it. As a context manager: on a normal
    exit it launches (if not yet), waits (if not yet) and ends; after an
    exception it ends the bind without launching it (a launched one is
    ended, the slot's next begin waits for it). ``stats`` holds the
    BindStats once waited. A bind dropped unended is ended when collected.
    """
    _order = 0
    _stream = None  # what launch(stream=) ran on, kept while the bind lives

    def __init__(self, rt: "Runtime") -> None:
        h = rt._h
        cell = [None]
        self.runtime = rt
        self._h = h
        self._cell = cell
        self._state = _OPEN
        self.stats = None
        self._fin = weakref.finalize(self, _end_bind, h, cell)
        h.children.add(self)
        # begin last: the library times begin..launch, the caller's work
        cell[0] = _B.bind_begin(rt._ptr())

    def _release(self):
        self._fin()
        self._state = _ENDED

    def _ptr(self, *ok):
        self.runtime._ptr()
        if self._state == _ENDED or self._cell[0] is None:
            raise StateError(-7, message="bind has ended")
        if ok and self._state not in ok:
            raise StateError(-7, message="bind is %s" % (
                "open (not launched)", "launched", "waited")[self._state])
        return self._cell[0]

    @property
    def ended(self) -> bool:
        return self._state == _ENDED

    def task(self, kernel: int, args: Sequence["Tensor"],
             scalars: Sequence[ScalarLike] = (),
             deps: Sequence[int] = ()) -> int:
        """Append an ordinary task (``hbg_submit_task``): kernel (Kernel),
        args (Tensors), scalars (Scalar or static ints), deps (task ids).
        Returns its task id."""
        h = self._h
        if self._state or h.ptr is None:  # not _OPEN, or runtime closed
            self._ptr(_OPEN)
        if h.readonly:
            _refuse_readonly(h, args, "Bind.task", "argument")
        return _submit_task(self._cell[0], h.ptr, kernel, args, scalars, deps,
                            h.tracing)

    def graph(self, key: int,
              tensors: Union[Sequence["Tensor"], "TensorArray"] = (),
              scalars: Sequence[Union[int, float]] = (),
              record: Optional[Callable[["Recorder"], Any]] = None,
              variant: Sequence[Union[int, float]] = (),
              deps: Sequence[int] = ()) -> int:
        """Submit one replay of graph `key` (``hbg_submit_graph``).

        tensors: the boundary Tensors (or a TensorArray from pack());
        scalars: boundary scalar values
        (ints); record: ``fn(Recorder)`` run only when the key is first
        recorded in this runtime (an exception it raises propagates from
        here); variant: config values selecting a variant; deps: earlier
        task ids. Returns the task id."""
        h = self._h
        if self._state or h.ptr is None:  # not _OPEN, or runtime closed
            self._ptr(_OPEN)
        if tensors.__class__ is TensorArray:
            if tensors.rows != 1:
                raise ArgumentError(-1, message="graph() takes one row; use "
                                    "graphs() for several")
            if h.readonly:
                _refuse_readonly(h, tensors.tensors(), "Bind.graph",
                                 "boundary tensor")
            tensors = tensors._arr
        elif h.readonly:
            _refuse_readonly(h, tensors, "Bind.graph", "boundary tensor")
        return _submit_graph(self._cell[0], h.ptr, key, tensors, scalars,
                             record, variant, deps, 0, False, h.tracing)

    def graphs(self, key: int,
               tensors: Union[Sequence[Sequence["Tensor"]], "TensorArray"],
               scalars: Optional[Sequence[Sequence[Union[int, float]]]] = None,
               record: Optional[Callable[["Recorder"], Any]] = None,
               variant: Sequence[Union[int, float]] = (),
               deps: Sequence[int] = (), chain: bool = False) -> List[int]:
        """Submit len(tensors) replays of one key in one C call
        (``hbg_submit_graph_n``): tensors[i] and scalars[i] are replay i's
        boundary (tensors may be a TensorArray of rows from pack()).
        Every replay waits for deps; with chain=True replay i > 0
        waits for replay i - 1 instead (a decode step's layer chain). Same
        as calling graph() per replay, at a fraction of the Python call
        cost. Returns the task ids."""
        n = len(tensors)
        if n == 0:
            return []
        h = self._h
        if self._state != _OPEN or h.ptr is None:
            self._ptr(_OPEN)
        if tensors.__class__ is TensorArray:
            flat = tensors._arr
            if h.readonly:
                _refuse_readonly(h, tensors.tensors(), "Bind.graphs",
                                 "boundary tensor", tensors.width)
        else:
            nt = len(tensors[0])
            if any(len(t) != nt for t in tensors):
                raise ArgumentError(-1, message="every replay needs the "
                                    "same number of boundary tensors")
            flat = [t for row in tensors for t in row]
            if h.readonly:
                _refuse_readonly(h, flat, "Bind.graphs", "boundary tensor",
                                 nt)
        if not L.HAVE_BATCH:
            if tensors.__class__ is TensorArray:
                raise ArgumentError(-5, message="this libhbg has no "
                                    "hbg_submit_graph_n")
            if scalars is None:
                scalars = [()] * n
            if len(scalars) != n:
                raise ArgumentError(-1, message="tensors and scalars differ "
                                    "in length")
            ids = []
            for i in range(n):
                d = [ids[-1]] if chain and ids else deps
                ids.append(self.graph(key, tensors[i], scalars[i], record,
                                      variant, d))
            return ids
        return _B.submit_graph(self._cell[0], h.ptr, key, flat, scalars,
                               record, variant, deps, n, chain, h.tracing)

    def launch(self, stream: Any = None) -> None:
        """Upload what is left and launch the bind (``hbg_bind_launch``).
        A second launch raises StateError.

        stream: launch on the caller's stream instead of hbg's own
        (``hbg_bind_launch_on``): an hbg Queue (``Runtime.queue()``; on the
        sim the only kind), or on cuda a CUstream: an int (0 the NULL
        stream, i.e. the legacy default one; 1 CU_STREAM_LEGACY; 2
        CU_STREAM_PER_THREAD; 0 is passed as 1), an object with
        ``__cuda_stream__()``
        returning (0, handle), or one with ``.cuda_stream``
        (torch.cuda.Stream, ExternalStream). Anything else raises
        TypeError naming its type; a CUDA stream on the sim, or an int
        that names no Queue there, ArgumentError. The bind keeps the
        stream object until it is collected."""
        h = self._h
        if self._state != _OPEN or h.ptr is None:
            self._ptr(_OPEN)
        if stream is None:
            _B.bind_launch(self._cell[0], h.ptr)
        else:
            handle = self.runtime._stream_handle(stream)
            _B.bind_launch_on(self._cell[0], h.ptr, handle)
            self._stream = stream
        self._state = _LAUNCHED
        h.last_launched = weakref.ref(self)

    def wait(self) -> "BindStats":
        """Wait for the launched bind (``hbg_bind_wait``); returns and
        keeps its BindStats. An error the device reported (a bad image, a
        scalar value only the device checks) raises DeviceSideError, which
        names the failing task and graph node; a bind that latched a fatal
        error on the host raises StateError (HBG_E_FATAL)."""
        p = self._ptr(_LAUNCHED, _WAITED)
        if self._state == _LAUNCHED:
            rc = _B.bind_wait(p)
            if rc == _BUSY:  # nothing happened: the bind is still launched
                _check(rc, "hbg_bind_wait", self.runtime)
            self._state = _WAITED
            self.stats = self._get_stats(p)
            if rc < 0 and rc == self.stats.device_status:
                raise self._device_side_error(p, rc)
            _check(rc, "hbg_bind_wait", self.runtime)
        return self.stats

    def _device_side_error(self, p, rc):
        entry, node = c_uint32(), c_uint32()
        if lib.hbg_bind_error_location(p, byref(entry), byref(node)) == 0:
            e = entry.value
            n = None if node.value == 0xFFFFFFFF else node.value
        else:  # the device could not name an entry (a bad window header)
            e = n = None
        return _errors.device_side_error(rc, e, n, where="hbg_bind_wait",
                                         native=self.runtime._native_error())

    def _get_stats(self, p):
        st = L.out_struct(L.BindStats_c)
        _check(lib.hbg_bind_stats_get(p, ctypes.addressof(st)),
               "hbg_bind_stats_get", self.runtime)
        return BindStats._from_c(st)

    def get_stats(self) -> "BindStats":
        """BindStats now (``hbg_bind_stats_get``), any state but ended."""
        return self._get_stats(self._ptr())

    @property
    def fatal(self) -> int:
        """The latched fatal error code, 0 if none (``hbg_bind_fatal``)."""
        return lib.hbg_bind_fatal(self._ptr())

    def end(self) -> None:
        """Release the slot (``hbg_bind_end``). Idempotent."""
        self._release()

    def __enter__(self) -> "Bind":
        return self

    def __exit__(self, et: Any, ev: Any, tb: Any) -> bool:
        if et is not None:
            self.end()
            return False
        try:
            if self._state == _OPEN:
                self.launch()
            if self._state == _LAUNCHED:
                self.wait()
        finally:
            self.end()
        return False


# ---------------------------------------------------------------- workloads

def _workload_config(name, layers=0, seed=0, def_size=0, model=None,
                     weights=None, kv_len=0):
    cfg = L.out_struct(L.WorkloadConfig_c)
    lib.hbg_workload_config_init(ctypes.addressof(cfg))
    keep = [name.encode(), None if model is None else os.fsencode(model)]
    cfg.name = keep[0]
    cfg.model = keep[1]
    cfg.layers = int(layers)
    cfg.seed = int(seed)
    cfg.def_size = int(def_size)
    cfg.weight_dtype = 0 if weights is None else int(_dtype(weights))
    cfg.kv_len = int(kv_len)
    cfg._strs = keep
    return cfg


def workload_bytes(name: Optional[str] = None, layers: int = 0, *,
                   model: Optional[str] = None, weights: Any = None,
                   kv_len: int = 0) -> int:
    """The device bytes a workload would allocate (``hbg_workload_bytes``),
    without creating it: reads a model's config.json, not its weights."""
    if name is None:
        name = "qwen3" if model is not None else "qwen3-14b"
    cfg = _workload_config(name, layers, 0, 0, model, weights, kv_len)
    n = c_uint64()
    rc = lib.hbg_workload_bytes(ctypes.addressof(cfg), byref(n))
    _check(rc, "hbg_workload_bytes", None, _last_error(rc))
    return n.value


def _destroy_workload(h, cell):
    if cell[0] is not None and h.ptr is not None:
        lib.hbg_workload_destroy(cell[0])
    cell[0] = None


class Workload:
    """A built-in reference workload's buffers on a runtime
    (``hbg_workload_*``): ``submit(bind, step)`` orchestrates one decode
    step from C, ``verify(step)`` checks it against the host reference."""
    _order = 1

    def __init__(self, rt: "Runtime", name: Optional[str] = None,
                 layers: int = 0, seed: int = 0, def_size: int = 0, *,
                 model: Optional[str] = None, weights: Any = None,
                 kv_len: int = 0) -> None:
        if name is None:
            name = "qwen3" if model is not None else "qwen3-14b"
        cfg = _workload_config(name, layers, seed, def_size, model, weights,
                               kv_len)
        p = c_void_p()
        rc = lib.hbg_workload_create(rt._ptr(), ctypes.addressof(cfg),
                                     byref(p))
        _check(rc, "hbg_workload_create", rt, _last_error(rc))
        self.runtime = rt
        self.name = name
        self._cell = [p.value]
        self._peers = weakref.WeakSet()  # closed before the workload
        self._fin = weakref.finalize(self, _destroy_workload, rt._h,
                                     self._cell)
        rt._h.children.add(self)

    def _release(self):
        for p in list(self._peers):
            p._release()
        self._fin()

    def _ptr(self):
        self.runtime._ptr()
        if self._cell[0] is None:
            raise StateError(-7, message="workload is closed")
        return self._cell[0]

    def close(self) -> None:
        """Free the workload's device buffers. Idempotent."""
        self._release()

    def __enter__(self) -> "Workload":
        return self

    def __exit__(self, *exc: Any) -> bool:
        self.close()
        return False

    @property
    def info(self) -> "WorkloadInfo":
        """WorkloadInfo (``hbg_workload_get_info``)."""
        st = L.out_struct(L.WorkloadInfo_c)
        _check(lib.hbg_workload_get_info(self._ptr(), ctypes.addressof(st)),
               "hbg_workload_get_info", self.runtime)
        return WorkloadInfo(*[getattr(st, f.name)
                              for f in dataclasses.fields(WorkloadInfo)])

    def submit(self, bind: "Bind", step: int) -> None:
        """Orchestrate decode step `step` into bind (all tasks, graphs)."""
        p = self._ptr()
        _check(lib.hbg_workload_submit(p, bind._ptr(_OPEN), int(step)),
               "hbg_workload_submit", self.runtime)

    def nodes(self, step: int, heap: int) -> List["WorkloadNode"]:
        """The kernel calls of step `step`, flattened, as WorkloadNodes
        (``hbg_workload_nodes``); graph-internal tensors lie in the device
        memory at heap (``info.node_heap_bytes`` bytes, 64-aligned)."""
        p = self._ptr()
        n = c_uint32()
        _check(lib.hbg_workload_nodes(p, int(step), int(heap), None, 0,
                                      byref(n)),
               "hbg_workload_nodes", self.runtime)
        arr = (L.WorkloadNode_c * max(1, n.value))()
        _check(lib.hbg_workload_nodes(p, int(step), int(heap), arr, n.value,
                                      byref(n)),
               "hbg_workload_nodes", self.runtime)
        return [WorkloadNode(c.kernel, c.task,
                             tuple(Tensor._from_c(c.tensors[i])
                                   for i in range(c.n_tensors)),
                             tuple(c.scalars[:c.n_scalars]))
                for c in arr[:n.value]]

    def hidden(self, index: int) -> Any:
        """Hidden state `index` of the last step run, as float32 (a numpy
        array, or an array.array without numpy): 0 is the input of layer 0
        (the token's embedding row), i the output of layer i - 1
        (``hbg_workload_hidden``). OutOfRangeError past the layers;
        UnsupportedError for a workload without hidden states."""
        n = self.info.hidden
        out = (_np.empty(max(n, 1), dtype=_np.float32) if _np is not None
               else array.array("f", bytes(4 * max(n, 1))))
        addr = (out.ctypes.data if _np is not None
                else out.buffer_info()[0])
        _check(lib.hbg_workload_hidden(self._ptr(), int(index), addr, n),
               "hbg_workload_hidden", self.runtime)
        return out

    def token(self, step: int) -> Optional[int]:
        """The token decode step `step` embeds (``hbg_workload_token``), or
        None for a workload without tokens."""
        t = lib.hbg_workload_token(self._ptr(), int(step))
        return None if t == 0xFFFFFFFF else t

    def verify(self, step: int) -> float:
        """Compare step's outputs with the host reference, bit for bit.
        Returns the max abs error (0.0); raises DeviceError (HBG_E_VERIFY)
        on a mismatch."""
        err = c_double()
        _check(lib.hbg_workload_verify(self._ptr(), int(step), byref(err)),
               "hbg_workload_verify", self.runtime)
        return err.value


_B.init(L.lib._hbg_path, _error_factory, Tensor, Recorder, Scalar,
        _errors.out_of_range)
