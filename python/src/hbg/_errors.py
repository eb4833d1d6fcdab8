"""hbg error codes as Python exceptions."""
from typing import Type

from ._lib import lib


class HbgError(Exception):
    """An hbg call failed.

    Attributes: ``code`` (the negative HBG_E_* value), ``name``
    (``"HBG_E_INVAL"``), ``message`` (the library's text, plus the
    backend-native error when the runtime recorded one), ``native``
    (``(code, message)`` of that native error, code None when the backend
    gave only a message, or None).
    """

    def __init__(self, code, name=None, message=None, native=None,
                 where=None):
        self.code = int(code)
        self.name = name or err_name(self.code)
        self.message = message or strerror(self.code)
        self.native = native
        self.where = where
        text = "%s: %s" % (self.name, self.message)
        if where:
            text = "%s: %s" % (where, text)
        if native and native[0] is None:
            text += " (%s)" % native[1]
        elif native:
            text += " (native error %d: %s)" % native
        super().__init__(text)


class ArgumentError(HbgError, ValueError):
    """Bad argument: invalid value, unknown name, shape, kernel, limit."""


class StateError(HbgError):
    """Call not valid now: closed runtime, ended bind, double launch,
    nesting, a latched fatal bind, a failed record callback."""


class DeviceError(HbgError):
    """Device or host resources: memory, backend errors, I/O, loading,
    injected faults, verification against the host reference."""


class ImageError(HbgError):
    """A Definition / Submission / window image failed validation."""


class OutOfRangeError(ArgumentError, OverflowError):
    """An int or float that the C field it goes to cannot hold: a scalar
    outside both the u64 and the i64 range, a float beyond the f32 range,
    a key, size, address or id too large or negative. Nothing is truncated:
    the message names the argument and its value. Also an OverflowError."""


class DeviceSideError(HbgError):
    """An error the device reported for a launched bind (``Bind.wait``):
    it validates the images and checks values only it sees (a ROPE
    position, an ATTN length). ``task`` is the failing entry's task id
    (what ``Bind.task()`` / ``Bind.graph()`` returned; also ``entry``, the
    window entry, the same number), ``node`` the failing inner node of a
    graph (the id ``Recorder.task()`` returned), or None for an ordinary
    task or an error in a graph's images as a whole; both None when the
    device could not name an entry. Each instance is also of its code's
    family (ArgumentError, DeviceError, ImageError, StateError)."""

    def __init__(self, code, entry=None, node=None, **kw):
        self.entry = self.task = entry
        self.node = node
        super().__init__(code, **kw)


_ARGUMENT = {"INVAL", "NOTFOUND", "RANGE", "SIGNATURE", "LIMIT", "KERNEL",
             "EMPTY"}
_STATE = {"STATE", "AGAIN", "FATAL", "NESTED", "BUSY", "RECORD"}


def err_name(code: int) -> str:
    """``hbg_err_name``: "HBG_E_INVAL" style name of an error code."""
    return lib.hbg_err_name(int(code)).decode()


def strerror(code: int) -> str:
    """``hbg_strerror``: the library's message for an error code."""
    return lib.hbg_strerror(int(code)).decode()


def error_class(code: int) -> Type[HbgError]:
    """The HbgError subclass for an error code's family."""
    short = err_name(code)[len("HBG_E_"):]
    if short.startswith("IMG_"):
        return ImageError
    if short in _ARGUMENT:
        return ArgumentError
    if short in _STATE:
        return StateError
    if short == "UNKNOWN":
        return HbgError
    return DeviceError


class _DeviceSideArgumentError(DeviceSideError, ArgumentError):
    pass


class _DeviceSideStateError(DeviceSideError, StateError):
    pass


class _DeviceSideDeviceError(DeviceSideError, DeviceError):
    pass


class _DeviceSideImageError(DeviceSideError, ImageError):
    pass


_DEVICE_SIDE = {ArgumentError: _DeviceSideArgumentError,
                StateError: _DeviceSideStateError,
                DeviceError: _DeviceSideDeviceError,
                ImageError: _DeviceSideImageError,
                HbgError: DeviceSideError}


def make_error(code, where=None, native=None, message=None):
    return error_class(code)(code, message=message, native=native,
                             where=where)


def device_side_error(code, entry, node, where=None, native=None):
    """The DeviceSideError (of code's family) for a failed bind: entry and
    node as hbg_bind_error_location gives them (None when unknown)."""
    if entry is None:
        at = "at no entry the device could name"
    elif node is None:
        at = "at task %d" % entry
    else:
        at = "at task %d, graph node %d" % (entry, node)
    cls = _DEVICE_SIDE[error_class(code)]
    return cls(code, entry=entry, node=node, where=where, native=native,
               message="%s %s" % (strerror(code), at))


def out_of_range(what, value, limits):
    """The OutOfRangeError for argument `what` holding `value`."""
    return OutOfRangeError(-1, message="%s: %r is out of range (%s)" % (
        what, value, limits))
