"""DLPack interop: Runtime.from_dlpack (import, zero-copy), Buffer /
BufferView __dlpack__ (export), with numpy and torch; the capsule
handling of hbg._dlpack.

torch is optional: its tests skip where it is not installed, except under
ctest (HBG_TEST_REQUIRE_TORCH=1), where a missing torch fails. The tests
that need libhbg's hbg_buffer_import / hbg_buffer_host_ptr skip where the
library lacks them, except with HBG_TEST_REQUIRE_INTEROP=1."""
import ctypes
import gc
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import hbg
from hbg import _dlpack as DL
from hbg import _lib as L

REQUIRE_TORCH = os.environ.get("HBG_TEST_REQUIRE_TORCH") == "1"
try:
    import torch
except ImportError:
    if REQUIRE_TORCH:
        raise ImportError("HBG_TEST_REQUIRE_TORCH=1 but torch does not import "
                          "in %s (Debian: apt-get install python3-torch)" %
                          sys.executable)
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")
REQUIRE_INTEROP = os.environ.get("HBG_TEST_REQUIRE_INTEROP") == "1"
needs_interop = pytest.mark.skipif(
    not (L.HAVE_IMPORT and L.HAVE_HOST_PTR) and not REQUIRE_INTEROP,
    reason="libhbg lacks hbg_buffer_import / hbg_buffer_host_ptr (issue 38)")


class Counted:
    """The owner of a capsule made by make_capsule: counts the deleter."""
    def __init__(self):
        self.released = 0

    def _dlpack_released(self):
        self.released += 1


class Producer:
    """A DLPack producer around a capsule (what torch / numpy look like)."""
    def __init__(self, cap, device=(DL.kDLCPU, 0)):
        self.cap, self.device, self.calls = cap, device, []

    def __dlpack__(self, **kw):
        self.calls.append(kw)
        return self.cap

    def __dlpack_device__(self):
        return self.device


def host_capsule(arr, owner, shape=None, strides=None, offset=0, code=2,
                 bits=32, device=(DL.kDLCPU, 0)):
    """A capsule of numpy memory made by hbg's own producer code."""
    return DL.make_capsule(arr.ctypes.data + offset, device, code, bits,
                           arr.shape if shape is None else shape, strides,
                           owner)


# ---- the structs and capsules (no libhbg call) ----

def test_struct_layout_matches_dlpack_h(tmp_path):
    assert ctypes.sizeof(DL.DLDevice) == 8
    assert ctypes.sizeof(DL.DLDataType) == 4
    assert [getattr(DL.DLTensor, f).offset for f in (
        "data", "device", "ndim", "dtype", "shape", "strides",
        "byte_offset")] == [0, 8, 16, 20, 24, 32, 40]
    assert ctypes.sizeof(DL.DLTensor) == 48
    assert DL.DLManagedTensor.manager_ctx.offset == 48
    assert DL.DLManagedTensor.deleter.offset == 56
    assert ctypes.sizeof(DL.DLManagedTensor) == 64
    hdr = "/usr/include/dlpack/dlpack.h"
    cc = shutil.which("cc")
    if not (cc and os.path.exists(hdr)):
        return
    src = ("#include <dlpack/dlpack.h>\n#include <stddef.h>\n#include <stdio.h>"
           "\nint main(void){printf(\"%zu %zu %zu %zu %zu %zu %zu %zu %zu\","
           "sizeof(DLTensor),offsetof(DLTensor,device),offsetof(DLTensor,"
           "ndim),offsetof(DLTensor,dtype),offsetof(DLTensor,shape),"
           "offsetof(DLTensor,strides),offsetof(DLTensor,byte_offset),"
           "offsetof(DLManagedTensor,deleter),sizeof(DLManagedTensor));"
           "return 0;}\n")
    exe = str(tmp_path / "layout")
    d = subprocess.run([cc, "-x", "c", "-", "-o", exe], input=src,
                       capture_output=True, text=True)
    assert d.returncode == 0, d.stderr
    got = subprocess.run([exe], capture_output=True, text=True).stdout
    assert got.split() == ["48", "8", "16", "20", "24", "32", "40", "56",
                           "64"]


def test_capsule_consumed_by_torch_and_numpy_deleter_once():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    o = Counted()
    cap = host_capsule(a, o, shape=(2, 4), offset=16)
    m = DL.peek(cap)
    assert (m.shape, m.strides, m.byte_offset) == ((2, 4), (4, 1), 0)
    n = np.from_dlpack(Producer(cap))
    assert DL.capsule_name(cap) == "used_dltensor"
    assert np.array_equal(n, a[1:])
    del cap
    gc.collect()
    assert o.released == 0  # the array still views it
    del n
    gc.collect()
    assert o.released == 1
    if torch is not None:
        t = torch.from_dlpack(Producer(host_capsule(a, o)))
        assert torch.equal(t, torch.from_numpy(a))
        del t
        gc.collect()
        assert o.released == 2


def test_capsule_dropped_unconsumed_frees():
    a = np.zeros(4, np.float32)
    o = Counted()
    before = DL.live_exports()
    cap = host_capsule(a, o)
    assert DL.live_exports() == before + 1
    del cap
    gc.collect()
    assert o.released == 1 and DL.live_exports() == before


def test_consuming_twice_raises():
    a = np.arange(4, dtype=np.float32)
    m = DL.consume(a.__dlpack__())
    cap = a.__dlpack__()
    DL.consume(cap).release()
    with pytest.raises(ValueError, match="consumed already"):
        DL.consume(cap)
    m.release()
    m.release()  # the deleter runs once
    with pytest.raises(TypeError):
        DL.consume(object())


def test_consume_reads_null_and_explicit_strides():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    m = DL.consume(a.__dlpack__())
    assert m.strides is None and m.shape == (3, 4)  # numpy: NULL strides
    assert m.data == a.ctypes.data and m.device == (DL.kDLCPU, 0)
    m.release()
    m = DL.consume(a[:, ::2].__dlpack__())
    assert m.strides == (4, 2)
    m.release()
    if torch is not None:
        t = torch.arange(12, dtype=torch.float32).reshape(3, 4)
        m = DL.consume(t.__dlpack__())
        assert m.strides == (4, 1)  # torch: always explicit
        m.release()
        m = DL.consume(t[1:, 1:].__dlpack__())  # offset folded, byte_offset 0
        assert m.byte_offset == 0 and m.data == t.data_ptr() + 20
        m.release()


# ---- import and export through libhbg ----

def test_dtype_mapping(rt1):
    assert {d: hbg._core._DL_OF[d] for d in hbg.DType} == {
        hbg.DType.F32: (2, 32), hbg.DType.F16: (2, 16),
        hbg.DType.BF16: (4, 16), hbg.DType.I32: (0, 32),
        hbg.DType.I64: (0, 64), hbg.DType.U8: (1, 8)}


@needs_interop
@pytest.mark.parametrize("dt", ["float32", "float16", "int32", "int64",
                                "uint8"])
def test_numpy_round_trip(rt1, dt):
    a = (np.arange(24) % 7).astype(dt).reshape(4, 6)
    b = rt1.from_dlpack(a)
    assert b.imported and not b.readonly
    assert b.shape == (4, 6) and b.strides is None and b.nbytes == a.nbytes
    assert b.dtype == np.dtype(dt)
    assert b.tensor().shape == (4, 6)
    assert np.array_equal(b.numpy().reshape(4, 6), a)  # device reads
    b.write(np.full((4, 6), 3, dt))                    # writes the array
    assert (a == 3).all()
    n = np.from_dlpack(b)                             # and back, no copy
    assert n.shape == (4, 6) and n.dtype == np.dtype(dt)
    a[0, 0] = 5
    assert n[0, 0] == 5


@needs_interop
def test_task_reads_and_writes_numpy_in_place(rt1):
    x = np.arange(16, dtype=np.float32)
    y = np.zeros(16, np.float32)
    bx, by = rt1.from_dlpack(x), rt1.from_dlpack(y)
    with rt1.bind() as b:
        b.task(hbg.Kernel.SCALE, [bx.tensor(), by.tensor(mode="out")], [2.0])
    assert np.array_equal(y, x * 2)


@needs_interop
@needs_torch
@pytest.mark.parametrize("dt", ["float32", "float16", "bfloat16", "int32",
                                "int64", "uint8"])
def test_torch_round_trip_dtypes(rt1, dt):
    tdt = getattr(torch, dt)
    t = (torch.arange(12) % 5).to(tdt).reshape(3, 4)
    b = rt1.from_dlpack(t)
    want = hbg.DType.BF16 if dt == "bfloat16" else hbg._core._dtype(dt)
    assert b.tensor().dtype == want and b.shape == (3, 4)
    back = torch.from_dlpack(b)
    assert back.dtype == tdt and back.shape == (3, 4)
    assert back.data_ptr() == t.data_ptr()  # the very same memory
    back[1, 1] = 4
    assert t[1, 1] == 4


@needs_interop
@needs_torch
def test_export_written_by_torch_read_by_numpy(rt1):
    buf = rt1.alloc(64, dtype="f32")
    buf.write(np.zeros(16, np.float32))
    t = torch.from_dlpack(buf)
    n = np.from_dlpack(buf)
    assert t.shape == (16,) and t.dtype == torch.float32
    t[3] = 7.5                                # through torch ...
    assert n[3] == 7.5                        # ... seen by numpy
    assert buf.numpy()[3] == 7.5              # ... and by the device
    n2 = np.from_dlpack(buf.view((4, 4)))
    assert n2[0, 3] == 7.5


@needs_interop
def test_view_export_folds_offset(rt1):
    buf = rt1.alloc(256, dtype="f32")
    buf.write(np.arange(64, dtype=np.float32))
    whole = DL.peek(buf.__dlpack__())
    v = buf.view((2, 4), offset=64, strides=(8, 1))
    cap = v.__dlpack__()
    m = DL.peek(cap)
    assert m.byte_offset == 0 and m.raw_data == whole.raw_data + 64
    assert (m.shape, m.strides, m.device) == ((2, 4), (8, 1), (1, 0))
    assert (m.code, m.bits, m.lanes) == (2, 32, 1)
    got = np.from_dlpack(Producer(cap))
    assert np.array_equal(got, np.arange(64, dtype=np.float32)[16:32]
                          .reshape(2, 8)[:, :4])
    if torch is not None:  # torch ignores byte_offset: it must be 0
        t = torch.from_dlpack(buf.view((4,), offset=16))
        assert t.tolist() == [4.0, 5.0, 6.0, 7.0]
    with pytest.raises(hbg.ArgumentError, match="outside"):
        buf.view((64,), offset=4)
    with pytest.raises(hbg.ArgumentError, match="multiple"):
        buf.view((4,), offset=2)


@needs_interop
def test_import_null_vs_explicit_strides_and_noncontiguous(rt1):
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    b0 = rt1.from_dlpack(a)                   # NULL strides
    assert b0.strides is None
    b1 = rt1.from_dlpack(a[:, ::2])           # explicit, non-compact
    assert b1.shape == (4, 3) and b1.strides == (6, 2)
    assert b1.addr == b0.addr                 # inside a's import: reused
    assert b1.nbytes == (3 * 6 + 2 * 2 + 1) * 4  # the covered extent
    out = np.zeros((4, 3), np.float32)
    bo = rt1.from_dlpack(out)
    with rt1.bind() as b:
        b.task(hbg.Kernel.COPY, [b1.tensor(), bo.tensor(mode="out")])
    assert np.array_equal(out, a[:, ::2])
    if torch is not None:
        t = torch.arange(24, dtype=torch.float32).reshape(4, 6)
        bt = rt1.from_dlpack(t)               # explicit but compact
        assert bt.strides is None and bt.shape == (4, 6)
        bt2 = rt1.from_dlpack(t.t())          # transposed
        assert bt2.strides == (1, 6)


@needs_interop
def test_view_imported_inside_an_import(rt1):
    a = np.arange(32, dtype=np.float32)
    base = rt1.from_dlpack(a)
    part = rt1.from_dlpack(a[8:16])           # the library refuses overlap:
    assert part.addr == base.addr + 32        # hbg reuses the import
    with pytest.raises(hbg.StateError, match="views"):
        base.free()
    out = np.zeros(8, np.float32)
    bo = rt1.from_dlpack(out)
    with rt1.bind() as b:
        b.task(hbg.Kernel.COPY, [part.tensor(), bo.tensor(mode="out")])
    assert np.array_equal(out, a[8:16])
    part.free()
    base.free()
    other = np.arange(4, dtype=np.float32)
    ob = rt1.from_dlpack(other)
    with pytest.raises(hbg.ArgumentError, match="overlaps"):
        rt1.from_dlpack(np.lib.stride_tricks.as_strided(
            other, shape=(8,), strides=(4,)))   # past the import: refused
    ob.free()


@needs_interop
def test_negative_strides_refused(rt1):
    a = np.arange(8, dtype=np.float32)
    with pytest.raises(hbg.ArgumentError, match="negative strides"):
        rt1.from_dlpack(a[::-1])


@needs_interop
def test_readonly_import_refused_as_output(rt1):
    src = np.arange(8, dtype=np.float32)
    src.flags.writeable = False
    b = rt1.from_dlpack(src)
    assert b.readonly and b.imported
    y = np.zeros(8, np.float32)
    by = rt1.from_dlpack(y)
    with rt1.bind() as bd:                     # reading it is fine
        bd.task(hbg.Kernel.COPY, [b.tensor(), by.tensor(mode="out")])
    assert np.array_equal(y, src)
    with pytest.raises(hbg.ArgumentError, match=r"numpy.ndarray float32 "
                       r"\(8,\).*read-only"):
        b.tensor(mode="out")
    with pytest.raises(hbg.ArgumentError, match="read-only"):
        b.write(np.zeros(8, np.float32))
    with pytest.raises(BufferError):
        b.__dlpack__()
    raw = hbg.Tensor(b.addr, 8, "f32", "out")  # not through the buffer
    with rt1.bind() as bd:
        with pytest.raises(hbg.ArgumentError, match=r"Bind.task: argument 1 "
                           r"\(mode OUT\) writes numpy.ndarray float32"):
            bd.task(hbg.Kernel.COPY, [by.tensor(), raw])
        with pytest.raises(hbg.ArgumentError, match="boundary tensor 1"):
            bd.graph(7, [by.tensor(), raw], record=lambda r: None)
        with pytest.raises(hbg.ArgumentError, match="replay 0, boundary "
                           "tensor 1"):
            bd.graphs(7, hbg.pack([[by.tensor(), raw]]),
                      record=lambda r: None)
        bd.task(hbg.Kernel.NOP, [])


@needs_interop
def test_import_deleter_once_on_free_gc_and_close():
    a = np.arange(8, dtype=np.float32)
    o = Counted()
    with hbg.Runtime(policy="coalesced", device="sim") as rt:
        b = rt.from_dlpack(host_capsule(a, o))
        assert o.released == 0
        b.free()
        assert o.released == 1
        with pytest.raises(hbg.StateError):
            b.free()
        assert o.released == 1
        b = rt.from_dlpack(Producer(host_capsule(a, o)))
        del b
        gc.collect()
        assert o.released == 2
        keep = rt.from_dlpack(host_capsule(a, o))
    assert o.released == 3  # rt.close() released it
    del keep
    gc.collect()
    assert o.released == 3


@needs_interop
def test_import_of_a_consumed_capsule_raises(rt1):
    a = np.arange(4, dtype=np.float32)
    cap = a.__dlpack__()
    b = rt1.from_dlpack(cap)
    with pytest.raises(ValueError, match="consumed already"):
        rt1.from_dlpack(cap)
    b.free()


@needs_interop
def test_export_deleter_once_consumed_dropped_and_after_close():
    with hbg.Runtime(policy="coalesced", device="sim") as rt:
        buf = rt.alloc(64, dtype="f32")
        st = dict(DL.stats)
        n = np.from_dlpack(buf)                # consumed
        assert buf._exports == 1
        with pytest.raises(hbg.StateError, match="export"):
            buf.free()
        del n
        gc.collect()
        assert buf._exports == 0
        cap = buf.__dlpack__()                 # dropped unconsumed
        del cap
        gc.collect()
        assert DL.stats["deleted"] - st["deleted"] == 2
        n = np.from_dlpack(buf)                # alive past close
    del n
    gc.collect()
    assert DL.stats["deleted"] - st["deleted"] == 3
    assert DL.stats["double_delete"] == st["double_delete"]


@needs_interop
def test_export_keeps_the_buffer_alive(rt1):
    n = np.from_dlpack(rt1.buffer(np.arange(4, dtype=np.float32)))
    gc.collect()  # the buffer has no name left; the capsule keeps it
    assert n.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_device_is_kdlcpu_never_cudahost(rt1):
    buf = rt1.alloc(16, dtype="f32")
    assert buf.__dlpack_device__() == (DL.kDLCPU, 0)
    assert buf.view().__dlpack_device__() == (1, 0)
    o = Counted()
    a = np.zeros(4, np.float32)
    with pytest.raises(hbg.ArgumentError, match=r"kDLCUDAHost \(3\)"):
        rt1.from_dlpack(Producer(host_capsule(a, o), device=(3, 0)))
    # a capsule claiming it: consumed, refused, released
    with pytest.raises(hbg.ArgumentError, match=r"kDLCUDA \(2\)"):
        rt1.from_dlpack(host_capsule(a, o, device=(2, 0)))
    gc.collect()
    assert o.released == 2


def test_unsupported_dtype_refused_naming_it(rt1):
    o = Counted()
    a = np.zeros(4, np.float64)
    with pytest.raises(hbg.ArgumentError, match="float64"):
        rt1.from_dlpack(host_capsule(a, o, code=2, bits=64))
    assert o.released == 1


def test_max_version_and_copy_keywords(rt1):
    buf = rt1.alloc(16, dtype="f32")
    with pytest.raises(BufferError, match="copy"):
        buf.__dlpack__(copy=True)
    with pytest.raises(BufferError, match="dl_device"):
        buf.__dlpack__(dl_device=(2, 0))
    if L.HAVE_HOST_PTR or REQUIRE_INTEROP:
        cap = buf.__dlpack__(max_version=(1, 0), dl_device=(1, 0), copy=False)
        assert DL.capsule_name(cap) == "dltensor"  # unversioned


@needs_interop
def test_zero_size(rt1):
    a = np.zeros((0, 3), np.float32)
    b = rt1.from_dlpack(a)
    assert b.nbytes == 0 and b.shape == (0, 3)
    with pytest.raises(hbg.ArgumentError):
        b.tensor()  # hbg tensors have no zero dim
    n = np.from_dlpack(b)
    assert n.shape == (0, 3)
    del n
    b.free()
    buf = rt1.alloc(16, dtype="f32")
    assert np.from_dlpack(buf.view((0,))).shape == (0,)
    if torch is not None:
        assert rt1.from_dlpack(torch.zeros(0)).shape == (0,)
