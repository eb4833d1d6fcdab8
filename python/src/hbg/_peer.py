"""Peer executors (``hbg_peer.h``): the same decode step run the way a
runtime without hbg runs it (one launch per kernel call, or a captured CUDA
graph replayed), for measurement beside hbg's policies. They need the cuda
backend."""
import ctypes
import dataclasses
import weakref
from ctypes import byref, c_int, c_void_p
from typing import Any, List

from . import _lib as L
from ._core import _check
from ._errors import ArgumentError, StateError

lib = L.lib


def peers() -> List[str]:
    """Names of the peer kinds this library has (``hbg_peer_name``), or []
    for a library without peers."""
    if not L.HAVE_PEER:
        return []
    out = []
    for k in range(1, 16):
        s = lib.hbg_peer_name(k)
        if s:
            out.append(s.decode())
    return out


@dataclasses.dataclass(frozen=True)
class PeerStats:
    """One step of a peer (``hbg_peer_stats``); times in nanoseconds."""
    kind: int
    control_plane_ns: int
    exec_ns: int
    device_ns: int
    nodes: int
    launches: int
    updates: int
    capture_ns: int
    instantiate_ns: int


def _destroy_peer(cell):
    if cell[0] is not None:
        lib.hbg_peer_destroy(cell[0])
    cell[0] = None


class Peer:
    """A peer executor of `kind` ("eager" or "cuda-graph") for a Workload,
    on its runtime's device: ``launch(step)`` then ``wait()`` (a PeerStats);
    ``run(step)`` does both. Closed before its workload."""
    _order = 0.5

    def __init__(self, workload: Any, kind: str) -> None:
        if not L.HAVE_PEER:
            raise StateError(-4, message="this libhbg has no peer executors")
        k = c_int()
        if lib.hbg_peer_parse(str(kind).encode(), byref(k)) < 0:
            raise ArgumentError(-1, message="unknown peer kind %r (have %s)" %
                                (kind, ", ".join(peers())))
        p = c_void_p()
        rt = workload.runtime
        _check(lib.hbg_peer_create(workload._ptr(), k.value, byref(p)),
               "hbg_peer_create", rt)
        self.workload = workload
        self.kind = str(kind)
        self._cell = [p.value]
        self._fin = weakref.finalize(self, _destroy_peer, self._cell)
        rt._h.children.add(self)
        workload._peers.add(self)

    def _release(self):
        self._fin()

    def _ptr(self):
        self.workload._ptr()
        if self._cell[0] is None:
            raise StateError(-7, message="peer is closed")
        return self._cell[0]

    def close(self) -> None:
        """Wait for a launched step and free the peer. Idempotent."""
        self._release()

    def __enter__(self) -> "Peer":
        return self

    def __exit__(self, *exc: Any) -> bool:
        self.close()
        return False

    def launch(self, step: int) -> None:
        """Launch decode step `step` (asynchronous)."""
        _check(lib.hbg_peer_launch(self._ptr(), int(step)), "hbg_peer_launch",
               self.workload.runtime)

    def wait(self) -> "PeerStats":
        """Wait for the launched step; returns its PeerStats."""
        st = L.out_struct(L.PeerStats_c)
        st.struct_size = ctypes.sizeof(L.PeerStats_c)
        _check(lib.hbg_peer_wait(self._ptr(), ctypes.addressof(st)),
               "hbg_peer_wait", self.workload.runtime)
        return PeerStats(*[getattr(st, f.name)
                           for f in dataclasses.fields(PeerStats)])

    def run(self, step: int) -> "PeerStats":
        """launch(step) then wait()."""
        self.launch(step)
        return self.wait()
