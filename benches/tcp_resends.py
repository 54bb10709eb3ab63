"""When this machine's kernel sends a TCP segment again across a link that drops packets: a
connection attempt's SYN (``syn``, the measurement behind ``epochlab.sim.network.SYN_RESENDS_MS``)
and data on an established connection (``data``, behind ``retransmission_after``).

It makes a network namespace of its own, adds an nft rule there that counts and drops the
packets to one port (every SYN; or, on a connection set up and used first, every segment
carrying data), and sends into it from inside the namespace; a thread reads the rule's counter
every few ms and notes when it grows. It prints the packets' times (seconds after the first
send) as JSON, and deletes the namespace, also on failure or Ctrl-C. Needs root, ``ip`` and
``nft`` (``scripts/kafka-net-setup``)::

    python benches/tcp_resends.py syn                  # about two minutes, until ETIMEDOUT
    python benches/tcp_resends.py syn --seconds 40
    python benches/tcp_resends.py data --segments 1    # one request in flight
    python benches/tcp_resends.py data --segments 3    # three

Linux before 6.5 doubles a SYN's wait from 1 s (resends at 1, 3, 7, 15, 31, 63 s); from 6.5 the
first ``net.ipv4.tcp_syn_linear_timeouts`` resends (4 by default) and one more wait 1 s each.
Data is probed once the tail loss probe is due (about 10 ms with several segments in flight,
about 210 ms with one), then resent on the retransmission timeout (about 200 ms), doubling.
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

NETNS = f"eltcp-{os.getpid()}"
PORT = 9999
RULES = {
    "syn": f"""table inet elsyn {{
 chain input {{
  type filter hook input priority 0; policy accept;
  tcp dport {PORT} tcp flags syn counter drop
 }}
}}
""",
    # segments to the port longer than a bare acknowledgement: the data
    "data": f"""table inet elsyn {{
 chain input {{
  type filter hook input priority 0; policy accept;
  tcp dport {PORT} meta length > 150 counter drop
 }}
}}
""",
}


def _in_netns(*cmd: str, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", "netns", "exec", NETNS, *cmd], capture_output=True, text=True, check=False, **kw)  # type: ignore[call-overload]


class _Counter:
    """Notes when the nft rule's packet counter grows (seconds after ``start``)."""

    def __init__(self) -> None:
        self.start = time.monotonic()
        self.seen: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        last = 0
        while not self._stop.is_set():
            out = subprocess.run(["nft", "list", "table", "inet", "elsyn"], capture_output=True, text=True).stdout
            found = re.search(r"packets (\d+)", out)
            n = int(found.group(1)) if found else 0
            if n > last:
                self.seen.extend([round(time.monotonic() - self.start, 3)] * (n - last))
                last = n
            time.sleep(0.003)

    def stop(self) -> list[float]:
        time.sleep(0.1)
        self._stop.set()
        self._thread.join()
        return self.seen


def _probe_syn(seconds: float) -> dict[str, object]:
    """Run inside the namespace: connect to a port whose SYNs are dropped."""
    _load("syn")
    counter = _Counter()
    sock = socket.socket()
    sock.settimeout(seconds)
    outcome = "connected"
    try:
        sock.connect(("127.0.0.1", PORT))
    except TimeoutError:
        outcome = f"still connecting after {seconds} s"
    except OSError as e:
        outcome = f"{os.strerror(e.errno) if e.errno else e} after {round(time.monotonic() - counter.start, 2)} s"
    finally:
        sock.close()
    return {"uname": os.uname().release, "syn_seconds": counter.stop(), "outcome": outcome,
            "tcp_syn_linear_timeouts": _sysctl("tcp_syn_linear_timeouts"), "tcp_syn_retries": _sysctl("tcp_syn_retries")}


def _probe_data(seconds: float, segments: int) -> dict[str, object]:
    """Run inside the namespace: a connection used for a few round trips, then ``segments``
    writes of 200 bytes into a rule that drops them."""
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", PORT))
    server.listen()
    client = socket.create_connection(("127.0.0.1", PORT))
    peer, _ = server.accept()
    client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for _ in range(5):  # a few round trips, for the kernel's round-trip estimate
        client.sendall(b"x" * 100)
        peer.recv(100)
        peer.sendall(b"y" * 100)
        client.recv(100)
    _load("data")
    counter = _Counter()
    for _ in range(segments):
        client.send(b"r" * 200)
    time.sleep(seconds)
    for s in (client, peer, server):
        s.close()
    return {"uname": os.uname().release, "segments": segments, "data_seconds": counter.stop()}


def _load(kind: str) -> None:
    done = subprocess.run(["nft", "-f", "-"], input=RULES[kind], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"error: nft: {done.stderr.strip()}")


def _sysctl(name: str) -> int | None:
    try:
        with open(f"/proc/sys/net/ipv4/{name}") as f:
            return int(f.read())
    except OSError:
        return None


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["syn", "data"], help="a connection attempt's SYN, or data on a connection")
    ap.add_argument("--seconds", type=float, default=None,
                    help="how long to watch (default: 150 for syn, 8 for data)")
    ap.add_argument("--segments", type=int, default=1, help="data: how many writes go into the cut (default 1)")
    ap.add_argument("--probe", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    seconds = args.seconds if args.seconds is not None else (150.0 if args.what == "syn" else 8.0)
    if not 1 <= seconds <= 600 or not 1 <= args.segments <= 100:
        print("error: --seconds must be between 1 and 600 and --segments between 1 and 100", file=sys.stderr)
        return 2
    if args.probe:
        out = _probe_syn(seconds) if args.what == "syn" else _probe_data(seconds, args.segments)
        print(json.dumps(out))
        return 0
    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("nft"):
        print("error: needs root, ip and nft (run scripts/kafka-net-setup)", file=sys.stderr)
        return 2
    try:
        for cmd in (["ip", "netns", "add", NETNS], ["ip", "-n", NETNS, "link", "set", "lo", "up"]):
            subprocess.run(cmd, check=True, capture_output=True)
        probe = _in_netns(sys.executable, os.path.abspath(__file__), args.what, "--probe", "--seconds", str(seconds),
                          "--segments", str(args.segments))
        if probe.returncode != 0:
            print(f"error: probe failed: {(probe.stderr or probe.stdout).strip()}", file=sys.stderr)
            return 1
        print(probe.stdout.strip())
        return 0
    finally:
        subprocess.run(["ip", "netns", "del", NETNS], capture_output=True, check=False)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
