"""Built-in workloads, hbg.bench against the CLI's JSON, python -m hbg."""
import json
import os
import subprocess
import sys

import pytest

import hbg


def test_workload_submit_and_verify(rt):
    with rt.workload("qwen3-14b", layers=3) as w:
        info = w.info
        assert info.layers == 3 and info.n_defs == 1
        assert info.max_nodes == 277 and info.max_btensors == 26
        for step in range(2):
            with rt.bind() as b:
                w.submit(b, step)
            assert w.verify(step) == 0.0
            assert b.stats.n_graphs == 3
    with pytest.raises(hbg.StateError):
        w.info


def test_workload_nodes_are_the_step(rt):
    """The step's calls, run as chained ordinary tasks in one bind, write
    what the step writes."""
    with rt.workload("qwen3-14b", layers=2) as w:
        info = w.info
        heap = rt.alloc(info.node_heap_bytes)
        for step in (3, 8):
            calls = w.nodes(step, heap.addr)
            assert len(calls) == info.tasks_before + info.tasks_after + \
                2 * info.max_nodes
            assert calls[-1].task == info.tasks_before + 2 + \
                info.tasks_after - 1
            with rt.bind() as b:
                prev = ()
                for c in calls:
                    prev = (b.task(c.kernel, list(c.tensors), c.scalars,
                                   prev),)
            assert w.verify(step) == 0.0
        with pytest.raises(hbg.ArgumentError) as ei:
            w.nodes(0, heap.addr + 32)
        assert ei.value.name == "HBG_E_INVAL"
        heap.free()


def test_workload_errors(rt1):
    with pytest.raises(hbg.ArgumentError) as ei:
        rt1.workload("no-such-workload")
    assert ei.value.name == "HBG_E_NOTFOUND"
    with pytest.raises(hbg.ArgumentError) as ei:
        rt1.workload("dsv4", layers=200000)
    assert ei.value.name == "HBG_E_LIMIT"
    with rt1.workload("dsv4", layers=2) as w:
        b = rt1.bind()
        b.launch()
        with pytest.raises(hbg.StateError):
            w.submit(b, 0)  # bind already launched
        b.end()


def test_workload_def_size_pads_definitions(rt):
    """def_size reaches the recorder: the Definition bytes a bind ships
    grow to the padded size, and the padded run still verifies."""
    per_def = {}
    for size in (0, 256 << 10):
        with rt.workload("qwen3-14b", layers=2, def_size=size) as w:
            with rt.bind() as b:
                w.submit(b, 0)
            assert w.verify(0) == 0.0
            per_def[size] = b.stats.def_bytes
    if rt.policy == "coalesced":  # resident: uploaded once, first bind
        assert 0 < per_def[0] < 65536
        assert per_def[256 << 10] == 256 << 10
    else:  # every Submission carries its Definition
        assert per_def[0] < 2 * 65536
        assert per_def[256 << 10] == 2 * (256 << 10)


def test_workload_def_size_limit(rt1):
    with pytest.raises(hbg.ArgumentError) as ei:
        rt1.workload("qwen3-14b", layers=1, def_size=(16 << 20) + 8)
    assert ei.value.name == "HBG_E_LIMIT"


def test_workload_freed_with_runtime_memory(rt1):
    base = rt1.device_stats().mem_in_use
    w = rt1.workload("qwen3-14b", layers=2)
    assert rt1.device_stats().mem_in_use >= base + w.info.device_bytes
    del w
    import gc
    gc.collect()
    assert rt1.device_stats().mem_in_use == base


def keys(x, path=""):
    if isinstance(x, dict):
        out = {path + "/" + k for k in x}
        for k, v in x.items():
            out |= keys(v, path + "/" + k)
        return out
    if isinstance(x, list):
        out = set()
        for v in x:
            out |= keys(v, path + "[]")
        return out
    return set()


def test_bench_same_schema_as_cli(tmp_path):
    r = hbg.bench(workload="qwen3-14b", layers=4, rounds=6, warmup=1)
    d = r.to_dict()
    names = [p["name"] for p in d["policies"]]
    assert names == hbg.policies()
    assert all(p["verified"] for p in d["policies"])
    out = tmp_path / "cli.json"
    subprocess.run([hbg.find_cli(), "bench", "--workload", "qwen3-14b",
                    "--layers", "4", "--rounds", "6", "--warmup", "1",
                    "--quiet", "--json", str(out)], check=True)
    cli = json.loads(out.read_text())
    assert keys(d) == keys(cli)
    assert json.loads(r.to_json()) == d
    assert set(r.policies) == set(names)
    assert r["arms"] == [] and r.arms == {}
    assert all(p["device_us"]["median"] > 0 for p in d["policies"])
    assert "control_plane" in r.table


def test_bench_policy_subset_and_errors():
    r = hbg.bench(workload="dsv4", layers=2, policies="coalesced,deferred",
                  rounds=2, warmup=0, interleave=1, pipeline=True)
    assert [p["name"] for p in r["policies"]] == ["coalesced", "deferred"]
    assert r["pipeline"] is True
    r = hbg.bench(layers=1, policies="deferred", rounds=1, warmup=0,
                  host_alloc="trim", def_size=65536)
    assert r["host_alloc"] == "trim" and r["def_size"] == 65536
    with pytest.raises(hbg.ArgumentError):
        hbg.bench(layers=1, rounds=1, warmup=0, host_alloc="sometimes")
    with pytest.raises(hbg.ArgumentError):
        hbg.bench(policies=["no-such-policy"], rounds=1)
    with pytest.raises(hbg.ArgumentError):
        hbg.bench(workload="qwen3-14b", rounds=0)
    with pytest.raises(hbg.HbgError):
        hbg.bench(workload="no-such-workload", rounds=1, warmup=0)
    # peer arms: an unknown one, or any on the sim, is refused before a run
    with pytest.raises(hbg.ArgumentError, match="bad --arm"):
        hbg.bench(arms="nope", rounds=1)
    with pytest.raises(hbg.ArgumentError, match="needs --device cuda"):
        hbg.bench(arms=["eager", "cuda-graph"], device="sim", rounds=1)


def test_bench_devices():
    r = hbg.bench(layers=2, policies="coalesced,deferred", rounds=4,
                  warmup=1, devices=2)
    assert r["mode"] == "devices" and len(r.devices) == 2
    assert [d["ordinal"] for d in r.devices] == [0, 1]
    assert all(d["verified"] for d in r.devices)
    assert r.aggregate["verified"] and r.n1["device"]["verified"]
    names = [p["name"] for p in r.aggregate["policies"]]
    assert names == ["coalesced", "deferred"]
    for d in r.devices:
        assert [p["name"] for p in d["policies"]] == names
        assert all(p["ratio_to_n1"] > 0 for p in d["policies"])
        assert d["thread_cpu_s"] > 0
    assert "on 2 devices" in repr(r) and "worst device" in r.table
    r = hbg.bench(layers=1, policies="deferred", rounds=2, warmup=0,
                  device_list=[2, 0])
    assert [d["ordinal"] for d in r.devices] == [2, 0]
    with pytest.raises(hbg.ArgumentError, match="--devices"):
        hbg.bench(rounds=1, devices=0)
    with pytest.raises(hbg.ArgumentError, match="--device-list"):
        hbg.bench(rounds=1, device_list="1,1")
    with pytest.raises(hbg.ArgumentError, match="for one device"):
        hbg.bench(rounds=1, devices=2, csv="x.csv")


def test_python_m_hbg_bench(tmp_path):
    out = tmp_path / "b.json"
    r = subprocess.run([sys.executable, "-m", "hbg", "bench", "--workload",
                        "qwen3-14b", "--layers", "2", "--rounds", "2",
                        "--warmup", "0", "--policy", "coalesced", "--json",
                        str(out)], stdout=subprocess.PIPE, text=True,
                       env=dict(os.environ))
    assert r.returncode == 0
    assert "coalesced" in r.stdout
    assert json.loads(out.read_text())["policies"][0]["name"] == "coalesced"
    r = subprocess.run([sys.executable, "-m", "hbg", "bench", "--policy",
                        "nope", "--rounds", "1"], stderr=subprocess.PIPE,
                       text=True)
    assert r.returncode == 1 and "nope" in r.stderr
    r = subprocess.run([sys.executable, "-m", "hbg", "bench", "--arm",
                        "eager", "--device", "sim", "--rounds", "1"],
                       stderr=subprocess.PIPE, text=True)
    assert r.returncode == 1 and "needs --device cuda" in r.stderr


def test_plot(tmp_path):
    pytest.importorskip("matplotlib")
    r = hbg.bench(workload="qwen3-14b", layers=2, rounds=2, warmup=0)
    r.plot(path=str(tmp_path / "p.png"))
    assert (tmp_path / "p.png").stat().st_size > 0


EXAMPLES = os.path.join(os.path.dirname(__file__), os.pardir, "examples")


@pytest.mark.parametrize("script,args", [
    ("decode_loop.py", []),
    ("control_plane_cost.py", ["--rounds", "2", "--warmup", "0"]),
])
def test_examples_run(script, args):
    r = subprocess.run([sys.executable, os.path.join(EXAMPLES, script)] +
                       args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True)
    assert r.returncode == 0, r.stderr
    assert "MISMATCH" not in r.stdout
    assert "match" in r.stdout
