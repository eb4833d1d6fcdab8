"""Stream arguments: Bind.launch(stream=), Runtime.from_dlpack(stream=),
hbg.Queue, and the coercion of CUDA stream objects (hbg._dlpack)."""
import gc

import pytest

import hbg
from hbg import _dlpack as DL
from hbg import _lib as L

needs_launch_on = pytest.mark.skipif(
    not L.HAVE_LAUNCH_ON, reason="libhbg lacks hbg_bind_launch_on (issue 38)")


class CudaStreamProto:  # the CUDA stream protocol, version 0
    def __init__(self, ptr, version=0):
        self.ptr, self.version = ptr, version

    def __cuda_stream__(self):
        return (self.version, self.ptr)


class TorchLikeStream:  # torch.cuda.Stream / ExternalStream
    def __init__(self, ptr):
        self.cuda_stream = ptr


# ---- coercion (pure Python) ----

def test_int_is_the_custream_itself():
    assert DL.cuda_stream_of(0) == 0  # the NULL (legacy default) stream
    assert DL.cuda_stream_of(1) == 1  # CU_STREAM_LEGACY
    assert DL.cuda_stream_of(2) == 2  # CU_STREAM_PER_THREAD
    assert DL.cuda_stream_of(0x7f0012345600) == 0x7f0012345600
    assert DL.cuda_stream_of(2**64 - 1) == 2**64 - 1


def test_cuda_stream_protocol_and_attribute():
    assert DL.cuda_stream_of(CudaStreamProto(0xabc0)) == 0xabc0
    assert DL.cuda_stream_of(TorchLikeStream(0xdef0)) == 0xdef0
    # the protocol wins over the attribute
    class Both(CudaStreamProto):
        cuda_stream = 7
    assert DL.cuda_stream_of(Both(9)) == 9


@pytest.mark.parametrize("bad", [None, True, 1.5, "0x10", object(), [1],
                                 b"\x00"])
def test_bad_stream_types_raise_typeerror_naming_the_type(bad):
    with pytest.raises(TypeError, match=type(bad).__name__):
        DL.cuda_stream_of(bad)


def test_bad_stream_values():
    with pytest.raises(ValueError, match="-1"):
        DL.cuda_stream_of(-1)
    with pytest.raises(ValueError):
        DL.cuda_stream_of(2**64)
    with pytest.raises(ValueError, match="version 1"):
        DL.cuda_stream_of(CudaStreamProto(5, version=1))
    with pytest.raises(TypeError, match="not .version, handle."):
        DL.cuda_stream_of(type("P", (), {"__cuda_stream__":
                                         lambda self: 5})())
    with pytest.raises(TypeError, match="float"):
        DL.cuda_stream_of(TorchLikeStream(1.0))
    with pytest.raises(TypeError, match="str"):
        DL.cuda_stream_of(CudaStreamProto("x"))


def test_dlpack_stream_argument_never_zero():
    # DLPack reserves 0: the NULL stream and "none named" are legacy (1)
    assert DL.dlpack_stream_arg(None) == 1
    assert DL.dlpack_stream_arg(0) == 1
    assert DL.dlpack_stream_arg(2) == 2
    assert DL.dlpack_stream_arg(0xabc0) == 0xabc0


# ---- queues and launch(stream=) on the sim ----

def test_queue_lifetime(rt1):
    with rt1.queue() as q:
        assert isinstance(q, hbg.Queue)
        assert isinstance(q.handle, int) and q.handle
        assert not q.closed
    assert q.closed
    q.close()  # idempotent
    q2 = rt1.queue()
    del q2
    gc.collect()
    q3 = rt1.queue()
    rt1.close()
    assert q3.closed


def _copy_bind(rt):
    x = rt.buffer(hbg_np().arange(8, dtype="float32"))
    y = rt.alloc(32, dtype="f32")
    b = rt.bind()
    b.task(hbg.Kernel.COPY, [x.tensor(8), y.tensor(8, mode="out")])
    b._keep = x  # the source must outlive the launch
    return b, y


def hbg_np():
    import numpy
    return numpy


@pytest.mark.parametrize("bad", [CudaStreamProto(0x1000),
                                 TorchLikeStream(0x1000)])
def test_cuda_streams_refused_on_the_sim(rt1, bad):
    b, _ = _copy_bind(rt1)
    with pytest.raises(hbg.ArgumentError, match="cannot run binds of the "
                       "sim device; use an hbg.Queue"):
        b.launch(stream=bad)
    assert not b.ended  # nothing happened: launch it as usual
    b.launch()
    b.wait()
    b.end()


def test_bad_streams_on_the_sim(rt1):
    b, _ = _copy_bind(rt1)
    with pytest.raises(TypeError, match="float"):
        b.launch(stream=2.5)
    with pytest.raises(hbg.ArgumentError, match="12345 names no live Queue"):
        b.launch(stream=12345)
    with hbg.Runtime(policy="coalesced", device="sim") as other:
        with other.queue() as q:
            with pytest.raises(hbg.ArgumentError, match="another runtime"):
                b.launch(stream=q)
    q = rt1.queue()
    q.close()
    with pytest.raises(hbg.StateError, match="closed"):
        b.launch(stream=q)
    b.end()


@needs_launch_on
@pytest.mark.parametrize("as_int", [False, True])
def test_launch_on_a_queue(rt1, as_int):
    np = hbg_np()
    with rt1.queue() as q:
        b, y = _copy_bind(rt1)
        b.launch(stream=q.handle if as_int else q)
        b.wait()
        b.end()
        assert np.array_equal(y.numpy(), np.arange(8, dtype=np.float32))


def test_from_dlpack_stream_checked_on_the_sim(rt1):
    np = hbg_np()
    with pytest.raises(hbg.ArgumentError, match="cannot run binds of the sim"):
        rt1.from_dlpack(np.zeros(4, np.float32),
                        stream=TorchLikeStream(0x1000))
