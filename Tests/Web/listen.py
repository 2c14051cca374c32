#!/usr/bin/python3
"""Listeners for playd's listen streams (issue 45), run by ListenHereTests.swift.

  listen.py icy URL FIRST SECOND     reads /stream.mp3 with Icy-MetaData: 1 until the
                                     title FIRST, then SECOND, has come (prints each)
  listen.py crowd URL N SECONDS      N-1 listeners read for SECONDS while one connects
                                     and never reads; prints a JSON summary

A 60 s hang guard on each wait; the waits are for data, never sleeps.
"""
import json
import socket
import sys
import threading
import time
import urllib.parse


def connect(url, headers=""):
    u = urllib.parse.urlparse(url)
    s = socket.create_connection((u.hostname, u.port), timeout=60)
    s.sendall(("GET %s HTTP/1.1\r\nHost: %s:%d\r\n%sConnection: close\r\n\r\n" % (u.path, u.hostname, u.port, headers)).encode())
    return s


class Body:
    """A chunked HTTP response's body, read as it comes."""

    def __init__(self, sock):
        self.f = sock.makefile("rb")
        status = self.f.readline()
        assert b" 200 " in status, status
        self.headers = {}
        while True:
            line = self.f.readline().strip()
            if not line:
                break
            k, v = line.decode().split(":", 1)
            self.headers[k.lower()] = v.strip()
        self.chunked = self.headers.get("transfer-encoding") == "chunked"
        self.left = 0

    def read(self, n):
        out = b""
        while len(out) < n:
            if self.chunked and self.left == 0:
                size = int(self.f.readline().strip() or b"0", 16)
                if size == 0:
                    raise EOFError("the stream ended")
                self.left = size
            take = min(n - len(out), self.left if self.chunked else n - len(out))
            data = self.f.read(take)
            if not data:
                raise EOFError("the connection closed")
            out += data
            if self.chunked:
                self.left -= len(data)
                if self.left == 0:
                    self.f.readline()
        return out


def icy(url, first, second):
    body = Body(connect(url, "Icy-MetaData: 1\r\n"))
    interval = int(body.headers["icy-metaint"])
    wanted = [first, second]
    end = time.monotonic() + 60
    while wanted and time.monotonic() < end:
        body.read(interval)
        n = body.read(1)[0] * 16
        if n:
            meta = body.read(n).rstrip(b"\0").decode()
            title = meta.split("StreamTitle='", 1)[1].rsplit("';", 1)[0]
            print("title:", title, flush=True)
            if title == wanted[0]:
                wanted.pop(0)
    return 0 if not wanted else 1


def crowd(url, n, seconds):
    counts = [0] * (n - 1)
    errors = []

    def reader(i):
        try:
            body = Body(connect(url))
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                counts[i] += len(body.read(4096))
        except Exception as e:
            errors.append("%d: %s" % (i, e))

    stalled = socket.socket()
    stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stalled.connect((urllib.parse.urlparse(url).hostname, urllib.parse.urlparse(url).port))
    stalled.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" % urllib.parse.urlparse(url).path).encode())
    threads = [threading.Thread(target=reader, args=(i,)) for i in range(n - 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps({"bytes": counts, "errors": errors}))
    stalled.close()
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "icy":
        sys.exit(icy(sys.argv[2], sys.argv[3], sys.argv[4]))
    sys.exit(crowd(sys.argv[2], int(sys.argv[3]), float(sys.argv[4])))
