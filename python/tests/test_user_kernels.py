"""User kernels from Python (Runtime.register_kernels, hbg_kernel_register):
the example's kernels (examples/user_kernel_ops.c) run on the sim from their
cc build (HBG_TEST_UK_LIB, set by CTest) and, when CTest names the cuda
stand-in (HBG_TEST_CUDA_LIB) and the nvcc build (HBG_TEST_UK_PTX), on it,
bit-exact with numpy; refusals raise the library's error with its
message."""
import os

import numpy as np
import pytest

import hbg

UK_LIB = os.environ.get("HBG_TEST_UK_LIB")
UK_PTX = os.environ.get("HBG_TEST_UK_PTX")
MOCK = os.environ.get("HBG_TEST_CUDA_LIB")
AXPBY = 0x1001

pytestmark = [
    pytest.mark.skipif(not hbg._L.HAVE_KERNEL_REGISTER,
                       reason="libhbg without hbg_kernel_register"),
    pytest.mark.skipif(not UK_LIB, reason="HBG_TEST_UK_LIB not set (ctest)"),
]


def axpby(image=None):
    return hbg.UserKernel(AXPBY, "uk_axpby", host_library=UK_LIB,
                          image=image)


def run_axpby(rt, n=300):
    a = (np.arange(n, dtype=np.float32) - 150.0) / np.float32(7.0)
    b = np.cos(np.arange(n, dtype=np.float32)).astype(np.float32)
    da, db, out = rt.buffer(a), rt.buffer(b), rt.alloc(4 * n)
    with rt.bind() as bd:
        bd.task(AXPBY, [da.tensor(n), db.tensor(n), out.tensor(n, mode="out")],
                scalars=[hbg.Scalar.static(hbg.f32(1.5)),
                         hbg.Scalar.static(hbg.f32(-0.25))])
    got = out.numpy(np.float32)
    want = np.float32(1.5) * a + np.float32(-0.25) * b
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("lanes", [1, 5])
def test_sim_runs_the_host_build(lanes):
    with hbg.Runtime(device="sim", device_options="lanes=%d" % lanes) as rt:
        rt.register_kernels([axpby()])
        run_axpby(rt)


def test_refusals_raise_with_the_message():
    with hbg.Runtime(device="sim") as rt:
        rt.register_kernels([axpby()])
        with pytest.raises(hbg.StateError) as e:
            rt.register_kernels([axpby()])
        assert e.value.name == "HBG_E_BUSY"
        assert "0x1001" in str(e.value)
        with pytest.raises(hbg.ArgumentError) as e:
            rt.register_kernels([hbg.UserKernel(0x1002, "uk_axpby", phases=0,
                                                host_library=UK_LIB)])
        assert "phases 0" in str(e.value)


@pytest.mark.skipif(not (MOCK and UK_PTX),
                    reason="no cuda stand-in or PTX (HBG_TEST_CUDA_LIB, "
                           "HBG_TEST_UK_PTX)")
def test_cuda_stand_in_links_the_device_code(monkeypatch):
    monkeypatch.setenv("HBG_MOCK_USER_LIB", UK_LIB)
    with open(UK_PTX, "rb") as f:
        ptx = f.read()
    with hbg.Runtime(device="cuda", device_options="lib=" + MOCK) as rt:
        with pytest.raises(hbg.ArgumentError) as e:
            rt.register_kernels([axpby(image=b"not device code at all")])
        assert "not device code" in str(e.value)
        rt.register_kernels([axpby(image=ptx)])
        run_axpby(rt)
