"""Graphs recorded from Python, checked against numpy under every policy."""
import numpy as np
import pytest

import hbg

DIM = 128
LAYERS = 6


class Model:
    """h_{l+1} = (h_l * w_l + h_l) * scale[step], one graph key per layer."""

    def __init__(self, rt):
        rng = np.random.default_rng(7)
        self.h0 = rng.standard_normal(DIM).astype(np.float32)
        self.w = [rng.standard_normal(DIM).astype(np.float32)
                  for _ in range(LAYERS)]
        self.act = [rt.alloc(DIM * 4) for _ in range(LAYERS + 1)]
        self.dw = [rt.buffer(w) for w in self.w]
        self.act[0].write(self.h0)
        self.records = 0

    def body(self, rec):
        self.records += 1
        h, w, out = rec.tensors
        assert len(rec.scalars) == 1
        t1 = hbg.Tensor.internal((DIM,))
        rec.task(hbg.Kernel.MUL, [h, w, t1])
        t2 = hbg.Tensor.internal((DIM,))
        rec.task(hbg.Kernel.ADD, [t1.with_mode("in"), h, t2])
        rec.task(hbg.Kernel.SCALE, [t2.with_mode("in"), out],
                 [hbg.Scalar.boundary(0)])

    def boundary(self, l):
        return [self.act[l].tensor(DIM), self.dw[l].tensor(DIM),
                self.act[l + 1].tensor(DIM, mode="out")]

    def reference(self, scale):
        h = self.h0
        for w in self.w:
            h = (h * w + h) * np.float32(scale)
        return h


def scale_of(step):
    return 1.0 - 0.125 * step


def test_user_graph_matches_numpy(rt):
    m = Model(rt)
    for step in range(3):
        s = scale_of(step)
        with rt.bind() as b:
            ids = []
            for l in range(LAYERS):
                ids.append(b.graph(0x51, m.boundary(l), [hbg.f32(s)],
                                   record=m.body, deps=ids[-1:]))
        assert ids == sorted(ids) and len(set(ids)) == LAYERS
        assert b.stats.n_graphs == LAYERS
        assert b.stats.n_recorded == (1 if step == 0 else 0)
        got = m.act[LAYERS].numpy()
        np.testing.assert_array_equal(got, m.reference(s))
    assert m.records == 1


def test_batched_graphs_match_single(rt):
    m = Model(rt)
    s = scale_of(1)
    with rt.bind() as b:
        ids = b.graphs(0x52, [m.boundary(l) for l in range(LAYERS)],
                       [[hbg.f32(s)]] * LAYERS, record=m.body, chain=True)
    assert len(ids) == LAYERS and b.stats.n_graphs == LAYERS
    np.testing.assert_array_equal(m.act[LAYERS].numpy(), m.reference(s))
    assert m.records == 1
    assert hbg.HAVE_BATCH


def test_batched_graphs_bad_rows(rt1):
    m = Model(rt1)
    with rt1.bind() as b:
        assert b.graphs(1, [], record=m.body) == []
        with pytest.raises(hbg.ArgumentError):
            b.graphs(1, [m.boundary(0), m.boundary(1)[:2]], record=m.body)
        with pytest.raises(hbg.ArgumentError):
            b.graphs(1, [m.boundary(0)], [[1], [2]], record=m.body)


def test_variants_record_separately(rt1):
    m = Model(rt1)
    with rt1.bind() as b:
        b.graph(9, m.boundary(0), [hbg.f32(1.0)], m.body, variant=[1])
        b.graph(9, m.boundary(1), [hbg.f32(1.0)], m.body, variant=[2])
        b.graph(9, m.boundary(2), [hbg.f32(1.0)], m.body, variant=[1])
    assert m.records == 2 and b.stats.n_recorded == 2


class Boom(Exception):
    pass


def test_record_callback_exception_surfaces(rt1):
    m = Model(rt1)
    exc = Boom("from the callback")

    def bad(rec):
        raise exc

    with rt1.bind() as b:
        with pytest.raises(Boom) as ei:
            b.graph(3, m.boundary(0), [hbg.f32(1.0)], record=bad)
        assert ei.value is exc
        # the key was not recorded: a good callback records it now
        b.graph(3, m.boundary(0), [hbg.f32(1.0)], record=m.body)
    assert m.records == 1


def test_record_task_error_surfaces_as_hbg_error(rt1):
    m = Model(rt1)

    def bad_kernel(rec):
        rec.task(999, rec.tensors)

    with rt1.bind() as b:
        with pytest.raises(hbg.ArgumentError) as ei:
            b.graph(4, m.boundary(0), [0], record=bad_kernel)
    assert ei.value.name == "HBG_E_KERNEL"


def test_record_misuse(rt1):
    m = Model(rt1)
    kept = []

    def nested(rec):
        kept.append(rec)
        b.graph(6, m.boundary(1), [0], record=m.body)

    with rt1.bind() as b:
        with pytest.raises(hbg.StateError) as ei:
            b.graph(5, m.boundary(0), [0], record=nested)
        assert ei.value.name == "HBG_E_NESTED"
        with pytest.raises(hbg.StateError):
            kept[0].task(hbg.Kernel.NOP, [])  # outside its callback
        with pytest.raises(hbg.ArgumentError) as ei:
            b.graph(7, m.boundary(0), [0], record=lambda rec: None)
        assert ei.value.name == "HBG_E_EMPTY"
        with pytest.raises(hbg.ArgumentError):
            b.graph(8, m.boundary(0), [0], record=None)


def test_signature_mismatch(rt1):
    m = Model(rt1)
    with rt1.bind() as b:
        b.graph(10, m.boundary(0), [0], record=m.body)
        short = [m.act[1].tensor(DIM // 2), m.dw[1].tensor(DIM // 2),
                 m.act[2].tensor(DIM // 2, mode="out")]
        with pytest.raises(hbg.ArgumentError) as ei:
            b.graph(10, short, [0], record=m.body)
        assert ei.value.name == "HBG_E_SIGNATURE"


def test_tasks_and_graphs_mixed_with_deps(rt):
    m = Model(rt)
    x = rt.buffer(m.h0)
    with rt.bind() as b:
        t0 = b.task(hbg.Kernel.COPY, [x.tensor(DIM),
                                      m.act[0].tensor(DIM, mode="out")])
        g = b.graph(0x53, m.boundary(0), [hbg.f32(2.0)], m.body, deps=[t0])
        b.task(hbg.Kernel.FILL, [m.act[2].tensor(DIM, mode="out")],
               [hbg.Scalar.static(3.0)], deps=[g])
    np.testing.assert_array_equal(
        m.act[1].numpy(), (m.h0 * m.w[0] + m.h0) * np.float32(2.0))
    assert np.all(m.act[2].numpy() == 3.0)


def test_packed_boundaries(rt1):
    m = Model(rt1)
    s = scale_of(2)
    rows = hbg.pack([m.boundary(l) for l in range(LAYERS)])
    assert len(rows) == LAYERS and rows.width == 3
    with rt1.bind() as b:
        t = b.graph(0x54, hbg.pack(m.boundary(0)), [hbg.f32(s)], m.body)
        b.graphs(0x54, hbg.pack([m.boundary(l) for l in range(1, LAYERS)]),
                 [[hbg.f32(s)]] * (LAYERS - 1), m.body, deps=[t], chain=True)
        with pytest.raises(hbg.ArgumentError):
            b.graph(0x54, rows, [hbg.f32(s)], m.body)
    np.testing.assert_array_equal(m.act[LAYERS].numpy(), m.reference(s))
    with pytest.raises(hbg.ArgumentError):
        hbg.pack([m.boundary(0), m.boundary(1)[:2]])


@pytest.mark.parametrize("policy", hbg.policies())
def test_graph_cache_limit_evicts(policy):
    """graph_cache_max=2 with three keys per bind: each bind records and
    evicts, stats say so, and the outputs stay right."""
    with hbg.Runtime(policy=policy, graph_cache_max=2) as rt:
        m = Model(rt)
        for step in range(2):
            s = scale_of(step)
            with rt.bind() as b:
                ids = []
                for l in range(LAYERS):
                    ids.append(b.graph(0x60 + l % 3, m.boundary(l),
                                       [hbg.f32(s)], record=m.body,
                                       deps=ids[-1:]))
            assert b.stats.n_evicted >= 1
            np.testing.assert_array_equal(m.act[LAYERS].numpy(),
                                          m.reference(s))
