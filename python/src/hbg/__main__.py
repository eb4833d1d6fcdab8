"""python -m hbg bench [options]: `hbg bench` from Python, same options."""
import argparse
import sys

from . import bench, policies, __version__
from ._errors import HbgError


def _bench(argv):
    ap = argparse.ArgumentParser(
        prog="python -m hbg bench",
        description="Run the upload policies side by side on a built-in "
        "workload (the CLI's `hbg bench`, driven from Python).")
    ap.add_argument("--workload", default="qwen3-14b")
    ap.add_argument("--layers", type=int)
    ap.add_argument("--device")
    ap.add_argument("--device-options")
    ap.add_argument("--policy", help="comma list from " + ",".join(policies()))
    ap.add_argument("--arm", help="peer arms: comma list from eager,cuda-graph "
                    "(need --device cuda)")
    ap.add_argument("--rounds", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--interleave", type=int)
    ap.add_argument("--trim", type=float)
    ap.add_argument("--chunk")
    ap.add_argument("--pipeline", action="store_true")
    ap.add_argument("--verify-every")
    ap.add_argument("--json", help="summary as JSON")
    ap.add_argument("--csv")
    ap.add_argument("--svg")
    ap.add_argument("--trace")
    ap.add_argument("--plot", help="PNG/PDF chart via matplotlib")
    ap.add_argument("--quiet", "-q", action="store_true")
    a = ap.parse_args(argv)
    try:
        r = bench(workload=a.workload, policies=a.policy, rounds=a.rounds,
                  warmup=a.warmup, layers=a.layers, device=a.device,
                  device_options=a.device_options, interleave=a.interleave,
                  trim=a.trim, chunk=a.chunk, pipeline=a.pipeline,
                  verify_every=a.verify_every, csv=a.csv, svg=a.svg,
                  trace=a.trace, arms=a.arm)
    except HbgError as e:
        print("python -m hbg bench: %s" % e, file=sys.stderr)
        return 1
    if a.json:
        with open(a.json, "w") as f:
            f.write(r.to_json() + "\n")
    if a.plot:
        r.plot(path=a.plot)
    if not a.quiet:
        sys.stdout.write(r.table)
    return 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["bench"]:
        return _bench(argv[1:])
    if argv[:1] in (["--version"], ["version"]):
        print(__version__)
        return 0
    print("usage: python -m hbg bench [options]   (see --help)\n"
          "       python -m hbg --version", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
