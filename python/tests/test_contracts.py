"""The error contracts of python/README.md, in both backends: device-side
errors name the failing task and node, allocation failures are HbgErrors
that state the size, one runtime used from two threads is refused with a
message naming the other thread's call, buffers keep the dtype they hold,
and the library's messages say what differs."""
import gc
import threading

import numpy as np
import pytest

import hbg

N = 16


# ---- device-side errors ----

def rope_graph(rec):
    x, c, s, out = rec.tensors
    t = hbg.Tensor.internal((1, 4))
    rec.task(hbg.Kernel.COPY, [x, t])
    rec.task(hbg.Kernel.ROPE, [t.with_mode("in"), c, s, out],
             [hbg.Scalar.boundary(0)])


def test_device_side_error_names_task_and_node(rt):
    """Only the device sees a boundary scalar's value: a ROPE position past
    the table fails at wait, which said only 'unknown kernel or bad kernel
    arguments'."""
    x, tab, out = rt.alloc(64), rt.alloc(64), rt.alloc(64)
    bt = [x.tensor((1, 4)), tab.tensor((2, 2)), tab.tensor((2, 2), offset=16),
          out.tensor((1, 4), mode="out")]
    b = rt.bind()
    b.task(hbg.Kernel.COPY, [x.tensor(4), out.tensor(4, offset=32,
                                                       mode="out")])
    gid = b.graph(5, bt, [7], record=rope_graph)
    b.launch()
    with pytest.raises(hbg.DeviceSideError) as ei:
        b.wait()
    e = ei.value
    assert isinstance(e, hbg.ArgumentError) and e.name == "HBG_E_KERNEL"
    assert (e.task, e.entry, e.node) == (gid, 1, 1)
    assert "at task 1, graph node 1" in str(e)
    assert b.stats.device_status == e.code
    b.end()
    # an ordinary task: no node
    with pytest.raises(hbg.DeviceSideError) as ei:
        with rt.bind() as b:
            b.task(hbg.Kernel.NOP, [])
            b.task(hbg.Kernel.ROPE, [x.tensor((1, 4)), tab.tensor((2, 2)),
                                     tab.tensor((2, 2), offset=16),
                                     out.tensor((1, 4), mode="out")], [9])
    assert (ei.value.task, ei.value.node) == (1, None)
    assert "at task 1" in str(ei.value) and "node" not in str(ei.value)


# ---- allocation failures ----

def test_allocation_failures_are_hbg_errors():
    with hbg.Runtime(device="sim", device_options="mem=1M") as rt:
        with pytest.raises(hbg.DeviceError) as ei:
            rt.alloc(64 << 20)
        assert ei.value.name == "HBG_E_DEVMEM"
        assert "67108864 bytes" in str(ei.value)
        # a huge host buffer raised OSError (or OverflowError)
        for n in (1 << 62, 1 << 64):
            with pytest.raises(hbg.HbgError) as ei:
                rt.host_buffer(n)
            assert isinstance(ei.value, hbg.DeviceError)
            assert ei.value.name == "HBG_E_NOMEM"
            assert "%d bytes of host memory" % n in str(ei.value)
        with pytest.raises(hbg.OutOfRangeError, match="nbytes"):
            rt.alloc(1 << 64)
        with pytest.raises(hbg.ArgumentError, match="not -4"):
            rt.alloc(-4)
        with pytest.raises(TypeError):
            rt.alloc(4.0)


# ---- one runtime, two threads ----

def test_one_runtime_from_two_threads(rt1):
    x = rt1.buffer(np.arange(N, dtype=np.float32))
    y, z = rt1.alloc(N * 4), rt1.alloc(N * 4)
    spare = rt1.alloc(4096)
    inside, go = threading.Event(), threading.Event()
    # a bind of this thread, launched before the other thread starts
    mine = rt1.bind()
    mine.task(hbg.Kernel.COPY, [x.tensor(N), z.tensor(N, mode="out")])
    mine.launch()

    def body(rec):
        rec.task(hbg.Kernel.COPY, rec.tensors)
        inside.set()
        go.wait(30)

    def owner():
        with rt1.bind() as b:
            b.graph(1, [x.tensor(N), y.tensor(N, mode="out")], [], body)

    t = threading.Thread(target=owner)
    t.start()
    try:
        assert inside.wait(30)
        calls = [lambda: rt1.alloc(64), lambda: x.write(np.zeros(N, "f4")),
                 lambda: x.numpy(), rt1.bind, lambda: x.free(), mine.wait]
        for call in calls:
            with pytest.raises(hbg.StateError) as ei:
                call()
            assert ei.value.name == "HBG_E_BUSY"
            assert "the runtime is in use by another thread (in " \
                   "hbg_submit_graph)" in str(ei.value), str(ei.value)
        # a finalizer on this thread cannot free now: the free waits
        del spare
        gc.collect()
    finally:
        go.set()
        t.join()
    # nothing above changed anything: x is still there, mine still waits
    mine.wait()
    mine.end()
    np.testing.assert_array_equal(y.numpy(), np.arange(N, dtype=np.float32))
    np.testing.assert_array_equal(z.numpy(), y.numpy())
    held = rt1.device_stats().mem_in_use  # the spare is still allocated
    rt1.alloc(64).free()  # the runtime's next alloc frees it
    assert held - rt1.device_stats().mem_in_use == 4096


# ---- dtypes ----

def test_float64_array_into_f32_tasks_is_refused(rt1):
    """The issue's case: a float64 array written into a buffer that tasks
    read as f32 was reinterpreted."""
    a = rt1.buffer(np.arange(4.0))  # float64
    assert a.dtype == np.float64
    with pytest.raises(hbg.ArgumentError, match="holds float64; a F32 "
                       "tensor would read its bytes as F32"):
        a.tensor(4)
    b = rt1.alloc(16)
    b.write(np.arange(2.0))  # the first typed write types it
    with pytest.raises(hbg.ArgumentError):
        b.tensor(4)
    y = rt1.alloc(16)
    t = y.tensor(4, mode="out")  # the first view types it
    assert y.dtype == np.float32
    with pytest.raises(hbg.ArgumentError, match="pass cast=True"):
        y.write(np.arange(4.0))
    x = rt1.alloc(16, dtype="f32")
    x.write(np.arange(4.0), cast=True)
    with rt1.bind() as bd:
        bd.task(hbg.Kernel.SCALE, [x.tensor(4), t], [2.0])
    np.testing.assert_array_equal(y.numpy(), [0, 2, 4, 6])
    assert y.numpy().dtype == np.float32
    c = rt1.buffer(np.arange(4.0), dtype="f32")
    np.testing.assert_array_equal(c.numpy(), np.arange(4, dtype=np.float32))


def test_untyped_bytes_and_explicit_reinterpretation(rt1):
    b = rt1.buffer(np.ones(4, np.float32))
    b.write(b"\x00" * 4)  # raw bytes fit any buffer
    b.write(np.zeros(4, np.uint8), offset=4)
    b.tensor(16, "u8")  # and U8 views any bytes
    with pytest.raises(hbg.ArgumentError):
        b.tensor(4, "i32")
    b.dtype = "i32"  # on purpose
    assert b.tensor(4, "i32").dtype == hbg.DType.I32
    b.dtype = None
    assert b.dtype is None and b.tensor(4, "i32")
    h = rt1.alloc(8)
    h.write(np.zeros(4, np.uint16))
    assert h.tensor(4, "bf16").dtype == hbg.DType.BF16  # numpy's bf16 carrier
    with pytest.raises(hbg.ArgumentError, match="cast=True needs a typed"):
        rt1.alloc(8).write(np.zeros(2), cast=True)
    u = rt1.alloc(8)
    u.write(np.array([1.5, 2.5]), cast="f32")
    assert u.dtype == np.float32 and list(u.numpy()) == [1.5, 2.5]
    with pytest.raises(hbg.ArgumentError, match="holds float32"):
        u.write(np.zeros(1), cast="f16")


def test_numpy_takes_any_numpy_dtype(rt1):
    """numpy('float64') was rejected though the docstring says any
    dtype works."""
    b = rt1.buffer(np.arange(4.0))
    np.testing.assert_array_equal(b.numpy("float64"), np.arange(4.0))
    assert b.numpy().dtype == np.float64  # the buffer's own dtype
    assert b.numpy("<f8").dtype == np.float64
    assert b.numpy(np.int16).shape == (16,)
    assert b.numpy("u8").nbytes == 32
    for bad in ("bf16", "no-such-dtype"):
        with pytest.raises(hbg.ArgumentError):
            b.numpy(bad)
    hb = rt1.host_buffer(32)
    assert hb.numpy("float64").shape == (4,)


# ---- messages that say what differs ----

def test_messages_say_what_differs(rt1):
    a, o = rt1.alloc(N * 4), rt1.alloc(N * 4)

    def body(rec):
        rec.task(hbg.Kernel.COPY, rec.tensors)

    with rt1.bind() as b:
        b.graph(3, [a.tensor(N), o.tensor(N, mode="out")], [], body)
        with pytest.raises(hbg.ArgumentError) as ei:
            b.graph(3, [a.tensor(N // 2), o.tensor(N, mode="out")], [], body)
        assert ei.value.name == "HBG_E_SIGNATURE"
        assert "key 3: boundary tensor 0: shape [8], recorded [16]" in \
            str(ei.value)
        with pytest.raises(hbg.ArgumentError) as ei:
            b.task(hbg.Kernel.COPY, [a.tensor(N), o.tensor(N, mode="out")],
                   deps=[5])
        assert "dependency 0 is task id 5, but the bind's tasks so far " \
               "are 0..0" in str(ei.value)
        # the overlap rule, from Python
        with pytest.raises(hbg.ArgumentError) as ei:
            b.task(hbg.Kernel.COPY, [a.tensor(N - 1),
                                     a.tensor(N - 1, offset=4, mode="out")])
        assert "output argument 1 overlaps input argument 0" in \
            str(ei.value)
