"""Python numbers reach C as documented, in both backends: floats as f32
bits and ints as u64 / i64, for task scalars and graph boundary scalars
alike; keys, kernel and task ids, strides, addresses checked; a value out
of range raises OutOfRangeError (an ArgumentError and an OverflowError)
naming the argument, another type TypeError; nothing is truncated."""
import struct

import numpy as np
import pytest

import hbg

N = 16


def bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


@pytest.fixture
def xy(rt1):
    x = rt1.buffer(np.arange(N, dtype=np.float32))
    return x, rt1.alloc(N * 4)


def scale(rt, x, y, scalars):
    with rt.bind() as b:
        b.task(hbg.Kernel.SCALE, [x.tensor(N), y.tensor(N, mode="out")],
               scalars=scalars)
    return y.numpy()


@pytest.mark.parametrize("alpha", [0.5, np.float32(0.5), np.float64(0.5),
                                   hbg.Scalar.static(0.5),
                                   hbg.Scalar(0.5)])
def test_float_task_scalar_is_f32(rt1, xy, alpha):
    """help(hbg.Scalar) says floats are accepted: the issue's
    AttributeError ('float' object has no attribute 'value')."""
    x, y = xy
    got = scale(rt1, x, y, [alpha])
    np.testing.assert_array_equal(got, np.arange(N, dtype=np.float32) * 0.5)


def boundary_scale(rec):
    a, o = rec.tensors
    rec.task(hbg.Kernel.SCALE, [a, o], [hbg.Scalar.boundary(0)])


@pytest.mark.parametrize("alpha", [0.5, np.float32(0.5)])
def test_float_boundary_scalar_is_f32(rt1, xy, alpha):
    """A float boundary scalar was int()-truncated: 0.5 became 0 and the
    output was all zeros."""
    x, y = xy
    with rt1.bind() as b:
        b.graph(1, [x.tensor(N), y.tensor(N, mode="out")], [alpha],
                record=boundary_scale)
        b.graphs(1, [[x.tensor(N), y.tensor(N, mode="out")]], [[alpha]],
                 record=boundary_scale)
    np.testing.assert_array_equal(y.numpy(),
                                  np.arange(N, dtype=np.float32) * 0.5)


@pytest.mark.parametrize("value,want", [
    (0, 0), (2**64 - 1, 2**64 - 1), (-1, 2**64 - 1), (-2**63, 2**63),
    (np.int64(-2), 2**64 - 2), (np.uint64(2**64 - 1), 2**64 - 1),
    (True, 1), (1.0, bits(1.0)), (float("inf"), bits(float("inf"))),
    (-0.0, 0x80000000)])
def test_boundary_scalar_encoding(rt1, xy, value, want):
    x, y = xy
    seen = []

    def body(rec):
        seen.append(rec.scalars)
        rec.task(hbg.Kernel.COPY, rec.tensors)

    with rt1.bind() as b:
        b.graph(2, [x.tensor(N), y.tensor(N, mode="out")], [value],
                record=body)
    assert seen == [[want]]
    assert hbg.Scalar.static(value).value == want


@pytest.mark.parametrize("value", [2**64, 2**70, -2**63 - 1, -2**64,
                                   1e39, -3.5e38, np.float64(1e300)])
def test_out_of_range_scalars_raise(rt1, xy, value):
    """Ints from 2**64 up (and below -2**63) were masked to 64 bits; a
    float beyond the f32 range has no f32."""
    x, y = xy
    bt = [x.tensor(N), y.tensor(N, mode="out")]
    with rt1.bind() as b:
        with pytest.raises(hbg.OutOfRangeError) as ei:
            b.task(hbg.Kernel.SCALE, bt, scalars=[value])
        assert isinstance(ei.value, OverflowError)
        assert isinstance(ei.value, hbg.ArgumentError)
        assert "scalar 0: " in str(ei.value)
        with pytest.raises(OverflowError) as ei:
            b.task(hbg.Kernel.NOP, [], scalars=[1, 2, value])
        assert "scalar 2: %r is out of range" % (value,) in str(ei.value)
        with pytest.raises(hbg.OutOfRangeError) as ei:
            b.graph(3, bt, [0, value], record=boundary_scale)
        assert "boundary scalar 1: " in str(ei.value)
        with pytest.raises(hbg.OutOfRangeError) as ei:
            b.graphs(3, [bt, bt], [[0], [value]], record=boundary_scale)
        assert "replay 1, boundary scalar 0: " in str(ei.value)
        with pytest.raises(hbg.OutOfRangeError):
            b.graph(3, bt, [0], record=boundary_scale, variant=[value])
        with pytest.raises(hbg.OutOfRangeError):
            hbg.Scalar.static(value)
    assert b.stats.n_tasks == 0  # nothing reached the bind


def test_scalar_types_and_ids(rt1, xy):
    x, y = xy
    bt = [x.tensor(N), y.tensor(N, mode="out")]
    with rt1.bind() as b:
        with pytest.raises(TypeError, match="scalar 0: a scalar is an int "
                           "or a float, not str"):
            b.task(hbg.Kernel.NOP, [], scalars=["1"])
        with pytest.raises(TypeError, match="boundary scalar 0"):
            b.graph(4, bt, [None], record=boundary_scale)
        # keys: ints of 64 bits; not floats
        with pytest.raises(hbg.OutOfRangeError, match="key: "):
            b.graph(2**64, bt, [1.0], record=boundary_scale)
        with pytest.raises(TypeError, match="key: expected an int"):
            b.graph(4.0, bt, [1.0], record=boundary_scale)
        # kernel and task ids: u32, never a float's truncation
        with pytest.raises(hbg.OutOfRangeError, match="kernel: "):
            b.task(2**32 + hbg.Kernel.COPY, bt)
        with pytest.raises(TypeError, match="dependency 0"):
            b.task(hbg.Kernel.COPY, bt, deps=[0.0])
        with pytest.raises(hbg.OutOfRangeError, match="dependency 1"):
            b.task(hbg.Kernel.COPY, bt, deps=[0, 2**32])
        t = b.task(hbg.Kernel.COPY, bt)
        # a key given as its i64 two's complement is the same key
        b.graph(-1, bt, [1.0], record=boundary_scale)
        b.graph(2**64 - 1, bt, [1.0], record=boundary_scale, deps=[t])
    assert b.stats.n_recorded == 1 and b.stats.n_graphs == 2


def test_tensor_fields_checked(rt1):
    buf = rt1.alloc(N * 4)
    # a negative or huge stride became 0, a broadcast, silently
    for strides in [(-1,), (2**32,), (1.0,)]:
        with pytest.raises((hbg.ArgumentError, TypeError)):
            buf.tensor((N,), strides=strides)
    with pytest.raises(hbg.ArgumentError, match="strides"):
        buf.tensor((N,), strides=(-1,))
    with pytest.raises(TypeError):
        buf.tensor((4.0,))
    with pytest.raises(hbg.OutOfRangeError, match="tensor addr"):
        hbg.Tensor(2**64, (N,))
    with pytest.raises(hbg.OutOfRangeError, match="tensor offset"):
        hbg.Tensor(buf.addr, (N,), offset=-4)
    assert buf.tensor((N,), strides=(0,)).strides == (0,)  # broadcast: fine


def test_f32_helper():
    assert hbg.f32(0.5) == bits(0.5)
    with pytest.raises(hbg.OutOfRangeError, match="f32: "):
        hbg.f32(1e39)
