"""DLPack capsules and CUDA stream arguments, in pure Python (ctypes and
CPython's capsule API through ``ctypes.pythonapi``), shared by both
backends.

The structs are those of dlpack.h 0.6 (DLPACK_VERSION 60): unversioned
``"dltensor"`` capsules, the kind torch 1.13 and numpy 1.24 make and take.

Producing (``make_capsule``): every capsule gets its own DLManagedTensor,
allocated together with its shape and strides (one ctypes struct), kept
in a registry until its deleter runs. The deleter runs exactly once: by
the consumer, which renames the capsule "used_dltensor" and calls it when
it is done with the memory, or by the capsule's destructor when the
capsule is dropped unconsumed (its name still "dltensor").

Consuming (``consume``): the capsule is checked, read, and renamed
"used_dltensor"; the caller then owns the DLManagedTensor and calls
``Managed.release()`` (its deleter, once) when it no longer needs the
memory.
"""
import ctypes
import operator
import threading
from ctypes import (CFUNCTYPE, POINTER, PYFUNCTYPE, Structure, c_char_p,
                    c_int, c_int32, c_int64, c_uint8, c_uint16, c_uint64,
                    c_void_p, py_object)
from typing import Any, Optional, Sequence, Tuple

# ---- dlpack.h 0.6 ----

kDLCPU = 1
kDLCUDA = 2
kDLCUDAHost = 3
kDLCUDAManaged = 13

DEVICE_NAMES = {1: "kDLCPU", 2: "kDLCUDA", 3: "kDLCUDAHost", 4: "kDLOpenCL",
                7: "kDLVulkan", 8: "kDLMetal", 9: "kDLVPI", 10: "kDLROCM",
                11: "kDLROCMHost", 12: "kDLExtDev", 13: "kDLCUDAManaged",
                14: "kDLOneAPI", 15: "kDLWebGPU", 16: "kDLHexagon"}

kDLInt, kDLUInt, kDLFloat, kDLOpaqueHandle, kDLBfloat, kDLComplex = range(6)
_CODE_NAMES = {0: "int", 1: "uint", 2: "float", 3: "handle", 4: "bfloat",
               5: "complex", 6: "bool"}


def device_name(device_type: int) -> str:
    """``"kDLCUDA (2)"`` for a DLDeviceType value."""
    return "%s (%d)" % (DEVICE_NAMES.get(device_type, "unknown"),
                        device_type)


class DLDevice(Structure):
    _fields_ = [("device_type", c_int32), ("device_id", c_int32)]


class DLDataType(Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class DLTensor(Structure):
    _fields_ = [("data", c_void_p), ("device", DLDevice), ("ndim", c_int32),
                ("dtype", DLDataType), ("shape", POINTER(c_int64)),
                ("strides", POINTER(c_int64)), ("byte_offset", c_uint64)]


class DLManagedTensor(Structure):
    pass


#: void (*deleter)(DLManagedTensor *): called from C (ours) ...
DELETER = CFUNCTYPE(None, c_void_p)
#: ... and calling a producer's with the GIL held (numpy's needs it)
_CALL_DELETER = PYFUNCTYPE(None, c_void_p)

DLManagedTensor._fields_ = [("dl_tensor", DLTensor),
                            ("manager_ctx", c_void_p),
                            ("deleter", c_void_p)]

MAX_EXPORT_DIMS = 8


class _Export(Structure):
    """One capsule's DLManagedTensor with its shape and strides."""
    _fields_ = [("managed", DLManagedTensor),
                ("shape", c_int64 * MAX_EXPORT_DIMS),
                ("strides", c_int64 * MAX_EXPORT_DIMS)]


# ---- the capsule API (CPython's, through ctypes) ----

_api = ctypes.pythonapi
_DESTRUCTOR = CFUNCTYPE(None, c_void_p)
_api.PyCapsule_New.restype = py_object  # a new reference, taken over
_api.PyCapsule_New.argtypes = [c_void_p, c_void_p, _DESTRUCTOR]
_api.PyCapsule_GetPointer.restype = c_void_p
_api.PyCapsule_GetPointer.argtypes = [py_object, c_char_p]
_api.PyCapsule_SetName.restype = c_int
_api.PyCapsule_SetName.argtypes = [py_object, c_void_p]
_api.PyCapsule_IsValid.restype = c_int
_api.PyCapsule_IsValid.argtypes = [py_object, c_char_p]
_api.PyCapsule_GetName.restype = c_char_p
_api.PyCapsule_GetName.argtypes = [py_object]
# The destructor gets a capsule whose refcount is 0: only raw pointers.
_is_valid_raw = ctypes.PYFUNCTYPE(c_int, c_void_p, c_char_p)(
    ("PyCapsule_IsValid", _api))
_get_pointer_raw = ctypes.PYFUNCTYPE(c_void_p, c_void_p, c_char_p)(
    ("PyCapsule_GetPointer", _api))

# Capsule names live as long as the module (a capsule keeps the pointer).
_NAME = ctypes.create_string_buffer(b"dltensor")
_USED_NAME = ctypes.create_string_buffer(b"used_dltensor")


def is_capsule(obj: Any) -> bool:
    return type(obj).__name__ == "PyCapsule"


def capsule_name(cap: Any) -> Optional[str]:
    n = _api.PyCapsule_GetName(cap)
    return None if n is None else n.decode(errors="replace")


# ---- producing ----

_lock = threading.Lock()
_exports = {}  # DLManagedTensor address -> (_Export, owner)
stats = {"exported": 0, "deleted": 0, "double_delete": 0}


@DELETER
def _export_deleter(ptr):
    with _lock:
        entry = _exports.pop(ptr, None)
        if entry is None:
            stats["double_delete"] += 1
            return
        stats["deleted"] += 1
    release = getattr(entry[1], "_dlpack_released", None)
    if release is not None:
        try:
            release()
        except Exception:  # pragma: no cover - a deleter cannot raise
            pass


_DELETER_ADDR = ctypes.cast(_export_deleter, c_void_p).value


@_DESTRUCTOR
def _capsule_destructor(cap):
    # A capsule dropped unconsumed still has its name: free it here. A
    # consumer renamed it "used_dltensor" and owns the deleter call.
    if _is_valid_raw(cap, b"dltensor"):
        ptr = _get_pointer_raw(cap, b"dltensor")
        if ptr:
            _export_deleter(ptr)


def live_exports() -> int:
    """Capsules made and not yet deleted (consumed or not)."""
    return len(_exports)


def make_capsule(data: int, device: Tuple[int, int], code: int, bits: int,
                 shape: Sequence[int], strides: Optional[Sequence[int]],
                 owner: Any) -> Any:
    """A "dltensor" capsule of a new DLManagedTensor: data (byte_offset
    0), device (type, id), dtype (code, bits, 1 lane), shape, strides in
    elements (None: written as compact row-major ones; torch reads
    strides, so they are always given). owner is kept alive until the
    deleter runs; its ``_dlpack_released()``, if it has one, is called
    then."""
    shape = [operator.index(d) for d in shape]
    if len(shape) > MAX_EXPORT_DIMS:
        raise ValueError("at most %d dims" % MAX_EXPORT_DIMS)
    if strides is None:
        strides, acc = [0] * len(shape), 1
        for i in range(len(shape) - 1, -1, -1):
            strides[i] = acc
            acc *= max(1, shape[i])
    ex = _Export()
    m = ex.managed
    t = m.dl_tensor
    t.data = data or None
    t.device.device_type, t.device.device_id = device
    t.ndim = len(shape)
    t.dtype.code, t.dtype.bits, t.dtype.lanes = code, bits, 1
    for i, (d, s) in enumerate(zip(shape, strides)):
        ex.shape[i], ex.strides[i] = d, s
    base = ctypes.addressof(ex)
    t.shape = ctypes.cast(base + _Export.shape.offset, POINTER(c_int64))
    t.strides = ctypes.cast(base + _Export.strides.offset, POINTER(c_int64))
    t.byte_offset = 0
    m.manager_ctx = base
    m.deleter = _DELETER_ADDR
    with _lock:
        _exports[base] = (ex, owner)
        stats["exported"] += 1
    try:
        return _api.PyCapsule_New(base, ctypes.addressof(_NAME),
                                  _capsule_destructor)
    except BaseException:
        with _lock:
            _exports.pop(base, None)
        raise


# ---- consuming ----

class Managed:
    """A consumed capsule's DLManagedTensor, read: ``data`` (its data
    pointer plus byte_offset), ``device`` (type, id), ``code``, ``bits``,
    ``lanes``, ``shape``, ``strides`` (elements; None when the producer
    gave NULL: compact row-major). ``release()`` calls its deleter, once."""

    def __init__(self, ptr: int, keep: Any = None) -> None:
        self.ptr = ptr
        self._keep = keep  # what a producer without a deleter needs
        m = DLManagedTensor.from_address(ptr)
        t = m.dl_tensor
        self.data = (t.data or 0) + t.byte_offset
        self.raw_data = t.data or 0
        self.byte_offset = t.byte_offset
        self.device = (t.device.device_type, t.device.device_id)
        self.code, self.bits, self.lanes = (t.dtype.code, t.dtype.bits,
                                            t.dtype.lanes)
        n = t.ndim
        if n < 0:
            raise ValueError("DLTensor.ndim %d" % n)
        self.shape = tuple(t.shape[i] for i in range(n)) if n else ()
        self.strides = (tuple(t.strides[i] for i in range(n))
                        if n and t.strides else None)
        self._deleter = m.deleter
        self._released = False

    def release(self) -> None:
        """Call the producer's deleter (exactly once; later calls do
        nothing)."""
        if self._released:
            return
        self._released = True
        self._keep = None
        if self._deleter:
            _CALL_DELETER(self._deleter)(self.ptr)

    @property
    def released(self) -> bool:
        return self._released


def consume(cap: Any) -> "Managed":
    """Take a "dltensor" capsule: read its DLManagedTensor and rename the
    capsule "used_dltensor" (so its destructor leaves the tensor to us).
    A capsule consumed already raises ValueError; anything else that is
    not a dltensor capsule TypeError."""
    if not is_capsule(cap):
        raise TypeError("not a PyCapsule: %s" % type(cap).__name__)
    name = capsule_name(cap)
    if name != "dltensor":
        if name == "used_dltensor":
            raise ValueError("the DLPack capsule was consumed already "
                             "(named \"used_dltensor\"): a capsule can be "
                             "imported once")
        raise TypeError("not a DLPack capsule: named %r%s" % (
            name, " (a versioned capsule: hbg takes DLPack 0.x \"dltensor\" "
            "capsules)" if name == "dltensor_versioned" else ""))
    ptr = _api.PyCapsule_GetPointer(cap, b"dltensor")
    if not ptr:  # pragma: no cover - a dltensor capsule with NULL
        raise ValueError("the DLPack capsule holds NULL")
    m = Managed(ptr)
    if _api.PyCapsule_SetName(cap, ctypes.addressof(_USED_NAME)) != 0:
        raise RuntimeError("PyCapsule_SetName failed")  # pragma: no cover
    return m


def peek(cap: Any) -> "Managed":
    """Read a "dltensor" capsule without consuming it (for tests and
    checks: do not release the result)."""
    if capsule_name(cap) != "dltensor":
        raise ValueError("not an unconsumed dltensor capsule")
    return Managed(_api.PyCapsule_GetPointer(cap, b"dltensor"))


def extent(shape: Sequence[int], strides: Optional[Sequence[int]],
           itemsize: int) -> int:
    """Bytes from element 0 to one past the last element (0 for a
    zero-size tensor). Strides in elements, None for compact row-major;
    negative strides are the caller's to refuse."""
    if any(d == 0 for d in shape):
        return 0
    if strides is None:
        n = 1
        for d in shape:
            n *= d
        return n * itemsize
    last = 0
    for d, s in zip(shape, strides):
        last += (d - 1) * s
    return (last + 1) * itemsize


# ---- CUDA streams ----

def cuda_stream_of(stream: Any, what: str = "stream") -> int:
    """The CUstream value a stream argument names:

    - an int: the CUstream itself (0 the NULL stream, which is the legacy
      default stream; 1 CU_STREAM_LEGACY; 2 CU_STREAM_PER_THREAD; else a
      pointer), 0 .. 2**64-1;
    - an object with ``__cuda_stream__()`` returning ``(0, ptr)`` (the
      CUDA stream protocol, version 0);
    - an object with an int ``.cuda_stream`` (torch.cuda.Stream,
      torch.cuda.ExternalStream, cupy's streams have ``.ptr``: pass it).

    A bool, None or anything else raises TypeError naming its type; a
    negative int or one past 2**64-1 ValueError."""
    if stream is None or isinstance(stream, bool):
        raise TypeError("%s: %s is not a CUDA stream" % (
            what, type(stream).__name__))
    if isinstance(stream, int):
        return _stream_int(stream, what)
    proto = getattr(type(stream), "__cuda_stream__", None)
    if proto is not None:
        r = stream.__cuda_stream__()
        if not (isinstance(r, tuple) and len(r) == 2):
            raise TypeError("%s: %s.__cuda_stream__() returned %r, not "
                            "(version, handle)" % (
                                what, type(stream).__name__, r))
        ver, ptr = r
        if ver != 0:
            raise ValueError("%s: %s.__cuda_stream__() has version %r; hbg "
                             "reads version 0" % (
                                 what, type(stream).__name__, ver))
        if isinstance(ptr, bool) or not isinstance(ptr, int):
            raise TypeError("%s: %s.__cuda_stream__() handle is a %s, not "
                            "an int" % (what, type(stream).__name__,
                                        type(ptr).__name__))
        return _stream_int(ptr, what)
    cs = getattr(stream, "cuda_stream", None)
    if cs is not None:
        if isinstance(cs, bool) or not isinstance(cs, int):
            raise TypeError("%s: %s.cuda_stream is a %s, not an int" % (
                what, type(stream).__name__, type(cs).__name__))
        return _stream_int(cs, what)
    raise TypeError("%s: %s is not a stream (want an int CUstream, an "
                    "object with __cuda_stream__() or .cuda_stream such "
                    "as torch.cuda.Stream, or an hbg.Queue)" % (
                        what, type(stream).__name__))


def _stream_int(v, what):
    if not 0 <= v < 1 << 64:
        raise ValueError("%s: %d is not a CUstream (0 .. 2**64-1)" % (
            what, v))
    return v


def dlpack_stream_arg(handle: Optional[int]) -> int:
    """The ``stream=`` a consumer passes a CUDA producer's ``__dlpack__``
    for a CUstream value it will use: 1 (legacy default) for the NULL
    stream, since DLPack reserves 0; None (no stream named) is the legacy
    default stream too."""
    if handle is None or handle == 0:
        return 1
    return handle
