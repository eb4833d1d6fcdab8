"""Module-level API: version, names, errors, dtypes, tensors, images."""
import subprocess
import sys

import numpy as np
import pytest

import hbg
from conftest import corpus


def test_version_matches_library():
    assert hbg.__version__ == hbg.version()
    parts = [int(x) for x in hbg.__version__.split(".")]
    assert len(parts) == 3
    assert hbg._L.lib.hbg_version_number() == \
        parts[0] * 10000 + parts[1] * 100 + parts[2]


def test_policies_enumerated_from_library():
    names = hbg.policies()
    assert names[:3] == ["deferred", "pinned-eager", "coalesced"]
    assert hbg._L.lib.hbg_policy_name(len(names)) is None


def test_workloads_and_devices():
    assert "qwen3-14b" in hbg.workloads() and "dsv4" in hbg.workloads()
    names = [n for n, _ in hbg.devices()]
    assert "sim" in names


@pytest.mark.parametrize("code,cls", [
    (-1, hbg.ArgumentError), (-6, hbg.ArgumentError), (-14, hbg.ArgumentError),
    (-7, hbg.StateError), (-10, hbg.StateError), (-11, hbg.StateError),
    (-3, hbg.DeviceError), (-4, hbg.DeviceError), (-19, hbg.DeviceError),
    (-33, hbg.ImageError), (-46, hbg.ImageError), (-999, hbg.HbgError),
])
def test_error_families(code, cls):
    assert hbg.error_class(code) is cls
    e = hbg.error_class(code)(code)
    assert isinstance(e, hbg.HbgError)
    assert e.code == code
    assert e.name == hbg.err_name(code)
    assert e.message == hbg.strerror(code)
    assert e.name in str(e)


def test_error_names_from_library():
    assert hbg.err_name(-1) == "HBG_E_INVAL"
    assert hbg.strerror(-1) == "invalid argument"
    assert hbg.err_name(-999) == "HBG_E_UNKNOWN"


@pytest.mark.parametrize("d,want", [
    (np.float32, hbg.DType.F32), ("f16", hbg.DType.F16),
    (np.dtype("int64"), hbg.DType.I64), ("bf16", hbg.DType.BF16),
    (np.uint8, hbg.DType.U8), (4, hbg.DType.I32)])
def test_dtypes(d, want):
    t = hbg.Tensor(0x1000, (2, 3), d)
    assert t.dtype == want
    assert t.extent == 6 * hbg.dtype_size(want)


@pytest.mark.parametrize("bad", [np.float64, "complex", np.complex64, 99,
                                 object])
def test_bad_dtype(bad):
    with pytest.raises(hbg.ArgumentError):
        hbg.Tensor(0x1000, (4,), bad)


def test_tensor_layout():
    t = hbg.Tensor(0x1000, (2, 3, 4), "f32", "out", offset=16)
    assert t.shape == (2, 3, 4) and t.strides == (12, 4, 1)
    assert t.mode == hbg.Access.OUT and t.offset == 16 and t.addr == 0x1000
    s = hbg.Tensor(0x1000, (2, 3), "f32", strides=(1, 2))
    assert s.strides == (1, 2) and s.extent == 6 * 4
    assert t.with_mode("in").mode == hbg.Access.IN and t.mode == hbg.Access.OUT
    for shape in [(), (0,), (1, 2, 3, 4, 5)]:
        with pytest.raises(hbg.ArgumentError):
            hbg.Tensor(0x1000, shape)
    with pytest.raises(hbg.ArgumentError):
        hbg.Tensor(0x1000, (4,), mode="sideways")


def test_scalars():
    assert hbg.f32(1.0) == 0x3F800000
    assert hbg.Scalar.static(1.0).value == 0x3F800000
    assert hbg.Scalar.static(7).value == 7
    b = hbg.Scalar.boundary(3)
    assert (b.kind, b.index) == (1, 3)


def test_image_dump(tmp_path):
    with pytest.raises(hbg.ImageError) as ei:
        hbg.image_dump(b"\0" * 3)
    assert ei.value.name == "HBG_E_IMG_TRUNCATED"
    with pytest.raises(hbg.ImageError) as ei:
        hbg.image_dump(b"x" * 256)
    assert ei.value.name == "HBG_E_IMG_MAGIC"
    d = corpus(tmp_path)
    img = (d / "def_small.bin").read_bytes()
    text = hbg.image_dump(img)
    assert "definition" in text.lower()
    import json
    assert isinstance(json.loads(hbg.image_dump(img, json=True)), dict)


def test_help_shows_docstrings():
    import pydoc
    text = pydoc.render_doc(hbg.Runtime)
    assert "Begin a bind" in text and "hbg_dev_stats_get" in text
    assert "hbg_submit_graph_n" in pydoc.render_doc(hbg.Bind)


def test_library_lookup_lists_paths(tmp_path):
    code = "import hbg"
    env = {"HBG_LIBRARY": str(tmp_path / "nope.so"), "PATH": "/usr/bin:/bin",
           "PYTHONPATH": ":".join(sys.path)}
    r = subprocess.run([sys.executable, "-c", code], env=env,
                       stderr=subprocess.PIPE, text=True)
    if r.returncode == 0:
        pytest.skip("a libhbg is installed next to the package or system-wide")
    assert "nope.so" in r.stderr and "HBG_LIBRARY" in r.stderr
    assert "next to the package" in r.stderr
    assert "system search path" in r.stderr
    assert "pip install ./python" in r.stderr  # how to get a copy there
