#!/usr/bin/env python3
"""Measures TCP throughput and idle round-trip time between two emulated hosts.

cluster.sh runs the receiver inside one host's namespace and the sender inside
another's, to check that a shaped link carries the rate it was given. One TCP stream,
plain sockets, no dependency beyond Python 3.

  link_rate.py receive --bind ADDR --port-file FILE [--timeout S]
      Listens on ADDR (port chosen by the kernel, written to FILE once listening),
      answers ping-pong probes, then counts the bytes of one bulk stream and prints
      "received BYTES bytes in SECONDS s: RATE MB/s" (1 MB = 1e6 bytes).
  link_rate.py send --to ADDR --port PORT [--seconds S] [--timeout S]
      Measures the idle round-trip time with 1-byte ping-pongs, then sends as fast as
      it can for S seconds and prints "rtt_us MEDIAN" and the receiver's line.

Exit status 0 on success, 1 on any socket error or timeout (with a message naming it).
"""
import argparse
import os
import socket
import statistics
import sys
import time

CHUNK = 1 << 20
PINGS = 50


def receive(args):
    listener = socket.create_server((args.bind, 0))
    listener.settimeout(args.timeout)
    with open(args.port_file + ".tmp", "w") as f:
        f.write(str(listener.getsockname()[1]))
    # Renamed into place so the sender never reads a half-written file.
    os.rename(args.port_file + ".tmp", args.port_file)
    conn, _ = listener.accept()
    conn.settimeout(args.timeout)
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for _ in range(PINGS):
        if conn.recv(1) != b"p":
            raise RuntimeError("ping: connection closed early")
        conn.sendall(b"p")
    total = 0
    start = None
    buffer = bytearray(CHUNK)
    while True:
        n = conn.recv_into(buffer)
        if n == 0:
            break
        if start is None:
            start = time.monotonic()
        total += n
    seconds = max(time.monotonic() - (start or time.monotonic()), 1e-9)
    line = "received %d bytes in %.3f s: %.1f MB/s\n" % (total, seconds, total / seconds / 1e6)
    conn.sendall(line.encode())
    conn.close()
    sys.stdout.write(line)


def send(args):
    conn = socket.create_connection((args.to, args.port), timeout=args.timeout)
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    rtts = []
    for _ in range(PINGS):
        start = time.monotonic()
        conn.sendall(b"p")
        if conn.recv(1) != b"p":
            raise RuntimeError("ping: connection closed early")
        rtts.append((time.monotonic() - start) * 1e6)
    print("rtt_us %.0f" % statistics.median(rtts))
    payload = bytes(CHUNK)
    end = time.monotonic() + args.seconds
    while time.monotonic() < end:
        conn.sendall(payload)
    conn.shutdown(socket.SHUT_WR)
    reply = b""
    while True:
        part = conn.recv(4096)
        if not part:
            break
        reply += part
    sys.stdout.write(reply.decode())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    r = sub.add_parser("receive")
    r.add_argument("--bind", required=True)
    r.add_argument("--port-file", required=True)
    r.add_argument("--timeout", type=float, default=30)
    s = sub.add_parser("send")
    s.add_argument("--to", required=True)
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--seconds", type=float, default=2)
    s.add_argument("--timeout", type=float, default=30)
    args = parser.parse_args()
    try:
        receive(args) if args.mode == "receive" else send(args)
    except (OSError, RuntimeError) as e:
        sys.exit("link_rate.py %s: %s" % (args.mode, e))


if __name__ == "__main__":
    main()
