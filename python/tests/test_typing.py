"""What a numpy or PyTorch user expects of the package: type hints that a
type checker reads (py.typed, and every public function and method
annotated, resolvable with typing.get_type_hints), and the kernels'
semantics in the Python docs (help(hbg.Kernel) and python/README.md)."""
import inspect
import os
import typing

import pytest

import hbg

README = os.path.join(os.path.dirname(__file__), os.pardir, "README.md")


def test_py_typed_marker():
    """PEP 561: without the marker a checker ignores the inline hints."""
    pkg = os.path.dirname(hbg.__file__)
    assert os.path.isfile(os.path.join(pkg, "py.typed"))


def public_callables():
    for name in hbg.__all__:
        obj = getattr(hbg, name)
        if inspect.isclass(obj):
            if issubclass(obj, BaseException) or issubclass(obj, int):
                continue  # exceptions and IntEnums: no hand-written API
            for attr, member in vars(obj).items():
                if attr.startswith("_") and attr not in ("__init__",):
                    continue
                if isinstance(member, (staticmethod, classmethod)):
                    member = member.__func__
                if isinstance(member, property):
                    member = member.fget
                if inspect.isfunction(member) and \
                        member.__qualname__.startswith(obj.__name__ + "."):
                    yield "%s.%s" % (name, attr), member
        elif inspect.isfunction(obj):
            yield name, obj


@pytest.mark.parametrize("name,fn", list(public_callables()),
                         ids=lambda x: x if isinstance(x, str) else "")
def test_public_api_is_annotated(name, fn):
    hints = typing.get_type_hints(fn)  # every annotation resolves
    sig = inspect.signature(fn)
    missing = [p for p in sig.parameters
               if p not in ("self", "cls") and p not in hints and
               sig.parameters[p].kind not in (inspect.Parameter.VAR_POSITIONAL,
                                              inspect.Parameter.VAR_KEYWORD)]
    assert not missing, "%s: parameters without a type: %s" % (name, missing)
    assert "return" in hints, "%s: no return type" % name


def test_kernel_semantics_documented():
    """Kernel semantics were documented only in the C header."""
    with open(README) as f:
        readme = f.read()
    doc = hbg.Kernel.__doc__
    for k in hbg.Kernel:
        assert "| `%s` |" % k.name in readme, k.name
        assert "%s " % k.name in doc, k.name
    for rule in ("in place", "overlap", "f32", "broadcast"):
        assert rule in readme and rule in doc, rule
