"""The hot-path backends (hbg._native and ctypes): which one runs, errors
with the library's message, misuse after close, bad arrays, collection
order, record callbacks that raise, and host buffers numpy views in place.
The CTest 'python' runs this suite once per backend."""
import gc
import os
import weakref

import numpy as np
import pytest

import hbg

N = 64


def test_backend_follows_hbg_py_native():
    want = {"0": "ctypes", "1": "native"}.get(os.environ.get("HBG_PY_NATIVE"))
    if want is None:
        pytest.skip("HBG_PY_NATIVE not set")
    assert hbg.backend == want, hbg._backend.native_error


def test_errors_carry_the_library_message(rt1):
    x, y = rt1.alloc(N * 4), rt1.alloc(N * 4)
    with rt1.bind() as b:
        with pytest.raises(hbg.ArgumentError) as ei:
            b.task(hbg.Kernel.ADD, [x.tensor(N), y.tensor(N, mode="out")])
        e = ei.value
        assert e.name == "HBG_E_KERNEL" and e.where == "hbg_submit_task"
        # hbg_last_error(): the kernel and the argument count
        assert "takes 3 tensors, got 2" in e.message, e.message
        assert e.message in str(e)
        # an unaligned view: the message names the argument and offset
        with pytest.raises(hbg.ArgumentError) as ei:
            b.task(hbg.Kernel.COPY, [x.tensor(4, offset=2),
                                     y.tensor(4, mode="out")])
        assert "argument 0" in ei.value.message, ei.value.message
        b.task(hbg.Kernel.COPY, [x.tensor(N), y.tensor(N, mode="out")])


def test_graph_errors_carry_the_library_message(rt1):
    a, out = rt1.alloc(N * 4), rt1.alloc(N * 4)

    def body(rec):
        rec.task(hbg.Kernel.COPY, rec.tensors)

    with rt1.bind() as b:
        bt = [a.tensor(N), out.tensor(N, mode="out")]
        b.graph(1, bt, [], body)
        with pytest.raises(hbg.ArgumentError) as ei:  # 3 tensors now
            b.graph(1, bt + [a.tensor(N)], [], body)
        assert ei.value.name == "HBG_E_SIGNATURE"
        with pytest.raises(hbg.ArgumentError) as ei:
            b.graph(2, [a.tensor(N), out.tensor(N, mode="out")], [],
                    lambda rec: rec.task(hbg.Kernel.ADD, rec.tensors))
        assert "add takes 3 tensors" in ei.value.message, ei.value.message


def test_use_after_close_raises_state_error():
    rt = hbg.Runtime()
    buf = rt.alloc(N * 4)
    hb = rt.host_buffer(N * 4)
    t = buf.tensor(N)
    packed = hbg.pack([t, buf.tensor(N, mode="out")])
    b = rt.bind()
    ended = rt.bind()
    ended.end()
    rt.close()
    body = lambda rec: rec.task(hbg.Kernel.COPY, rec.tensors)  # noqa: E731
    calls = [lambda: b.task(hbg.Kernel.COPY, [t, t]),
             lambda: b.graph(1, packed, [], body),
             lambda: b.graphs(1, [[t, t]], [[]], body, chain=True),
             lambda: b.launch(), lambda: b.wait(), lambda: b.get_stats(),
             lambda: ended.graph(1, packed, [], body),
             lambda: buf.write(hb), lambda: buf.read_into(hb),
             lambda: buf.tensor(N), lambda: rt.host_buffer(8)]
    for call in calls:
        with pytest.raises(hbg.StateError):
            call()
    b.end()  # idempotent after close
    assert np.asarray(hb).shape == (N * 4,)  # host memory outlives close


def test_bind_misuse_after_end_and_launch(rt1):
    buf, out = rt1.alloc(N * 4), rt1.alloc(N * 4)
    b = rt1.bind()
    b.task(hbg.Kernel.COPY, [buf.tensor(N), out.tensor(N, mode="out")])
    b.launch()
    for call in (lambda: b.task(hbg.Kernel.NOP, []), b.launch,
                 lambda: b.graph(1, [], [], lambda r: None)):
        with pytest.raises(hbg.StateError):
            call()
    b.wait()
    b.end()
    with pytest.raises(hbg.StateError):
        b.wait()


def test_bad_arrays_dtypes_and_shapes(rt1):
    buf = rt1.alloc(N * 4)
    strided = np.arange(2 * N, dtype=np.float32)[::2]
    for call in (lambda: buf.write(strided),
                 lambda: rt1.buffer(strided),
                 lambda: buf.read_into(np.empty((N, 2), np.float32)[:, 0]),
                 lambda: buf.read_into(np.empty(N, np.float32)[::-1]),
                 lambda: buf.read_into(np.empty((2, N // 2), np.float32).T),
                 lambda: buf.write(np.zeros(N + 1, np.float32)),
                 lambda: buf.tensor((N,), "complex64"),
                 lambda: buf.tensor((N,), np.float64),
                 lambda: buf.tensor((1, 1, 1, 1, N)),
                 lambda: buf.tensor((0,)),
                 lambda: buf.tensor((N,), strides=(1, 1)),
                 lambda: buf.tensor((2 * N,)),
                 lambda: buf.numpy("bf16"),
                 lambda: hbg.Tensor(buf.addr, (N,), mode="sideways")):
        with pytest.raises(hbg.ArgumentError):
            call()


def test_bad_submission_arguments(rt1):
    a, out = rt1.alloc(N * 4), rt1.alloc(N * 4)
    bt = [a.tensor(N), out.tensor(N, mode="out")]
    body = lambda rec: rec.task(hbg.Kernel.COPY, rec.tensors)  # noqa: E731
    with rt1.bind() as b:
        for call in (lambda: b.task(hbg.Kernel.COPY, [a, out]),
                     lambda: b.task(hbg.Kernel.COPY, bt, deps=[-1]),
                     lambda: b.graph(1, [a.tensor(N), "x"], [], body),
                     lambda: b.graph(1, bt, [], record="not callable"),
                     lambda: b.graphs(1, [bt, bt], [[1], [1, 2]], body),
                     lambda: b.graphs(1, [bt, bt], [[1]], body),
                     lambda: b.graphs(1, [bt, bt[:1]], None, body),
                     lambda: b.graphs(1, hbg.pack([bt, bt]), [[]], body)):
            with pytest.raises(hbg.ArgumentError):
                call()
        assert b.graphs(1, hbg.pack([bt, bt]), None, body, chain=True) == \
            [0, 1]


class Boom(Exception):
    pass


def test_record_callback_exceptions(rt1):
    a, out = rt1.alloc(N * 4), rt1.alloc(N * 4)
    rows = [[a.tensor(N), out.tensor(N, mode="out")]] * 3
    calls = []

    def fails_then_raises(rec):
        calls.append(rec)
        try:
            rec.task(hbg.Kernel.ADD, rec.tensors)
        except hbg.ArgumentError:  # HBG_E_KERNEL: the recording is bad
            pass
        raise Boom("mine")

    with rt1.bind() as b:
        with pytest.raises(Boom, match="mine"):
            b.graphs(9, rows, None, fails_then_raises, chain=True)
        with pytest.raises(Boom):  # not kept: the key records again
            b.graph(9, rows[0], [], fails_then_raises)
        assert len(calls) == 2
        with pytest.raises(KeyboardInterrupt):
            b.graph(9, rows[0], [], lambda rec: (_ for _ in ()).throw(
                KeyboardInterrupt()))
        with pytest.raises(hbg.StateError):
            calls[0].task(hbg.Kernel.COPY, rows[0])
        ids = b.graphs(9, rows, None,
                       lambda rec: rec.task(hbg.Kernel.COPY, rec.tensors),
                       chain=True)
        assert len(ids) == 3
    assert b.stats.n_graphs == 3


def test_runtime_collected_before_its_buffers():
    """A cycle through the runtime, its buffers, a bind, a host buffer:
    the collector finalizes them in any order, nothing crashes, the device
    memory is released, and a numpy view of the host buffer stays valid."""
    views = []
    handles = []
    for i in range(20):
        rt = hbg.Runtime()
        bufs = [rt.alloc(N * 4) for _ in range(3)]
        hb = rt.host_buffer(N * 4)
        np.asarray(hb)[:] = i
        b = rt.bind()
        b.task(hbg.Kernel.COPY, [bufs[0].tensor(N),
                                 bufs[1].tensor(N, mode="out")])
        rt.cycle = [bufs, hb, b]
        for x in bufs:
            x.cycle = rt
        b.cycle = rt
        views.append(hb.numpy("u8"))
        handles.append(rt._h)
        refs = weakref.ref(rt)
        del rt, bufs, hb, b, x
    gc.collect()
    assert refs() is None
    assert all(h.ptr is None for h in handles)
    for i, v in enumerate(views):
        assert (v == i).all()


def test_buffer_outlives_collected_runtime_handle():
    rt = hbg.Runtime()
    buf = rt.buffer(np.ones(N, np.float32))
    h = rt._h
    rt.close()
    del rt
    gc.collect()
    assert h.ptr is None
    with pytest.raises(hbg.StateError):
        buf.numpy()
    del buf
    gc.collect()


def test_host_buffer_is_viewed_in_place(rt1):
    hb = rt1.host_buffer(N * 4)
    assert hb.pinned  # the sim device registers host memory
    arr = hb.numpy("f32")
    raw = np.asarray(hb)
    assert raw.dtype == np.uint8 and raw.nbytes == N * 4
    arr[:] = np.arange(N, dtype=np.float32)
    assert raw.view(np.float32)[5] == 5.0  # the same memory
    assert not raw.flags.owndata and not arr.flags.owndata
    buf = rt1.alloc(N * 4)
    direct = rt1.device_stats().pinned_direct
    buf.write(hb)
    assert rt1.device_stats().pinned_direct == direct + 1
    np.testing.assert_array_equal(buf.numpy(), np.arange(N, dtype=np.float32))
    staged = rt1.device_stats().pinned_direct
    buf.write(np.zeros(N, np.float32))  # pageable: through bounce buffers
    assert rt1.device_stats().pinned_direct == staged
    arr[:] = 7
    buf.read_into(hb)
    np.testing.assert_array_equal(arr, np.zeros(N, np.float32))
    with pytest.raises(hbg.ArgumentError):
        hb.numpy("f32", shape=(N + 1,))
    with pytest.raises(hbg.ArgumentError):
        hb.numpy("bf16")
    with pytest.raises(hbg.ArgumentError):
        rt1.host_buffer(0)


def test_device_buffer_array_is_a_copy(rt1):
    buf = rt1.buffer(np.arange(N, dtype=np.float32))
    a = np.asarray(buf, dtype=np.float32)
    np.testing.assert_array_equal(a, np.arange(N, dtype=np.float32))
    a[:] = 0
    assert buf.numpy()[1] == 1.0
    assert np.asarray(buf).dtype == np.uint8


def test_tensor_views(rt1):
    buf = rt1.alloc(4 * N * 4)
    t = buf.tensor((4, N), "f32", mode="inout", offset=0)
    assert t.shape == (4, N) and t.strides == (N, 1)
    assert t.dtype == hbg.DType.F32 and t.mode == hbg.Access.INOUT
    assert t.extent == 4 * N * 4 and t.addr == buf.addr
    s = t.with_mode("in")
    assert s.mode == hbg.Access.IN and t.mode == hbg.Access.INOUT
    v = hbg.Tensor(buf.addr, (2, 3), hbg.DType.I32, offset=8, strides=(6, 2))
    assert v.strides == (6, 2) and v.offset == 8 and v.extent == 4 * 11  # (1*6 + 2*2 + 1) elements
    assert hbg.Tensor.internal(N).addr == 0
    assert isinstance(hbg.pack([t, s]), hbg.TensorArray)
