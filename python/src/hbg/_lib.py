"""Finding libhbg and declaring its C functions (ctypes)."""
import ctypes
import ctypes.util
import os
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char_p, c_double, c_int,
                    c_int32, c_int64, c_size_t, c_uint8, c_uint32, c_uint64,
                    c_void_p)

SONAME = "libhbg.so.0"
MAX_DIMS = 4


class LibraryNotFoundError(ImportError):
    """libhbg could not be loaded; ``tried`` lists every attempt."""

    def __init__(self, tried):
        self.tried = list(tried)
        lines = "\n".join("  %s: %s" % (p, why) for p, why in self.tried)
        super().__init__(
            "hbg: cannot load the hbg C library; tried, in order:\n%s\n"
            "Set HBG_LIBRARY to the built library (e.g. build/libhbg.so), or "
            "install the package from a built tree (`make`, then pip "
            "install ./python: it copies build/libhbg.so.0 into the "
            "package), or copy it next to the hbg package." % lines)


def _candidates():
    env = os.environ.get("HBG_LIBRARY")
    if env:
        yield env, "HBG_LIBRARY"
    here = os.path.dirname(os.path.abspath(__file__))
    for name in (SONAME, "libhbg.so"):
        yield os.path.join(here, name), "next to the package"
    found = ctypes.util.find_library("hbg")
    if found:
        yield found, "ctypes.util.find_library"
    yield SONAME, "system search path"


def load():
    """Load libhbg: HBG_LIBRARY, then a copy next to the package, then the
    system search path. Raises LibraryNotFoundError listing every path."""
    tried = []
    for path, how in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append((path, how + ": no such file"))
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            tried.append((path, "%s: %s" % (how, e)))
            continue
        lib._hbg_path = path
        return lib
    raise LibraryNotFoundError(tried)


# ---- structs (layouts of include/hbg/hbg.h) ----

class Tensor_c(Structure):
    _fields_ = [("addr", c_uint64), ("offset", c_uint64),
                ("shape", c_uint32 * MAX_DIMS),
                ("strides", c_uint32 * MAX_DIMS),
                ("dtype", c_uint8), ("ndim", c_uint8), ("mode", c_uint8),
                ("reserved", c_uint8)]


class Scalar_c(Structure):
    _fields_ = [("value", c_uint64), ("kind", c_uint32), ("index", c_uint32)]


class Task_c(Structure):
    _fields_ = [("kernel", c_uint32), ("n_args", c_uint32),
                ("args", POINTER(Tensor_c)), ("n_scalars", c_uint32),
                ("n_deps", c_uint32), ("scalars", POINTER(Scalar_c)),
                ("deps", POINTER(c_uint32))]


RECORD_FN = CFUNCTYPE(c_int, c_void_p, c_void_p)


class KernelImpl_c(Structure):
    """hbg_kernel_impl (hbg.h): a user kernel for hbg_kernel_register."""
    _fields_ = [("struct_size", c_uint32), ("kernel", c_uint32),
                ("phases", c_uint32), ("rows_of", c_uint32),
                ("scratch_floats", c_uint64), ("fn", c_void_p),
                ("symbol", c_char_p), ("image", c_void_p),
                ("image_size", c_size_t)]


class GraphSubmit_c(Structure):
    _fields_ = [("key", c_uint64), ("variant", POINTER(c_uint64)),
                ("n_variant", c_uint32), ("n_tensors", c_uint32),
                ("tensors", POINTER(Tensor_c)), ("scalars", POINTER(c_uint64)),
                ("n_scalars", c_uint32), ("n_deps", c_uint32),
                ("deps", POINTER(c_uint32)), ("record", RECORD_FN),
                ("user", c_void_p)]


# Config and the out-structs may grow (struct_size): callers overlay these
# on a larger zeroed buffer so that a newer library cannot write past them.
class Config_c(Structure):
    _fields_ = [("struct_size", c_uint32), ("policy", c_uint32),
                ("device", c_char_p), ("device_options", c_char_p),
                ("device_handle", c_void_p), ("arena_bytes", c_uint64),
                ("pipeline_depth", c_uint32),
                ("coalesce_chunk_bytes", c_uint32), ("orch_id", c_uint64),
                ("flags", c_uint32), ("graph_cache_max", c_uint32),
                ("env_invalid", c_char_p), ("deps", c_uint32),
                ("record", c_uint32)]


class PhaseBytes_c(Structure):
    _fields_ = [("bytes", c_uint64), ("copies", c_uint64)]


class BindStats_c(Structure):
    _fields_ = [("struct_size", c_uint32), ("policy", c_uint32),
                ("host_orch_ns", c_uint64), ("graph_upload_ns", c_uint64),
                ("window_upload_ns", c_uint64), ("control_plane_ns", c_uint64),
                ("exec_ns", c_uint64), ("graph", PhaseBytes_c),
                ("window", PhaseBytes_c), ("def_bytes", c_uint64),
                ("h2d_bytes", c_uint64), ("h2d_copies", c_uint64),
                ("n_tasks", c_uint32), ("n_graphs", c_uint32),
                ("n_recorded", c_uint32), ("leftover", c_uint32),
                ("fallback", c_uint32), ("dev_allocs", c_uint32),
                ("arena_high_water", c_uint64), ("fatal", c_int32),
                ("device_status", c_int32), ("n_evicted", c_uint32),
                ("device_ns", c_uint64)]


class TraceEvent_c(Structure):
    _fields_ = [("track", c_uint32), ("reserved", c_uint32),
                ("name", c_char_p), ("start_ns", c_uint64),
                ("dur_ns", c_uint64), ("bytes", c_uint64),
                ("bind_seq", c_uint64)]


TRACE_FN = CFUNCTYPE(None, c_void_p, POINTER(TraceEvent_c))


class WorkloadConfig_c(Structure):
    _fields_ = [("struct_size", c_uint32), ("layers", c_uint32),
                ("name", c_char_p), ("seed", c_uint64),
                ("def_size", c_uint32), ("tasks", c_uint32),
                ("model", c_char_p), ("weight_dtype", c_uint32),
                ("kv_len", c_uint32)]


class WorkloadInfo_c(Structure):
    _fields_ = [("struct_size", c_uint32), ("layers", c_uint32),
                ("n_defs", c_uint32), ("min_nodes", c_uint32),
                ("max_nodes", c_uint32), ("max_btensors", c_uint32),
                ("max_bscalars", c_uint32), ("tasks_before", c_uint32),
                ("tasks_after", c_uint32), ("device_bytes", c_uint64),
                ("node_heap_bytes", c_uint64), ("weight_bytes", c_uint64),
                ("kv_bytes", c_uint64), ("hidden", c_uint32),
                ("vocab", c_uint32)]


NODE_MAX_TENSORS = 16  # HBG_WORKLOAD_NODE_MAX_TENSORS
NODE_MAX_SCALARS = 8   # HBG_WORKLOAD_NODE_MAX_SCALARS


class WorkloadNode_c(Structure):
    _fields_ = [("kernel", c_uint32), ("n_tensors", c_uint32),
                ("n_scalars", c_uint32), ("task", c_uint32),
                ("tensors", Tensor_c * NODE_MAX_TENSORS),
                ("scalars", c_uint64 * NODE_MAX_SCALARS)]


class PeerStats_c(Structure):
    _fields_ = [("struct_size", c_uint32), ("kind", c_uint32)] + [
        (n, c_uint64) for n in (
            "control_plane_ns", "exec_ns", "device_ns", "nodes", "launches",
            "updates", "capture_ns", "instantiate_ns")]


class DevStats_c(Structure):
    _fields_ = [(n, c_uint64) if n != "struct_size" and n != "reserved"
                else (n, c_uint32) for n in (
                    "struct_size", "reserved", "h2d_copies", "h2d_bytes",
                    "d2h_copies", "d2h_bytes", "async_copies",
                    "async_degraded", "pinned_direct", "bounce_chunks",
                    "handshakes", "mem_allocs", "mem_frees", "mem_in_use",
                    "host_allocs", "host_frees", "host_in_use", "launches")]


class DevOpsHead_c(Structure):
    """The leading fields of hbg_dev_ops (include/hbg/hbg_device.h)."""
    _fields_ = [("struct_size", c_uint32), ("abi_version", c_uint32),
                ("name", c_char_p), ("summary", c_char_p)]


GROW_BYTES = 1024


def out_struct(cls):
    """A zeroed cls overlaid on GROW_BYTES (room for a grown C struct)."""
    buf = ctypes.create_string_buffer(max(GROW_BYTES, ctypes.sizeof(cls)))
    s = cls.from_buffer(buf)
    s._keep = buf
    return s


_P = c_void_p
_SIGS = {
    "hbg_version_number": (c_uint32, []),
    "hbg_version_string": (c_char_p, []),
    "hbg_err_name": (c_char_p, [c_int]),
    "hbg_strerror": (c_char_p, [c_int]),
    "hbg_last_error": (c_char_p, []),
    "hbg_dtype_size": (c_uint32, [c_uint32]),
    "hbg_tensor_contig": (c_int, [POINTER(Tensor_c), c_uint64, c_uint64,
                                  c_uint32, c_uint32, POINTER(c_uint32),
                                  c_uint32]),
    "hbg_tensor_extent": (c_uint64, [POINTER(Tensor_c)]),
    "hbg_policy_name": (c_char_p, [c_int]),
    "hbg_policy_parse": (c_int, [c_char_p, POINTER(c_int)]),
    "hbg_deps_parse": (c_int, [c_char_p, POINTER(c_int)]),
    "hbg_record_parse": (c_int, [c_char_p, POINTER(c_int)]),
    "hbg_config_init": (None, [_P]),
    "hbg_runtime_create": (c_int, [_P, POINTER(_P)]),
    "hbg_runtime_destroy": (None, [_P]),
    "hbg_runtime_device": (_P, [_P]),
    "hbg_runtime_policy": (c_int, [_P]),
    "hbg_runtime_last_native_error": (c_int, [_P, POINTER(c_int64),
                                              POINTER(c_char_p)]),
    "hbg_buffer_alloc": (c_int, [_P, c_uint64, POINTER(c_uint64)]),
    "hbg_buffer_free": (c_int, [_P, c_uint64]),
    "hbg_buffer_write": (c_int, [_P, c_uint64, _P, c_uint64]),
    "hbg_buffer_read": (c_int, [_P, _P, c_uint64, c_uint64]),
    # DLPack interop (issue 38): caller memory as a buffer, the host
    # address of device memory (sim), a launch on the caller's stream
    "hbg_buffer_import": (c_int, [_P, c_uint64, c_uint64, POINTER(c_uint64)]),
    "hbg_buffer_host_ptr": (c_int, [_P, c_uint64, c_uint64, POINTER(_P)]),
    "hbg_bind_launch_on": (c_int, [_P, _P]),
    "hbg_runtime_stream_forget": (c_int, [_P, _P]),
    "hbg_bind_begin": (c_int, [_P, POINTER(_P)]),
    "hbg_submit_task": (c_int, [_P, POINTER(Task_c), POINTER(c_uint32)]),
    "hbg_submit_graph": (c_int, [_P, POINTER(GraphSubmit_c),
                                 POINTER(c_uint32)]),
    "hbg_submit_graph_n": (c_int, [_P, POINTER(GraphSubmit_c), c_uint32,
                                   c_uint32, POINTER(c_uint32)]),
    "hbg_record_task": (c_int, [_P, POINTER(Task_c), POINTER(c_uint32)]),
    "hbg_record_tensors": (POINTER(Tensor_c), [_P, POINTER(c_uint32)]),
    "hbg_record_scalars": (POINTER(c_uint64), [_P, POINTER(c_uint32)]),
    "hbg_bind_launch": (c_int, [_P]),
    "hbg_bind_wait": (c_int, [_P]),
    "hbg_bind_stats_get": (c_int, [_P, _P]),
    "hbg_bind_fatal": (c_int, [_P]),
    "hbg_bind_error_location": (c_int, [_P, POINTER(c_uint32),
                                        POINTER(c_uint32)]),
    "hbg_bind_end": (None, [_P]),
    "hbg_runtime_set_trace": (c_int, [_P, TRACE_FN, _P]),
    "hbg_image_dump": (c_int, [_P, c_size_t, c_int, _P]),
    "hbg_workload_config_init": (None, [_P]),
    "hbg_workload_count": (c_uint32, []),
    "hbg_workload_name": (c_char_p, [c_uint32]),
    "hbg_workload_create": (c_int, [_P, _P, POINTER(_P)]),
    "hbg_workload_destroy": (None, [_P]),
    "hbg_workload_get_info": (c_int, [_P, _P]),
    "hbg_workload_submit": (c_int, [_P, _P, c_uint32]),
    "hbg_workload_verify": (c_int, [_P, c_uint32, POINTER(c_double)]),
    "hbg_workload_bytes": (c_int, [_P, POINTER(c_uint64)]),
    "hbg_workload_hidden": (c_int, [_P, c_uint32, _P, c_uint32]),
    "hbg_workload_token": (c_uint32, [_P, c_uint32]),
    "hbg_workload_nodes": (c_int, [_P, c_uint32, c_uint64,
                                   POINTER(WorkloadNode_c), c_uint32,
                                   POINTER(c_uint32)]),
    "hbg_kernel_register": (c_int, [_P, POINTER(KernelImpl_c), c_uint32]),
    # hbg_peer.h
    "hbg_peer_name": (c_char_p, [c_int]),
    "hbg_peer_parse": (c_int, [c_char_p, POINTER(c_int)]),
    "hbg_peer_create": (c_int, [_P, c_int, POINTER(_P)]),
    "hbg_peer_launch": (c_int, [_P, c_uint32]),
    "hbg_peer_wait": (c_int, [_P, _P]),
    "hbg_peer_destroy": (None, [_P]),
    # from hbg_device.h: backend listing, device counters, open errors
    "hbg_device_count": (c_uint32, []),
    "hbg_device_backend": (POINTER(DevOpsHead_c), [c_uint32]),
    "hbg_device_open_error": (c_char_p, []),
    "hbg_dev_stats_get": (c_int, [_P, _P]),
    "hbg_dev_host_register": (c_int, [_P, _P, c_size_t]),
    "hbg_dev_host_unregister": (c_int, [_P, _P]),
    "hbg_device_name": (c_char_p, [_P]),
    "hbg_dev_queue_create": (c_int, [_P, POINTER(_P)]),
    "hbg_dev_queue_destroy": (c_int, [_P, _P]),
    "hbg_dev_queue_sync": (c_int, [_P, _P]),
}

# Newer entry points: bound when the library has them.
PEER_FNS = ("hbg_peer_name", "hbg_peer_parse", "hbg_peer_create",
            "hbg_peer_launch", "hbg_peer_wait", "hbg_peer_destroy")
INTEROP_FNS = ("hbg_buffer_import", "hbg_buffer_host_ptr", "hbg_bind_launch_on",
               "hbg_runtime_stream_forget")
OPTIONAL = {"hbg_submit_graph_n", "hbg_kernel_register"} | set(PEER_FNS) | \
    set(INTEROP_FNS)


def declare(lib):
    for name, (res, args) in _SIGS.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            if name in OPTIONAL:
                continue
            raise
        fn.restype = res
        fn.argtypes = args
    return lib


lib = declare(load())
HAVE_BATCH = hasattr(lib, "hbg_submit_graph_n")
HAVE_PEER = all(hasattr(lib, n) for n in PEER_FNS)
HAVE_KERNEL_REGISTER = hasattr(lib, "hbg_kernel_register")
HAVE_IMPORT = hasattr(lib, "hbg_buffer_import")
HAVE_HOST_PTR = hasattr(lib, "hbg_buffer_host_ptr")
HAVE_LAUNCH_ON = hasattr(lib, "hbg_bind_launch_on")
HAVE_STREAM_FORGET = hasattr(lib, "hbg_runtime_stream_forget")


def libc():
    return ctypes.CDLL(None)
