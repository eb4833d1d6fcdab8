"""Peer executors (hbg.Peer): on the cuda stand-in driver when the test
environment names it (HBG_TEST_CUDA_LIB, set by CTest), else only the
errors a machine without the cuda backend gives. Under CTest the library
is the one just built, which always exports hbg_peer_*
(HBG_TEST_REQUIRE_PEER=1): there a library without them fails, elsewhere
(an older installed libhbg) the module is skipped."""
import os

import pytest

import hbg

REQUIRE_PEER = os.environ.get("HBG_TEST_REQUIRE_PEER") == "1"

pytestmark = pytest.mark.skipif(not hbg._L.HAVE_PEER and not REQUIRE_PEER,
                                reason="libhbg without hbg_peer_*")

MOCK = os.environ.get("HBG_TEST_CUDA_LIB")


def test_library_exports_the_peer_calls():
    missing = [n for n in hbg._L.PEER_FNS if not hasattr(hbg._L.lib, n)]
    assert not missing, "libhbg lacks %s" % ", ".join(missing)


def test_peer_names():
    assert hbg.peers() == ["eager", "cuda-graph"]


def test_unknown_kind_is_an_argument_error():
    with hbg.Runtime() as rt, rt.workload("qwen3-14b", layers=1) as w:
        with pytest.raises(hbg.ArgumentError, match="cuda-graph"):
            hbg.Peer(w, "graph")


def test_sim_device_is_unsupported():
    with hbg.Runtime() as rt, rt.workload("qwen3-14b", layers=1) as w:
        with pytest.raises(hbg.HbgError) as e:
            hbg.Peer(w, "eager")
        assert e.value.name == "HBG_E_UNSUPPORTED"


@pytest.mark.skipif(not MOCK, reason="no cuda stand-in (HBG_TEST_CUDA_LIB)")
@pytest.mark.parametrize("kind", ["eager", "cuda-graph"])
@pytest.mark.parametrize("name", ["qwen3-14b", "dsv4"])
def test_peer_steps_verify_on_the_stand_in(kind, name):
    with hbg.Runtime(device="cuda", device_options="lib=" + MOCK) as rt:
        w = rt.workload(name, layers=2)
        p = hbg.Peer(w, kind)
        calls = len(w.nodes(0, 64))
        seen = []
        for step in (3, 4, 9):
            st = p.run(step)
            w.verify(step)
            assert st.nodes == calls
            seen.append(st)
        if kind == "eager":
            assert all(s.launches == calls and s.capture_ns == 0
                       for s in seen)
        else:
            assert seen[0].capture_ns > 0 and seen[0].instantiate_ns > 0
            assert all(s.launches == 1 for s in seen)
            assert all(s.capture_ns == 0 for s in seen[1:])
            assert all(0 < s.updates < calls for s in seen[1:])
        # closing the workload closes its peer first
        w.close()
        with pytest.raises(hbg.StateError):
            p.launch(5)
