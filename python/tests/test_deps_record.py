"""Runtime(deps=..., record=...): inferred dependencies between a bind's
entries, per-bind recording, and their bad values."""
import pytest

import hbg


def run_steps(rt, steps):
    w = rt.workload("qwen3-14b", layers=3)
    recorded = []
    for step in steps:
        with rt.bind() as b:
            w.submit(b, step)
        assert w.verify(step) == 0.0
        recorded.append(b.stats.n_recorded)
    return recorded


def test_inferred_deps_verify_without_explicit_ids():
    # the workload names no dependency on a runtime that infers them
    with hbg.Runtime(deps="inferred") as rt:
        run_steps(rt, [0, 1, 2])


def test_record_per_bind_records_every_bind():
    with hbg.Runtime(record="per-bind") as rt:
        assert run_steps(rt, [0, 1, 2]) == [1, 1, 1]
    with hbg.Runtime(record="once") as rt:
        assert run_steps(rt, [0, 1, 2]) == [1, 0, 0]


@pytest.mark.parametrize("kw", [{"deps": "implicit"}, {"record": "twice"}])
def test_bad_values(kw):
    with pytest.raises(hbg.ArgumentError) as ei:
        hbg.Runtime(**kw)
    assert repr(list(kw.values())[0]) in str(ei.value)
