"""The one-command local demo of runs on a Ray cluster: `make cluster-demo`.

Starts a Ray cluster of two nodes on this machine (ray.cluster_utils.Cluster: real raylets, one machine)
and the app connected to it. With GPUs here, each node gets its share of them; without, each node is
one CPU slot, so two runs go at once, one per node, and the System page lists both nodes. Ctrl-C stops
the app and the cluster. Extra arguments go to `streamlit run` (e.g. --server.port 8531).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from ray.cluster_utils import Cluster

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from tcore.lab.launch.cluster import own_runtime_dir  # noqa: E402


def gpus_here() -> int:
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return 0
    return len([line for line in out.splitlines() if line.startswith("GPU ")])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    streamlit_args = parser.parse_known_args()[1]  # what --help does not take goes to `streamlit run`
    gpus = gpus_here()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "num_gpus": 0})
    for i, share in enumerate((gpus - gpus // 2, gpus // 2) if gpus > 1 else (gpus, 0)):
        cluster.add_node(num_cpus=1, num_gpus=share, **own_runtime_dir(i))
    cluster.wait_for_nodes()
    print(f"Ray cluster at {cluster.address}: 2 nodes, {gpus or 'no'} GPUs; the app connects to it", flush=True)
    env = dict(os.environ, COMPILE_LAB_RAY_ADDRESS=cluster.address)
    try:
        return subprocess.run([sys.executable, "-m", "streamlit", "run", "app.py", *streamlit_args], cwd=REPO,
                              env=env).returncode
    except KeyboardInterrupt:
        return 0
    finally:
        cluster.shutdown()


if __name__ == "__main__":
    sys.exit(main())
