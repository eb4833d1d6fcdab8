"""The error contracts of python/README.md, in both backends: device-side
errors name the failing task and node, allocation failures are HbgErrors
that state the size, one runtime used from two threads is refused with a
message naming the other thread's call, and the library's messages say
what differs."""
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
