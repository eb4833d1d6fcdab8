"""Runtimes, device buffers, tensors, binds, graphs and workloads."""
import ctypes
import dataclasses
import enum
import mmap
import struct
import typing
import weakref
from typing import (Any, Callable, Iterable, List, Optional, Sequence,
                    Tuple, Union)
from ctypes import POINTER, byref, c_char_p, c_double, c_int, c_int64, \
    c_uint32, c_uint64, c_void_p

from . import _convert as _C
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
    "Bind", "Recorder", "TensorArray", "pack", "HostBuffer", "BindStats", "DeviceStats", "TraceEvent",
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

    Every tensor of every kernel but NOP is f32, 1 to 4 dims, no zero dim,
    strides in elements, at most 2**26 elements. Inputs need mode IN (or
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
    __slots__ = ("ptr", "children", "tracing", "deferred", "__weakref__")

    def __init__(self):
        self.ptr = None
        self.children = weakref.WeakSet()
        self.tracing = False  # a Python trace callback may need the GIL
        self.deferred = []  # buffer addresses a finalizer could not free


def _destroy_runtime(h):
    if h.ptr is None:
        return
    # binds end first (they may use the others' memory), then workloads
    for c in sorted(h.children, key=lambda c: c._order):
        c._release()
    _flush_frees(h)
    ptr, h.ptr = h.ptr, None
    lib.hbg_runtime_destroy(ptr)


def _free_buffer(h, addr):
    # A finalizer runs on whichever thread collects the Buffer; when
    # another thread is inside a call on the runtime (HBG_E_BUSY), the
    # free waits in the handle for the runtime's next alloc, bind or close.
    if h.ptr is not None and lib.hbg_buffer_free(h.ptr, addr) == _BUSY:
        h.deferred.append(addr)


def _flush_frees(h):
    """Free what finalizers could not (the runtime was busy then)."""
    while h.deferred and h.ptr is not None:
        addr = h.deferred.pop()
        if lib.hbg_buffer_free(h.ptr, addr) == _BUSY:
            h.deferred.append(addr)
            return


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

    # -- binds
    def bind(self) -> "Bind":
        """Begin a bind (``hbg_bind_begin``) and return it. As a context
        manager it launches, waits and ends on a normal exit, and ends
        (rolling back or abandoning) on an exception."""
        _flush_frees(self._h)
        return Bind(self)

    # -- workloads
    def workload(self, name: str = "qwen3-14b", layers: int = 0,
                 seed: int = 0, def_size: int = 0) -> "Workload":
        """Create a built-in workload (its buffers) on this runtime;
        ``def_size`` pads every Definition to at least that many bytes
        (``hbg_workload_config.def_size``, 0 = natural size)."""
        return Workload(self, name, layers, seed, def_size)

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
    makes the buffer untyped again)."""
    _order = 2

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

    @property
    def dtype(self) -> Any:
        """The numpy dtype of what the buffer holds, or None (untyped)."""
        return self._dtype

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
        """Free the device memory now (``hbg_buffer_free``)."""
        p = self._live()
        rc = lib.hbg_buffer_free(p, self.addr)
        if rc != _BUSY:  # another thread's call: the buffer stays
            self._fin.detach()
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

    def tensor(self, shape: Any, dtype: Any = DType.F32,
               mode: Any = Access.IN, offset: int = 0,
               strides: Optional[Sequence[int]] = None) -> "Tensor":
        """A Tensor viewing this buffer. Its dtype must be the buffer's
        (see Buffer.dtype; a U8 tensor views any bytes); the first view of
        an untyped buffer types it."""
        self._live()
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
        reads and writes in place, use a HostBuffer."""
        return self.numpy("u8" if dtype is None else dtype)

    def __repr__(self) -> str:
        return "<hbg.Buffer addr=%#x nbytes=%d dtype=%s>" % (
            self.addr, self.nbytes, self._dtype)


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
            tensors = tensors._arr
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
        else:
            nt = len(tensors[0])
            if any(len(t) != nt for t in tensors):
                raise ArgumentError(-1, message="every replay needs the "
                                    "same number of boundary tensors")
            flat = [t for row in tensors for t in row]
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

    def launch(self) -> None:
        """Upload what is left and launch the bind (``hbg_bind_launch``).
        A second launch raises StateError."""
        h = self._h
        if self._state != _OPEN or h.ptr is None:
            self._ptr(_OPEN)
        _B.bind_launch(self._cell[0], h.ptr)
        self._state = _LAUNCHED

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

def _destroy_workload(h, cell):
    if cell[0] is not None and h.ptr is not None:
        lib.hbg_workload_destroy(cell[0])
    cell[0] = None


class Workload:
    """A built-in reference workload's buffers on a runtime
    (``hbg_workload_*``): ``submit(bind, step)`` orchestrates one decode
    step from C, ``verify(step)`` checks it against the host reference."""
    _order = 1

    def __init__(self, rt: "Runtime", name: str = "qwen3-14b",
                 layers: int = 0, seed: int = 0, def_size: int = 0) -> None:
        cfg = L.out_struct(L.WorkloadConfig_c)
        lib.hbg_workload_config_init(ctypes.addressof(cfg))
        self._name = name.encode()
        cfg.name = self._name
        cfg.layers = int(layers)
        cfg.seed = int(seed)
        cfg.def_size = int(def_size)
        p = c_void_p()
        _check(lib.hbg_workload_create(rt._ptr(), ctypes.addressof(cfg),
                                       byref(p)), "hbg_workload_create", rt)
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
