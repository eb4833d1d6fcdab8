"""Runtimes, buffers and binds: lifetimes, misuse, collection, RSS."""
import gc
import os
import weakref

import numpy as np
import pytest

import hbg
from conftest import rss_pages


def scale_bind(rt, x, y, n, factor):
    with rt.bind() as b:
        b.task(hbg.Kernel.SCALE, [x.tensor(n), y.tensor(n, mode="out")],
               scalars=[hbg.Scalar.static(factor)])
    return b


def test_runtime_config_and_properties():
    with hbg.Runtime(policy="pinned-eager", device="sim",
                     device_options="workers=1", arena_bytes=1 << 20,
                     pipeline_depth=3, coalesce_chunk_bytes=4096,
                     orch_id=5, poison_staging=True) as rt:
        assert rt.policy == "pinned-eager"
        assert rt.native_error is None
        assert "pinned-eager" in repr(rt)
    assert rt.closed and "closed" in repr(rt)


def test_runtime_policy_by_index():
    with hbg.Runtime(policy=2) as rt:
        assert rt.policy == hbg.policies()[2]
    with pytest.raises(hbg.ArgumentError):
        hbg.Runtime(policy=len(hbg.policies()))


def test_unknown_policy_and_device():
    with pytest.raises(hbg.HbgError) as ei:
        hbg.Runtime(policy="no-such-policy")
    assert isinstance(ei.value, hbg.ArgumentError)
    assert ei.value.code == -1
    with pytest.raises(hbg.ArgumentError) as ei:
        hbg.Runtime(device="no-such-device")
    assert ei.value.name == "HBG_E_NOTFOUND"


def test_bad_device_options_carry_message():
    with pytest.raises(hbg.HbgError) as ei:
        hbg.Runtime(device="sim", device_options="mem=banana")
    assert ei.value.code < 0
    assert ei.value.native[0] is None and "mem=banana" in ei.value.native[1]
    assert "mem=banana" in str(ei.value)


def test_buffers_roundtrip(rt1):
    a = np.arange(100, dtype=np.int32)
    b = rt1.buffer(a)
    assert b.nbytes == a.nbytes
    assert np.array_equal(b.numpy("i32"), a)
    assert b.read(8) == a.tobytes()[:8]
    b.write(b"\x01\x00\x00\x00", offset=4)
    assert b.numpy(np.int32, shape=(2,))[1] == 1
    out = bytearray(12)
    b.read_into(out, offset=8)
    assert bytes(out) == a.tobytes()[8:20]
    assert b.numpy(np.float64, shape=(2,)).tobytes() == a.tobytes()[:16]
    with pytest.raises(hbg.ArgumentError):
        b.numpy("bf16")
    m = rt1.buffer(memoryview(bytearray(b"abc")))
    assert m.read() == b"abc"
    with pytest.raises(hbg.ArgumentError):
        b.write(b"x" * 401)
    with pytest.raises(hbg.ArgumentError):
        b.read_into(bytearray(8), offset=396)
    with pytest.raises(hbg.ArgumentError):
        b.read_into(b"immutable")
    with pytest.raises(hbg.ArgumentError):
        b.write(np.arange(10, dtype=np.int32)[::2])
    with pytest.raises(hbg.ArgumentError):
        b.tensor((101,), "i32")
    with pytest.raises(hbg.ArgumentError):
        rt1.alloc(0)
    b.free()
    with pytest.raises(hbg.StateError):
        b.free()
    with pytest.raises(hbg.StateError):
        b.read()


def test_device_memory_error_is_device_error():
    with hbg.Runtime(device="sim", device_options="mem=1M") as rt:
        with pytest.raises(hbg.DeviceError) as ei:
            rt.alloc(64 << 20)
        assert ei.value.name == "HBG_E_DEVMEM"
        code, msg = ei.value.native
        assert "mem=" in msg and msg in str(ei.value)
        assert rt.native_error == (code, msg)


def test_buffers_freed_when_collected(rt1):
    base = rt1.device_stats().mem_in_use
    bufs = [rt1.alloc(1 << 16) for _ in range(8)]
    assert rt1.device_stats().mem_in_use >= base + 8 * (1 << 16)
    del bufs
    gc.collect()
    assert rt1.device_stats().mem_in_use == base


def test_buffer_keeps_runtime_alive():
    rt = hbg.Runtime()
    h = rt._h
    buf = rt.buffer(b"x" * 64)
    wr = weakref.ref(rt)
    del rt
    gc.collect()
    assert wr() is not None and h.ptr is not None
    assert buf.read() == b"x" * 64
    del buf
    gc.collect()
    assert wr() is None and h.ptr is None


def test_runtime_closed_when_collected():
    rt = hbg.Runtime()
    h = rt._h
    del rt
    gc.collect()
    assert h.ptr is None


def test_closed_runtime_raises_state_error():
    rt = hbg.Runtime()
    buf = rt.alloc(64)
    w = rt.workload("qwen3-14b", layers=1)
    b = rt.bind()
    rt.close()
    rt.close()  # idempotent
    for call in (lambda: rt.alloc(8), lambda: rt.buffer(b"x"), rt.bind,
                 lambda: rt.policy, rt.device_stats, lambda: buf.read(),
                 lambda: buf.write(b"x"), lambda: b.launch(), lambda: w.info,
                 lambda: rt.set_trace(None), lambda: rt.workload("dsv4")):
        with pytest.raises(hbg.StateError):
            call()
    assert b.ended
    with pytest.raises(hbg.StateError):
        with rt:
            pass


def test_bind_context_manager(rt):
    x = rt.buffer(np.arange(64, dtype=np.float32))
    y = rt.alloc(x.nbytes)
    b = scale_bind(rt, x, y, 64, 0.5)
    assert b.ended
    assert b.stats.policy == rt.policy and b.stats.n_tasks == 1
    assert b.stats.device_status == 0 and b.stats.fatal == 0
    # the sim times launches with its events, inside launch -> completion
    assert 0 < b.stats.device_ns <= b.stats.exec_ns
    assert b.stats.control_plane_ns == (b.stats.host_orch_ns +
                                        b.stats.graph_upload_ns +
                                        b.stats.window_upload_ns)
    assert np.array_equal(y.numpy(), np.arange(64, dtype=np.float32) * 0.5)


def test_bind_manual_lifecycle_and_misuse(rt1):
    x = rt1.buffer(np.ones(16, np.float32))
    b = rt1.bind()
    with pytest.raises(hbg.StateError):
        b.wait()  # not launched
    tid = b.task(hbg.Kernel.COPY, [x.tensor(16), x.tensor(16, mode="out",
                                                        offset=0)])
    assert b.fatal == 0
    b.launch()
    with pytest.raises(hbg.StateError):
        b.launch()  # double launch
    with pytest.raises(hbg.StateError):
        b.task(hbg.Kernel.NOP, [])
    st = b.wait()
    assert b.wait() is st and st.n_tasks == 1
    assert b.get_stats() == st
    b.end()
    b.end()
    with pytest.raises(hbg.StateError):
        b.launch()
    with pytest.raises(hbg.StateError):
        b.get_stats()
    assert tid == 0


def test_bad_kernel_and_deps(rt1):
    x = rt1.buffer(np.ones(16, np.float32))
    with rt1.bind() as b:
        with pytest.raises(hbg.ArgumentError) as ei:
            b.task(999, [x.tensor(16)])
        assert ei.value.name == "HBG_E_KERNEL"
        with pytest.raises(hbg.ArgumentError):
            b.task(hbg.Kernel.COPY, [x.tensor(16), x.tensor(16, mode="out")],
                   deps=[42])


def test_exception_inside_bind_ends_it(rt1):
    x = rt1.buffer(np.ones(16, np.float32))
    for _ in range(5):  # more than the pipeline depth: slots come back
        with pytest.raises(KeyError):
            with rt1.bind() as b:
                b.task(hbg.Kernel.COPY, [x.tensor(16),
                                         x.tensor(16, mode="out")])
                raise KeyError("boom")
        assert b.ended and b.stats is None
    with pytest.raises(RuntimeError):
        with rt1.bind() as b:
            b.launch()
            raise RuntimeError("after launch")
    assert b.ended
    scale_bind(rt1, x, x, 16, 1.0)


def test_unended_bind_blocks_slot_until_collected(rt1):
    held = [rt1.bind(), rt1.bind()]  # default pipeline depth 2
    with pytest.raises(hbg.StateError):
        rt1.bind()
    del held
    gc.collect()
    rt1.bind().end()


def test_trace_events(rt1):
    ev = []
    rt1.set_trace(ev.append)
    x = rt1.buffer(np.ones(16, np.float32))
    scale_bind(rt1, x, x, 16, 2.0)
    rt1.set_trace(None)
    n = len(ev)
    scale_bind(rt1, x, x, 16, 2.0)
    assert n > 0 and len(ev) == n
    assert {e.track for e in ev} >= {0, 3}
    assert all(isinstance(e, hbg.TraceEvent) and e.name for e in ev)


def test_thousand_binds_rss_flat(rt1):
    x = rt1.buffer(np.ones(256, np.float32))
    y = rt1.alloc(x.nbytes)

    def body(rec):
        a, o = rec.tensors
        rec.task(hbg.Kernel.SCALE, [a, o], [hbg.Scalar.boundary(0)])

    def one(i):
        with rt1.bind() as b:
            b.task(hbg.Kernel.COPY, [x.tensor(256), y.tensor(256, mode="out")])
            b.graph(1, [x.tensor(256), y.tensor(256, mode="out")],
                    [hbg.f32(1.0)], record=body)
        return b

    for i in range(200):
        one(i)
    gc.collect()
    before = rss_pages()
    mem = rt1.device_stats().mem_in_use
    for i in range(1000):
        one(i)
    gc.collect()
    grown_kib = (rss_pages() - before) * os.sysconf("SC_PAGE_SIZE") // 1024
    assert grown_kib < 1024, "RSS grew by %d KiB over 1000 binds" % grown_kib
    assert rt1.device_stats().mem_in_use == mem
