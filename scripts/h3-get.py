#!/usr/bin/env python3
"""GETs URLs over HTTP/3 with aioquic: a client nobody here wrote, for firstbyte's tests.

    h3-get.py [--ca FILE] [--resolve HOST:PORT:ADDR] [--session-file F] [--post] URL...

Every URL goes over one QUIC connection. For each response it prints one line:
`STATUS LENGTH SHA256 alt-svc=VALUE` (then the body itself with --body). --post sends each as a
POST with a 3-byte body. With --session-file,
a session ticket the server sends is saved there, and one found there is used to resume (with
0-RTT when the ticket allows it: the GETs then go in early data); the line `early_data=yes|no`
says whether the server accepted it.
"""

import argparse
import asyncio
import hashlib
import pickle
import ssl
import sys
from urllib.parse import urlparse

from aioquic.asyncio.client import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import QuicEvent


class Client(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.h3 = H3Connection(self._quic)
        self.waiting = {}

    def quic_event_received(self, event: QuicEvent) -> None:
        for e in self.h3.handle_event(event):
            if isinstance(e, (HeadersReceived, DataReceived)):
                entry = self.waiting.get(e.stream_id)
                if entry is None:
                    continue
                future, acc = entry
                if isinstance(e, HeadersReceived):
                    acc["headers"].extend(e.headers)
                else:
                    acc["body"] += e.data
                if e.stream_ended and not future.done():
                    future.set_result(acc)

    async def get(self, url: str, post: bool = False):
        u = urlparse(url)
        stream_id = self._quic.get_next_available_stream_id()
        path = u.path or "/"
        if u.query:
            path += "?" + u.query
        headers = [
            (b":method", b"POST" if post else b"GET"),
            (b":scheme", b"https"),
            (b":authority", u.netloc.encode()),
            (b":path", path.encode()),
            (b"user-agent", b"aioquic"),
        ]
        if post:
            headers.append((b"content-length", b"3"))
        self.h3.send_headers(stream_id, headers, end_stream=not post)
        if post:
            self.h3.send_data(stream_id, b"x=1", end_stream=True)
        future = asyncio.get_running_loop().create_future()
        self.waiting[stream_id] = (future, {"headers": [], "body": b""})
        self.transmit()
        return await asyncio.wait_for(future, 20)


async def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ca")
    ap.add_argument("--resolve", help="HOST:PORT:ADDR")
    ap.add_argument("--session-file")
    ap.add_argument("--body", action="store_true")
    ap.add_argument("--post", action="store_true")
    ap.add_argument("urls", nargs="+")
    a = ap.parse_args()
    first = urlparse(a.urls[0])
    host, port = first.hostname, first.port or 443
    addr = host
    if a.resolve:
        h, p, addr = a.resolve.split(":", 2)
        if h != host or int(p) != port:
            ap.error("--resolve does not match the URL")
    config = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, server_name=host)
    if a.ca:
        config.load_verify_locations(a.ca)
    else:
        config.verify_mode = ssl.CERT_NONE
    tickets = []
    if a.session_file:
        try:
            with open(a.session_file, "rb") as f:
                config.session_ticket = pickle.load(f)
        except FileNotFoundError:
            pass

    def save(ticket):
        tickets.append(ticket)

    async with connect(
        addr,
        port,
        configuration=config,
        create_protocol=Client,
        session_ticket_handler=save if a.session_file else None,
        wait_connected=config.session_ticket is None,
    ) as client:
        results = await asyncio.gather(*(client.get(u, a.post) for u in a.urls))
        early = client._quic.tls.early_data_accepted
        resumed = client._quic.tls.session_resumed
        await asyncio.sleep(0.2)  # a ticket sent after the responses
    for r in results:
        headers = dict(r["headers"])
        status = headers.get(b":status", b"?").decode()
        alt = headers.get(b"alt-svc", b"").decode()
        digest = hashlib.sha256(r["body"]).hexdigest()
        print(f"{status} {len(r['body'])} {digest} alt-svc={alt}")
        if a.body:
            sys.stdout.write(r["body"].decode(errors="replace"))
    if a.session_file:
        print("early_data=" + ("yes" if early else "no"))
        print("resumed=" + ("yes" if resumed else "no"))
        if tickets:
            with open(a.session_file, "wb") as f:
                pickle.dump(tickets[-1], f)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
