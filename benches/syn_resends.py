"""When this machine's kernel resends a connection attempt's SYN across a link that drops packets:
the measurement behind ``epochlab.sim.network.SYN_RESENDS_MS``.

It makes a network namespace of its own, adds an nft rule there that counts and drops every
SYN to one port, and connects to that port from inside the namespace; a thread reads the
rule's counter every 20 ms and notes when it grows. It prints the SYNs' times (seconds after
the ``connect()``) and when the kernel gave up (ETIMEDOUT), and deletes the namespace, also on
failure or Ctrl-C. Needs root, ``ip`` and ``nft`` (``scripts/kafka-net-setup``)::

    python benches/syn_resends.py            # about two minutes, until the kernel gives up
    python benches/syn_resends.py --seconds 40

Linux before 6.5 doubles the wait from 1 s (resends at 1, 3, 7, 15, 31, 63 s); from 6.5 the
first ``net.ipv4.tcp_syn_linear_timeouts`` resends (4 by default) and one more wait 1 s each.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time

NETNS = f"elsyn-{os.getpid()}"
PORT = 9999
RULES = f"""table inet elsyn {{
 chain input {{
  type filter hook input priority 0; policy accept;
  tcp dport {PORT} tcp flags syn counter drop
 }}
}}
"""


def _in_netns(*cmd: str, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", "netns", "exec", NETNS, *cmd], capture_output=True, text=True, check=False, **kw)  # type: ignore[call-overload]


def _probe(seconds: float) -> dict[str, object]:
    """Run inside the namespace (``--probe``): connect, note the SYNs, report as JSON."""
    start = time.monotonic()
    seen: list[float] = []
    stop = threading.Event()

    def count() -> None:
        last = 0
        while not stop.is_set():
            out = subprocess.run(["nft", "list", "table", "inet", "elsyn"], capture_output=True, text=True).stdout
            found = re.search(r"packets (\d+)", out)
            n = int(found.group(1)) if found else 0
            if n > last:
                seen.extend([round(time.monotonic() - start, 2)] * (n - last))
                last = n
            time.sleep(0.02)

    watcher = threading.Thread(target=count, daemon=True)
    watcher.start()
    sock = socket.socket()
    sock.settimeout(seconds)
    outcome = "connected"
    try:
        sock.connect(("127.0.0.1", PORT))
    except TimeoutError:
        outcome = f"still connecting after {seconds} s"
    except OSError as e:
        outcome = f"{os.strerror(e.errno) if e.errno else e} after {round(time.monotonic() - start, 2)} s"
    finally:
        sock.close()
        time.sleep(0.1)
        stop.set()
        watcher.join()
    return {"uname": os.uname().release, "syn_seconds": seen, "outcome": outcome,
            "tcp_syn_linear_timeouts": _sysctl("tcp_syn_linear_timeouts"), "tcp_syn_retries": _sysctl("tcp_syn_retries")}


def _sysctl(name: str) -> int | None:
    try:
        with open(f"/proc/sys/net/ipv4/{name}") as f:
            return int(f.read())
    except OSError:
        return None


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=150.0, help="give up waiting after this long (default 150)")
    ap.add_argument("--probe", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if not 1 <= args.seconds <= 600:
        print("error: --seconds must be between 1 and 600", file=sys.stderr)
        return 2
    if args.probe:
        print(json.dumps(_probe(args.seconds)))
        return 0
    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("nft"):
        print("error: needs root, ip and nft (run scripts/kafka-net-setup)", file=sys.stderr)
        return 2
    try:
        for cmd in (["ip", "netns", "add", NETNS], ["ip", "-n", NETNS, "link", "set", "lo", "up"]):
            subprocess.run(cmd, check=True, capture_output=True)
        done = _in_netns("nft", "-f", "-", input=RULES)
        if done.returncode != 0:
            print(f"error: nft: {done.stderr.strip()}", file=sys.stderr)
            return 2
        probe = _in_netns(sys.executable, os.path.abspath(__file__), "--probe", "--seconds", str(args.seconds))
        if probe.returncode != 0:
            print(f"error: probe failed: {probe.stderr.strip()}", file=sys.stderr)
            return 1
        print(probe.stdout.strip())
        return 0
    finally:
        subprocess.run(["ip", "netns", "del", NETNS], capture_output=True, check=False)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
