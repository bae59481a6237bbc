#!/usr/bin/env python3
"""A client of tern's HTTP/2 server on Python's h2 (Debian's python3-h2), a peer tern did not write.

    python_h2_client.py PORT [--tls]

Over h2c with prior knowledge (or TLS with ALPN h2, certificate not checked) it opens, as many at once as the server allows
(100): 100 streams that upload random bodies to POST /sha256 (the server answers each body's SHA-256), 20 that download GET /bytes/N
(checked byte for byte), one POST /stream whose body ends with trailers (echoed back as the response's trailers),
and one GET /forever that it resets while the others run. Every body is sent and read under flow control (the
server's windows, and this side's acknowledgements). Prints "ok" and exits 0 when every answer is right; prints
what was wrong and exits 1 otherwise."""
import hashlib
import random
import socket
import ssl
import sys

import h2.config
import h2.connection
import h2.events


def pattern(n):
    return bytes(ord("a") + i % 26 for i in range(n))


def main():
    port = int(sys.argv[1])
    tls = "--tls" in sys.argv[2:]
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    if tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        ctx.set_alpn_protocols(["h2"])
        sock = ctx.wrap_socket(sock, server_hostname="localhost")
        if sock.selected_alpn_protocol() != "h2":
            print("ALPN chose", sock.selected_alpn_protocol())
            return 1
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    conn.initiate_connection()
    sock.sendall(conn.data_to_send())
    # The server's SETTINGS first: its max concurrent streams (100) bounds what is opened at once; the rest of the
    # requests wait in a queue, as a client must.
    settled = False
    while not settled:
        for ev in conn.receive_data(sock.recv(65536)):
            settled = settled or isinstance(ev, h2.events.RemoteSettingsChanged)
        sock.sendall(conn.data_to_send())

    rnd = random.Random(11)
    expected = {}   # stream -> what the body must be (bytes), or a digest (str)
    to_send = {}    # stream -> [body, offset, trailers]
    answers = {}    # stream -> {"status", "body", "trailers", "ended", "reset"}

    queue = []      # requests not yet opened: (method, path, body, trailers, expected)

    def open_some():
        while queue and conn.open_outbound_streams < conn.remote_settings.max_concurrent_streams:
            method, path, body, trailers, want = queue.pop(0)
            sid = request(method, path, body, trailers)
            if want is not None:
                expected[sid] = want
            if path == "/stream":
                names["echo"] = sid
            if path == "/forever":
                names["doomed"] = sid

    names = {}

    def request(method, path, body=None, trailers=None):
        sid = conn.get_next_available_stream_id()
        headers = [(":method", method), (":path", path), (":scheme", "https" if tls else "http"),
                   (":authority", "localhost")]
        conn.send_headers(sid, headers, end_stream=body is None)
        if body is not None:
            to_send[sid] = [body, 0, trailers]
        answers[sid] = {"status": None, "body": bytearray(), "trailers": [], "ended": False, "reset": None}
        return sid

    queue.append(("GET", "/forever", None, None, None))
    queue.append(("POST", "/stream", b"echo me", [("x-checksum", "py")], None))
    for _ in range(100):
        body = rnd.randbytes(rnd.randrange(0, 100000))
        queue.append(("POST", "/sha256", body, None, hashlib.sha256(body).hexdigest()))
    for _ in range(20):
        n = rnd.randrange(0, 200000)
        queue.append(("GET", "/bytes/%d" % n, None, None, pattern(n)))
    open_some()
    reset_sent = False

    def pump():
        # As much of each body as the windows allow; the end (or the trailers) once it is all out.
        for sid, item in list(to_send.items()):
            body, at, trailers = item
            while at < len(body):
                room = min(conn.local_flow_control_window(sid), conn.max_outbound_frame_size, len(body) - at)
                if room <= 0:
                    break
                conn.send_data(sid, body[at:at + room])
                at += room
            item[1] = at
            if at == len(body):
                if trailers:
                    conn.send_headers(sid, trailers, end_stream=True)
                else:
                    conn.end_stream(sid)
                del to_send[sid]

    while queue or not all(a["ended"] or a["reset"] is not None for a in answers.values()):
        open_some()
        pump()
        if not reset_sent and sum(1 for a in answers.values() if a["ended"]) >= 30:
            conn.reset_stream(names["doomed"])
            answers[names["doomed"]]["reset"] = "sent"
            reset_sent = True
        sock.sendall(conn.data_to_send())
        data = sock.recv(65536)
        if not data:
            print("the server closed the connection")
            return 1
        for ev in conn.receive_data(data):
            if isinstance(ev, h2.events.ResponseReceived):
                answers[ev.stream_id]["status"] = dict(ev.headers)[":status"]
            elif isinstance(ev, h2.events.DataReceived):
                answers[ev.stream_id]["body"] += ev.data
                conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, h2.events.TrailersReceived):
                answers[ev.stream_id]["trailers"] = list(ev.headers)
            elif isinstance(ev, h2.events.StreamEnded):
                answers[ev.stream_id]["ended"] = True
            elif isinstance(ev, h2.events.StreamReset):
                answers[ev.stream_id]["reset"] = ev.error_code
                if ev.stream_id != names["doomed"]:
                    print("stream %d reset by the server (%s)" % (ev.stream_id, ev.error_code))
                    return 1
            elif isinstance(ev, h2.events.ConnectionTerminated):
                print("GOAWAY", ev.error_code)
                return 1
        sock.sendall(conn.data_to_send())

    wrong = []
    for sid, want in expected.items():
        a = answers[sid]
        got = a["body"].decode() if isinstance(want, str) else bytes(a["body"])
        if a["status"] != "200" or got != want:
            wrong.append("stream %d: status %s, body %r..." % (sid, a["status"], bytes(a["body"][:40])))
    e = answers[names["echo"]]
    if e["status"] != "200" or bytes(e["body"]) != b"echo me" or ("echo-x-checksum", "py") not in e["trailers"]:
        wrong.append("trailers: %r %r %r" % (e["status"], bytes(e["body"]), e["trailers"]))
    if answers[names["doomed"]]["ended"]:
        wrong.append("the reset stream was answered")
    conn.close_connection()
    sock.sendall(conn.data_to_send())
    sock.close()
    if wrong:
        print("\n".join(wrong))
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
