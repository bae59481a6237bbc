#!/usr/bin/env python3
"""An HTTP/2 server on Python's h2 (python3-h2) that answers with a status no HTTP server may send, for tern's client.

    python_status_server.py STATUS

Listens on 127.0.0.1 (a free port) and prints "port N". A request for /ok is answered 200 "ok on <connection>"
(connections counted from 1); every other one with the three characters STATUS as its :status (h2's own checks
of what it sends are off, so "051" goes out as it is) and the body "odd". Runs until its standard input closes."""
import sys

import h2.config
import h2.connection
import h2.events
from h2_peer import event_batches, listen_and_serve


def serve(sock, status, number):
    config = h2.config.H2Configuration(client_side=False, header_encoding="utf-8", validate_outbound_headers=False)
    conn = h2.connection.H2Connection(config)
    conn.initiate_connection()
    sock.sendall(conn.data_to_send())
    paths = {}
    for events in event_batches(sock, conn):
        for ev in events:
            if isinstance(ev, h2.events.RequestReceived):
                paths[ev.stream_id] = dict(ev.headers)[":path"]
            elif isinstance(ev, h2.events.StreamEnded):
                ok = paths.get(ev.stream_id) == "/ok"
                body = (b"ok on %d" % number) if ok else b"odd"
                conn.send_headers(ev.stream_id, [(":status", "200" if ok else status),
                                                 ("content-length", str(len(body)))])
                conn.send_data(ev.stream_id, body, end_stream=True)


def main():
    status = sys.argv[1]
    listen_and_serve(lambda sock, number: serve(sock, status, number))


if __name__ == "__main__":
    main()
