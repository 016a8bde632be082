"""Helpers shared by the benchmark scripts in this folder: free loopback
ports, waiting for a server to listen, and where cargo puts the binaries."""
import json
import os
import socket
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_up(port, secs=20):
    """Wait until something accepts connections on 127.0.0.1:`port`."""
    deadline = time.time() + secs
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"server on port {port} did not start")


def target_dir():
    """Cargo's target directory for this workspace."""
    out = subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--no-deps"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    )
    return json.loads(out.stdout)["target_directory"]
