"""Which implementation makes the hot-path calls (tensor views, task and
graph submissions, bind begin / launch / wait / end, buffer write / read):
the C extension hbg._native when it was built, else ctypes (_cbackend).
HBG_PY_NATIVE=0 forces ctypes; HBG_PY_NATIVE=1 makes a missing extension
an ImportError instead of a quiet fallback."""
import os

from . import _cbackend

WANT = os.environ.get("HBG_PY_NATIVE", "")
native_error = None
"""Why hbg._native was not used (the ImportError), or None."""

if WANT == "0":
    B = _cbackend
else:
    try:
        from . import _native as B
    except ImportError as e:
        if WANT == "1":
            raise ImportError("hbg: HBG_PY_NATIVE=1 but the extension "
                              "hbg._native cannot be imported: %s" % e) from e
        native_error = e
        B = _cbackend

NAME = "ctypes" if B is _cbackend else "native"
