import gc
import os

import pytest

import hbg

POLICIES = hbg.policies()


@pytest.fixture(params=POLICIES)
def rt(request):
    with hbg.Runtime(policy=request.param, device="sim") as r:
        yield r
    gc.collect()


@pytest.fixture
def rt1():
    with hbg.Runtime(policy="coalesced", device="sim") as r:
        yield r


def rss_pages():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1])


def corpus(tmp_path):
    gen = os.environ.get("HBG_CORPUS_GEN")
    if not gen or not os.path.exists(gen):
        pytest.skip("HBG_CORPUS_GEN not set (run through ctest)")
    import subprocess
    subprocess.run([gen, str(tmp_path)], check=True, stdout=subprocess.DEVNULL)
    return tmp_path
