"""hbg.bench: the CLI's `hbg bench` driven from Python, same JSON schema."""
import json
import os
import shutil
import subprocess
import tempfile
from typing import Any, Dict, List, Optional, Sequence, Union

from . import _lib as L
from ._core import policies as _policies
from ._errors import ArgumentError, HbgError


class CliNotFoundError(HbgError):
    """The hbg CLI binary was not found; ``tried`` lists every path."""

    def __init__(self, tried: List[str]) -> None:
        self.tried = tried
        HbgError.__init__(self, -6, message="hbg CLI not found; tried: %s "
                          "(set HBG_CLI to build/bin/hbg)" % ", ".join(tried))


def find_cli() -> str:
    """Path of the `hbg` CLI: HBG_CLI, then bin/hbg beside or above the
    loaded library (build tree, install prefix), then a copy next to the
    package, then PATH."""
    tried = []
    cands = []
    if os.environ.get("HBG_CLI"):
        cands.append(os.environ["HBG_CLI"])
    libdir = os.path.dirname(os.path.abspath(L.lib._hbg_path)) \
        if os.sep in L.lib._hbg_path else None
    if libdir:
        cands += [os.path.join(libdir, "bin", "hbg"),
                  os.path.join(libdir, os.pardir, "bin", "hbg")]
    cands.append(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                              "hbg"))
    for c in cands:
        tried.append(c)
        if os.path.isfile(c) and os.access(c, os.X_OK):
            return os.path.normpath(c)
    w = shutil.which("hbg")
    tried.append("PATH")
    if w:
        return w
    raise CliNotFoundError(tried)


class BenchResult:
    """What `hbg bench --json` reports. ``to_dict()`` is that JSON object
    (same schema), ``to_json()`` its text, ``policies`` the per-policy
    entries by name, ``arms`` the peer arms' (``bench(arms=...)``) by name,
    ``table`` the CLI's text table, ``plot()`` a
    matplotlib bar chart of the control-plane phases. A run over several
    devices (``bench(devices=N)``) has ``devices``, one row per device,
    ``aggregate`` (every device together, the worst device per policy) and
    ``n1`` (device 0 alone in the same run)."""

    PHASES = ("host_orch", "graph_upload", "window_upload")

    def __init__(self, data: Dict[str, Any], table: str = "",
                 argv: Sequence[str] = ()) -> None:
        self._d = data
        self.table = table
        self.argv = list(argv)

    def to_dict(self) -> Dict[str, Any]:
        return json.loads(json.dumps(self._d))

    def to_json(self, indent: Optional[int] = 2) -> str:
        return json.dumps(self._d, indent=indent)

    @property
    def policies(self) -> Dict[str, Dict[str, Any]]:
        return {p["name"]: p for p in self._d.get("policies", [])}

    @property
    def arms(self) -> Dict[str, Dict[str, Any]]:
        return {p["name"]: p for p in self._d.get("arms", [])}

    @property
    def devices(self) -> List[Dict[str, Any]]:
        return list(self._d.get("per_device", []))

    @property
    def aggregate(self) -> Optional[Dict[str, Any]]:
        return self._d.get("aggregate")

    @property
    def n1(self) -> Optional[Dict[str, Any]]:
        return self._d.get("n1")

    def __getitem__(self, k: str) -> Any:
        return self._d[k]

    def __repr__(self) -> str:
        if self._d.get("mode") == "devices":
            return "<hbg.BenchResult %s on %d devices: %s>" % (
                self._d.get("workload"), self._d.get("devices"), ", ".join(
                    "%s %.1f us (%.2fx N=1)" % (p["name"],
                                                p["control_plane_median_us"],
                                                p["ratio_to_n1"])
                    for p in self.aggregate["policies"]))
        return "<hbg.BenchResult %s: %s>" % (
            self._d.get("workload"), ", ".join(
                "%s %.1f us" % (p["name"], p["control_plane_us"]["median"])
                for p in self._d.get("policies", [])))

    def plot(self, ax: Any = None, path: Optional[str] = None) -> Any:
        """Stacked bars of the median phases per policy (needs
        matplotlib); saves to path when given. Returns the axes."""
        import matplotlib
        if ax is None and path is not None:
            matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        if ax is None:
            _fig, ax = plt.subplots(figsize=(8, 1 + 0.6 * len(self.policies)))
        names = list(self.policies)
        left = [0.0] * len(names)
        for ph in self.PHASES:
            vals = [self.policies[n]["%s_us" % ph]["median"] or 0.0
                    for n in names]
            ax.barh(names, vals, left=left, label=ph)
            left = [a + b for a, b in zip(left, vals)]
        ax.invert_yaxis()
        ax.set_xlabel("median time per bind (us)")
        ax.set_title("hbg bench: %s, %s layers" % (self._d.get("workload"),
                                                   self._d.get("layers")))
        ax.legend(loc="lower right")
        if path is not None:
            ax.figure.tight_layout()
            ax.figure.savefig(path)
        return ax


def bench(workload: str = "qwen3-14b",
          policies: Union[str, Sequence[str], None] = None,
          rounds: int = 60, warmup: int = 5, layers: Optional[int] = None,
          device: Optional[str] = None, device_options: Optional[str] = None,
          interleave: Optional[int] = None, trim: Optional[float] = None,
          chunk: Union[int, str, None] = None, pipeline: bool = False,
          verify_every: Union[int, str, None] = None,
          host_alloc: Optional[str] = None,
          def_size: Union[int, str, None] = None, csv: Optional[str] = None,
          svg: Optional[str] = None, trace: Optional[str] = None,
          arms: Union[str, Sequence[str], None] = None,
          devices: Optional[int] = None, device_list: Optional[str] = None,
          cli: Optional[str] = None,
          timeout: Optional[float] = None) -> "BenchResult":
    """Run the policies side by side on a built-in workload and return a
    BenchResult. Arguments mirror `hbg bench` (see ``hbg bench --help``);
    policies is a list or comma string (default: every policy the library
    has, hbg.policies()); arms a list or comma string of peer arms
    ("eager", "cuda-graph"; they need device="cuda"). Raises ArgumentError
    for an unknown policy or bad usage (an unknown arm, arms without cuda)
    and HbgError when the run fails or a bind differs from the reference.
    devices=N drives N devices at once, one host thread each, beside
    device 0 alone (``hbg bench --devices N``); device_list a list or comma
    string of device ordinals instead (``--device-list``); the result then
    has ``devices``, ``aggregate`` and ``n1``."""
    have = _policies()
    if policies is None:
        policies = have
    elif isinstance(policies, str):
        policies = policies.split(",")
    for p in policies:
        if p not in have:
            raise ArgumentError(-1, message="unknown policy %r (have: %s)"
                                % (p, ", ".join(have)))
    exe = cli or find_cli()
    with tempfile.TemporaryDirectory(prefix="hbg-bench-") as tmp:
        out = os.path.join(tmp, "bench.json")
        argv = [exe, "bench", "--workload", workload, "--policy",
                ",".join(policies), "--rounds", str(rounds), "--warmup",
                str(warmup), "--json", out]
        opt = [("--layers", layers), ("--device", device),
               ("--device-options", device_options),
               ("--interleave", interleave), ("--trim", trim),
               ("--chunk", chunk), ("--verify-every", verify_every),
               ("--host-alloc", host_alloc), ("--def-size", def_size),
               ("--csv", csv), ("--svg", svg), ("--trace", trace),
               ("--devices", devices)]
        for name, v in opt:
            if v is not None:
                argv += [name, str(v)]
        if arms:
            argv += ["--arm", arms if isinstance(arms, str)
                     else ",".join(arms)]
        if device_list is not None:
            argv += ["--device-list", device_list
                     if isinstance(device_list, str)
                     else ",".join(str(d) for d in device_list)]
        if pipeline:
            argv.append("--pipeline")
        r = subprocess.run(argv, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=timeout)
        if r.returncode == 2:
            raise ArgumentError(-1, message="hbg bench: bad usage: " +
                                r.stderr.strip())
        if r.returncode != 0 or not os.path.exists(out):
            raise HbgError(-19 if "differs" in r.stderr else -4,
                           message="hbg bench failed (exit %d): %s" %
                           (r.returncode, r.stderr.strip()))
        with open(out) as f:
            data = json.load(f)
    return BenchResult(data, r.stdout, argv)
