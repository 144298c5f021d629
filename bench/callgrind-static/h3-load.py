#!/usr/bin/env python3
"""GETs one URL N times over one HTTP/3 connection with aioquic, K requests in flight.

    h3-load.py URL N [K] [-H "name: value"]...

Sends :method, :scheme, :authority and :path, then each -H header in order (names lower-cased,
as HTTP/3 requires). Exits non-zero unless every response is a 200 with the expected length
(--length, default 1024). For the callgrind profile of the static path
(bench/callgrind-static/run.sh).
"""

import argparse
import asyncio
import ssl
import sys
from urllib.parse import urlparse

from aioquic.asyncio.client import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration


class Client(QuicConnectionProtocol):
    extra = []  # (name, value) pairs sent after the pseudo-headers

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.h3 = H3Connection(self._quic)
        self.waiting = {}

    def quic_event_received(self, event):
        for e in self.h3.handle_event(event):
            if isinstance(e, (HeadersReceived, DataReceived)):
                entry = self.waiting.get(e.stream_id)
                if entry is None:
                    continue
                future, acc = entry
                if isinstance(e, HeadersReceived):
                    acc["status"] = dict(e.headers).get(b":status", acc.get("status"))
                else:
                    acc["len"] += len(e.data)
                if e.stream_ended and not future.done():
                    del self.waiting[e.stream_id]
                    future.set_result(acc)

    async def get(self, authority, path):
        sid = self._quic.get_next_available_stream_id()
        self.h3.send_headers(
            sid,
            [
                (b":method", b"GET"),
                (b":scheme", b"https"),
                (b":authority", authority),
                (b":path", path),
            ]
            + self.extra,
            end_stream=True,
        )
        future = asyncio.get_running_loop().create_future()
        self.waiting[sid] = (future, {"status": None, "len": 0})
        self.transmit()
        return await asyncio.wait_for(future, 60)


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("n", type=int)
    ap.add_argument("k", type=int, nargs="?", default=10)
    ap.add_argument("--length", type=int, default=1024)
    ap.add_argument("-H", dest="headers", action="append", default=[], metavar="NAME: VALUE")
    a = ap.parse_args()
    for h in a.headers:
        name, sep, value = h.partition(":")
        if not sep or not name.strip():
            ap.error(f"header without a name: {h!r}")
        Client.extra.append((name.strip().lower().encode(), value.strip().encode()))
    u = urlparse(a.url)
    config = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, server_name=u.hostname)
    config.verify_mode = ssl.CERT_NONE
    bad = 0
    left = a.n
    async with connect(u.hostname, u.port, configuration=config, create_protocol=Client) as c:
        authority, path = u.netloc.encode(), (u.path or "/").encode()

        async def worker():
            nonlocal left, bad
            while left > 0:
                left -= 1
                r = await c.get(authority, path)
                if r["status"] != b"200" or r["len"] != a.length:
                    bad += 1

        await asyncio.gather(*(worker() for _ in range(a.k)))
    if bad:
        print(f"{bad} of {a.n} responses were not 200 with {a.length} bytes", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
