#!/usr/bin/env python3
"""An HTTP/2 server on Python's h2 (python3-h2) that answers with a status no HTTP server may send, for tern's client.

    python_status_server.py STATUS

Listens on 127.0.0.1 (a free port) and prints "port N". A request for /ok is answered 200 "ok on <connection>"
(connections counted from 1); every other one with the three characters STATUS as its :status (h2's own checks
of what it sends are off, so "051" goes out as it is) and the body "odd". Runs until its standard input closes."""
import socket
import sys
import threading

import h2.config
import h2.connection
import h2.events


def serve(sock, status, number):
    config = h2.config.H2Configuration(client_side=False, header_encoding="utf-8", validate_outbound_headers=False)
    conn = h2.connection.H2Connection(config)
    conn.initiate_connection()
    sock.sendall(conn.data_to_send())
    paths = {}
    while True:
        try:
            data = sock.recv(65536)
        except OSError:
            break
        if not data:
            break
        for ev in conn.receive_data(data):
            if isinstance(ev, h2.events.RequestReceived):
                paths[ev.stream_id] = dict(ev.headers)[":path"]
            elif isinstance(ev, h2.events.StreamEnded):
                ok = paths.get(ev.stream_id) == "/ok"
                body = (b"ok on %d" % number) if ok else b"odd"
                conn.send_headers(ev.stream_id, [(":status", "200" if ok else status),
                                                 ("content-length", str(len(body)))])
                conn.send_data(ev.stream_id, body, end_stream=True)
        out = conn.data_to_send()
        if out:
            sock.sendall(out)
    sock.close()


def main():
    status = sys.argv[1]
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    print("port", listener.getsockname()[1], flush=True)

    count = [0]

    def accept():
        while True:
            s, _ = listener.accept()
            count[0] += 1
            threading.Thread(target=serve, args=(s, status, count[0]), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    sys.stdin.read()


if __name__ == "__main__":
    main()
