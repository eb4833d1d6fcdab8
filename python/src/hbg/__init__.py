"""hbg -- host-built graphs, from Python.

The hbg C library from Python: the per-task / per-layer / per-bind calls
through the C extension hbg._native (stable ABI) when it was built, ctypes
otherwise (``hbg.backend``; HBG_PY_NATIVE=0 forces ctypes). The library
is found through HBG_LIBRARY, then a copy next to this package, then the
system's search path.

    import hbg, numpy as np
    with hbg.Runtime(policy="coalesced") as rt:
        x = rt.buffer(np.ones(256, np.float32))
        y = rt.alloc(x.nbytes)
        with rt.bind() as b:
            b.task(hbg.Kernel.SCALE, [x.tensor(256), y.tensor(256, mode="out")],
                   scalars=[hbg.Scalar.static(2.0)])
        print(y.numpy()[:4], b.stats.control_plane_ns)

Main objects: Runtime, Buffer, HostBuffer, Tensor, Bind (task / graph / graphs),
Queue and BufferView (DLPack interop: Runtime.from_dlpack, torch.from_dlpack),
Recorder (inside record callbacks), Workload, bench() and BenchResult.
Errors: HbgError and its families ArgumentError, StateError, DeviceError,
ImageError; OutOfRangeError (an ArgumentError and an OverflowError: a
number its C field cannot hold) and DeviceSideError (an error the device
reported at Bind.wait, with the failing task and node).
"""
from ._lib import HAVE_BATCH, LibraryNotFoundError
from . import _backend
from . import _lib as _L
from ._errors import (ArgumentError, DeviceError, DeviceSideError, HbgError,
                      ImageError, OutOfRangeError, StateError, err_name,
                      error_class, strerror)
from ._core import (Access, Bind, BindStats, Buffer, DeviceStats, DType,
                    BufferView, HostBuffer, Kernel, Queue, Recorder, Runtime,
                    Scalar, Tensor, TensorArray,
                    TraceEvent, UserKernel,
                    Workload, WorkloadInfo, WorkloadNode, devices,
                    dtype_size, f32,
                    image_dump, pack, policies, version, workloads,
                    workload_bytes)
from ._bench import BenchResult, CliNotFoundError, bench, find_cli
from ._peer import Peer, PeerStats, peers

__version__ = version()
library_path = _L.lib._hbg_path
"""The path libhbg was loaded from."""
backend = _backend.NAME
"""Which code makes the per-task / per-layer calls: "native" (the C
extension hbg._native) or "ctypes" (no extension built, or
HBG_PY_NATIVE=0); ``hbg._backend.native_error`` says why not native."""

__all__ = [
    "Access", "ArgumentError", "BenchResult", "Bind", "BindStats", "Buffer",
    "BufferView", "Queue",
    "CliNotFoundError", "DType", "DeviceError", "DeviceSideError",
    "DeviceStats", "HAVE_BATCH", "OutOfRangeError",
    "HbgError", "HostBuffer", "ImageError", "Kernel", "LibraryNotFoundError", "Peer",
    "PeerStats", "Recorder",
    "Runtime", "Scalar", "StateError", "Tensor", "TensorArray", "pack", "TraceEvent",
    "UserKernel", "Workload",
    "WorkloadInfo", "WorkloadNode", "bench", "devices", "dtype_size", "err_name",
    "backend", "error_class", "f32", "find_cli", "image_dump", "library_path",
    "peers", "policies", "strerror", "version", "workloads", "workload_bytes",
    "__version__",
]
