#!/usr/bin/env python3
"""What callers without the webhook secret cost `forgehand serve`.

    python3 bench/http_flood.py --bin PATH/TO/forgehand slow   [options]
    python3 bench/http_flood.py --bin PATH/TO/forgehand headers [options]

Starts the given `forgehand` binary on 127.0.0.1 (a free port, a fresh
SQLite database in a temp dir, `queue.workers = 0`, log level `warn`),
runs one scenario against /webhooks/github, samples the server's RSS
(VmRSS in /proc/<pid>/status) every 0.2 s, stops it with SIGTERM and
prints one JSON line of results (`FLOOD_RESULT {...}`).

slow      CLIENTS connections (30) each send a POST whose body is
          trickled at RATE bytes per second (1) for DURATION seconds (40),
          declaring a 25 MiB Content-Length (`--chunked`: chunked instead).
          `--signed` adds a well-formed `X-Hub-Signature-256` header (for a
          secret nobody has), else the requests carry none. Reports how
          many connections the server answered or closed, when, and with
          what status, and the RSS at the start, at its peak and at the end.
headers   COUNT unsigned requests (200), one after the other, each with
          HEADER_BYTES (61440) of headers: a 60 KiB `X-GitHub-Delivery`.
          Reports the statuses, the database's growth (the SQLite file
          and its WAL, after the server stopped) and its delivery rows.

`--env KEY=VALUE` passes more configuration to the server (repeatable),
e.g. `--env FORGEHAND_SERVER__MAX_HEADER_BYTES=131072` to let 60 KiB
headers through to the webhook handler. Everything stays on 127.0.0.1.
Python 3 standard library only.
"""

import argparse
import json
import os
import select
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time

SECRET = "bench-flood-secret"
DECLARED = 25 * 1024 * 1024


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except FileNotFoundError:
        return 0
    return 0


class Server:
    def __init__(self, binary, extra_env):
        self.dir = tempfile.mkdtemp(prefix="fh-flood-")
        self.db = os.path.join(self.dir, "forgehand.db")
        self.port = free_port()
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "FORGEHAND_SERVER__LISTEN": f"127.0.0.1:{self.port}",
            "FORGEHAND_DATABASE__URL": f"sqlite://{self.db}",
            "FORGEHAND_GITHUB__WEBHOOK_SECRET": SECRET,
            "FORGEHAND_QUEUE__WORKERS": "0",
            "FORGEHAND_LOG__LEVEL": "warn",
        }
        for pair in extra_env:
            key, _, value = pair.partition("=")
            env[key] = value
        self.log = open(os.path.join(self.dir, "server.log"), "w")
        self.proc = subprocess.Popen(
            [binary, "serve"], env=env, stdout=self.log, stderr=subprocess.STDOUT
        )
        self.samples = []
        self._stop = threading.Event()
        self.wait_healthy()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()

    def wait_healthy(self):
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    s.sendall(b"GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
                    if s.recv(64).startswith(b"HTTP/1.1 200"):
                        return
            except OSError:
                pass
            time.sleep(0.1)
        raise SystemExit("the server did not become healthy; see " + self.log.name)

    def _sample(self):
        while not self._stop.is_set():
            self.samples.append((time.time(), rss_kib(self.proc.pid)))
            time.sleep(0.2)

    def db_bytes(self):
        return sum(
            os.path.getsize(p)
            for p in (self.db, self.db + "-wal")
            if os.path.exists(p)
        )

    def stop(self):
        self._stop.set()
        self._sampler.join()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def deliveries(self):
        with sqlite3.connect(self.db) as c:
            return c.execute("select count(*) from deliveries").fetchone()[0]


def head(signed, chunked):
    lines = [
        "POST /webhooks/github HTTP/1.1",
        "host: 127.0.0.1",
        "content-type: application/json",
        "x-github-event: issues",
        "x-github-delivery: 00000000-0000-0000-0000-000000000000",
    ]
    if signed:
        lines.append("x-hub-signature-256: sha256=" + "ab" * 32)
    if chunked:
        lines.append("transfer-encoding: chunked")
    else:
        lines.append(f"content-length: {DECLARED}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def read_answer(c):
    """Reads what the server sent a client, noting the status of its
    answer; false once the connection is closed (or reset)."""
    try:
        data = c["sock"].recv(65536)
    except (BlockingIOError, InterruptedError):
        return True
    except OSError:
        data = b""
    if c["status"] is None and (c["buf"] + data).startswith(b"HTTP/1.1 "):
        c["status"] = int((c["buf"] + data)[9:12])
    c["buf"] = (c["buf"] + data)[:64]
    return bool(data)


def slow(args, server):
    """Every client trickles its body; the main loop sends the next bytes
    of each once a tick and notes when the server answers or closes."""
    clients = []
    for _ in range(args.clients):
        s = socket.create_connection(("127.0.0.1", server.port))
        s.setblocking(False)
        s.sendall(head(args.signed, args.chunked))
        clients.append(
            {"sock": s, "sent": 0, "pending": b"", "closed_at": None, "status": None, "buf": b""}
        )
    start = time.time()
    rss_start = rss_kib(server.proc.pid)
    while time.time() - start < args.duration:
        tick = time.time()
        # Each client is owed RATE bytes for every second so far (the first
        # byte at once), at most 256 KiB a tick.
        owed = int(args.rate * (tick - start)) + 1
        for c in clients:
            if c["closed_at"] is not None:
                continue
            # What is owed goes into the client's outgoing bytes once the
            # last of them left; a full socket buffer just waits.
            n = min(owed - c["sent"], 256 * 1024, DECLARED - c["sent"])
            if not c["pending"] and n > 0:
                body = b"{" + b" " * (n - 1) if c["sent"] == 0 else b" " * n
                c["pending"] = b"%x\r\n%s\r\n" % (n, body) if args.chunked else body
                c["sent"] += n
            if not c["pending"]:
                continue
            try:
                c["pending"] = c["pending"][c["sock"].send(c["pending"]):]
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                c["closed_at"] = time.time() - start
                read_answer(c)
        # Answers and closes.
        readable, _, _ = select.select(
            [c["sock"] for c in clients if c["closed_at"] is None], [], [], 0
        )
        for c in clients:
            if c["sock"] in readable and not read_answer(c):
                c["closed_at"] = time.time() - start
        time.sleep(max(0, 0.1 - (time.time() - tick)))
    open_at_end = sum(1 for c in clients if c["closed_at"] is None)
    for c in clients:
        c["sock"].close()
    in_run = [kib for (t, kib) in server.samples if t >= start]
    return {
        "scenario": "slow",
        "signed": args.signed,
        "framing": "chunked" if args.chunked else "content-length",
        "clients": args.clients,
        "rate_bytes_per_s": args.rate,
        "duration_s": args.duration,
        "open_at_end": open_at_end,
        "closed_by_server": args.clients - open_at_end,
        "first_close_s": min((c["closed_at"] for c in clients if c["closed_at"] is not None), default=None),
        "last_close_s": max((c["closed_at"] for c in clients if c["closed_at"] is not None), default=None),
        "statuses": sorted({str(c["status"]) for c in clients}),
        "bytes_sent_per_client_max": max(c["sent"] for c in clients),
        "rss_start_mib": round(rss_start / 1024, 1),
        "rss_peak_mib": round(max(in_run, default=0) / 1024, 1),
        "rss_end_mib": round(rss_kib(server.proc.pid) / 1024, 1),
    }


def headers(args, server):
    db_before = server.db_bytes()
    rss_start = rss_kib(server.proc.pid)
    statuses = {}
    value = "d" * args.header_bytes
    for n in range(args.count):
        request = (
            "POST /webhooks/github HTTP/1.1\r\nhost: 127.0.0.1\r\n"
            "content-type: application/json\r\nx-github-event: issues\r\n"
            f"x-github-delivery: {n}-{value}\r\ncontent-length: 2\r\n"
            "connection: close\r\n\r\n{}"
        ).encode()
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as s:
            try:
                s.sendall(request)
                answer = s.recv(64)
            except OSError:
                answer = b""
        code = answer[9:12].decode() if answer.startswith(b"HTTP/1.1 ") else "closed"
        statuses[code] = statuses.get(code, 0) + 1
    rss_end = rss_kib(server.proc.pid)
    server.stop()
    return {
        "scenario": "headers",
        "count": args.count,
        "header_bytes": args.header_bytes,
        "statuses": statuses,
        "deliveries_rows": server.deliveries(),
        "db_bytes_before": db_before,
        "db_bytes_after": server.db_bytes(),
        "db_growth_kib": round((server.db_bytes() - db_before) / 1024, 1),
        "rss_start_mib": round(rss_start / 1024, 1),
        "rss_end_mib": round(rss_end / 1024, 1),
    }


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin", required=True, help="the forgehand binary")
    p.add_argument("--env", action="append", default=[], help="KEY=VALUE for the server")
    p.add_argument("scenario", choices=["slow", "headers"])
    p.add_argument("--clients", type=int, default=30)
    p.add_argument("--rate", type=float, default=1.0, help="body bytes per second per client")
    p.add_argument("--duration", type=float, default=40.0)
    p.add_argument("--signed", action="store_true")
    p.add_argument("--chunked", action="store_true")
    p.add_argument("--count", type=int, default=200)
    p.add_argument("--header-bytes", type=int, default=60 * 1024)
    args = p.parse_args()
    server = Server(args.bin, args.env)
    try:
        if args.scenario == "slow":
            result = slow(args, server)
            server.stop()
        else:
            result = headers(args, server)
    finally:
        if server.proc.poll() is None:
            server.stop()
    result["binary"] = args.bin
    result["env"] = args.env
    print("FLOOD_RESULT " + json.dumps(result))


if __name__ == "__main__":
    sys.exit(main())
