#!/usr/bin/env python3
"""An HTTP/2 server on Python's h2 (python3-h2) that says GOAWAY under load, for tern's client.

    python_goaway_server.py

Listens on 127.0.0.1 (a free port) and prints "port N". Every request is answered "<path> on <connection>"
(connections counted from 1). The first connection, once it has 3 requests, answers the first and sends GOAWAY
with its stream as the last processed, and leaves the others unprocessed: a client must send them
again on a new connection. Runs until its standard input closes."""
import h2.config
import h2.connection
import h2.errors
import h2.events
from h2_peer import event_batches, listen_and_serve


def serve(sock, number):
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
    conn.initiate_connection()
    sock.sendall(conn.data_to_send())
    paths = {}
    done = []
    first = None
    gone_away = False

    def answer(sid):
        body = ("%s on %d" % (paths[sid], number)).encode()
        conn.send_headers(sid, [(":status", "200"), ("content-length", str(len(body)))])
        conn.send_data(sid, body, end_stream=True)

    for events in event_batches(sock, conn):
        for ev in events:
            if isinstance(ev, h2.events.RequestReceived):
                paths[ev.stream_id] = dict(ev.headers)[":path"]
                if first is None:
                    first = ev.stream_id
            elif isinstance(ev, h2.events.StreamEnded):
                done.append(ev.stream_id)
                if number != 1:
                    answer(ev.stream_id)
            elif isinstance(ev, h2.events.DataReceived):
                conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
        if number == 1 and not gone_away and len(done) >= 3:
            answer(first)
            conn.close_connection(error_code=h2.errors.ErrorCodes.NO_ERROR, last_stream_id=first)
            gone_away = True


def main():
    listen_and_serve(serve)


if __name__ == "__main__":
    main()
