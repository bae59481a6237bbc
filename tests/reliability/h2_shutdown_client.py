#!/usr/bin/python3
"""The verifying client of shutdown/h2 (scripts/reliability/http2.sh), on Python's h2 (Debian's python3-h2): a peer
tern did not write, so that the check does not trust the code it checks.

    h2_shutdown_client.py HOST:PORT [--conns C] [--streams M]

C connections over h2c with prior knowledge, each keeping M streams of POST /ping {"sequence": N} in flight until the
server closes it. On every odd stream the body follows its HEADERS 50 to 250 ms later, so that at any moment the
server holds streams it has accepted but cannot answer yet: a SIGTERM finds them there, and they must be finished
after the GOAWAY. Prints "running: ..." once every connection has had two answers (the script sends SIGTERM then),
and at the end one "RESULT ok ..." or "RESULT fail ..." line. Checked:
  - every answer is 200 with {"sequence":N} of its own request;
  - every connection ends with a GOAWAY (error NO_ERROR) and then the end of the stream;
  - every stream at or below the final GOAWAY's last-stream-id is answered whole (an accepted request lost fails);
    the streams above it are the ones the server never processed, counted as refused;
  - no stream is reset, and the connections run until the signal.
h2 takes a GOAWAY as the end of the connection and would then refuse the frames of the streams that finish after it
(RFC 9113, 6.8 lets them finish): the connection's state machine here stays open after a GOAWAY, and no stream is
opened once one has arrived."""
import random
import socket
import sys
import threading
import time

import h2.config
import h2.connection
import h2.errors
import h2.events
from h2.connection import ConnectionInputs, ConnectionState

DEADLINE_S = 20  # no byte for this long: a hang


class Failure(Exception):
    pass


class Conn:
    def __init__(self, index, host, port, streams):
        self.index, self.host, self.port, self.streams = index, host, port, streams
        self.answered = 0
        self.answered_after_goaway = 0  # accepted streams finished after the (first) GOAWAY
        self.refused = 0  # streams above the final last-stream-id: never processed, the client may send them again
        self.goaways = []
        self.error = None
        self.ended = False

    def run(self):
        try:
            self.loop()
        except Failure as e:
            self.error = f"connection {self.index}: {e}"
        except Exception as e:  # noqa: BLE001 - any other error is this connection's failure, said in the result
            self.error = f"connection {self.index}: {type(e).__name__}: {e}"
        self.ended = True

    def loop(self):
        sock = socket.create_connection((self.host, self.port), timeout=DEADLINE_S)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        sm = conn.state_machine
        sm._transitions = dict(sm._transitions)  # this connection's own table: see the note at the top
        sm._transitions[(ConnectionState.CLIENT_OPEN, ConnectionInputs.RECV_GOAWAY)] = \
            (None, ConnectionState.CLIENT_OPEN)
        conn.initiate_connection()
        sock.sendall(conn.data_to_send())
        rng = random.Random(self.index)
        inflight = {}  # stream id -> [sequence, status, body bytes]
        bodies_due = []  # (time, stream id, body): the delayed bodies of odd streams
        k = 0
        last_stream_id = None  # the lowest last-stream-id of the GOAWAYs seen
        while True:
            if last_stream_id is None:
                limit = min(self.streams, conn.remote_settings.max_concurrent_streams)
                while len(inflight) < limit:
                    seq = (self.index << 32) | k
                    body = b'{"sequence": %d}' % seq
                    sid = conn.get_next_available_stream_id()
                    conn.send_headers(sid, [(":method", "POST"), (":path", "/ping"), (":scheme", "http"),
                                            (":authority", f"{self.host}:{self.port}"),
                                            ("content-type", "application/json"),
                                            ("content-length", str(len(body)))])
                    if k % 2 == 0:
                        conn.send_data(sid, body, end_stream=True)
                    else:
                        bodies_due.append((time.monotonic() + rng.uniform(0.05, 0.25), sid, body))
                    inflight[sid] = [seq, None, b""]
                    k += 1
            now = time.monotonic()
            for due in [d for d in bodies_due if d[0] <= now]:
                bodies_due.remove(due)
                if last_stream_id is None or due[1] <= last_stream_id:
                    conn.send_data(due[1], due[2], end_stream=True)
            out = conn.data_to_send()
            if out:
                sock.sendall(out)
            wait = min([d[0] for d in bodies_due], default=now + DEADLINE_S) - now
            sock.settimeout(max(0.001, min(DEADLINE_S, wait)))
            t0 = time.monotonic()
            try:
                data = sock.recv(65536)
            except socket.timeout:
                if time.monotonic() - t0 >= DEADLINE_S - 0.01:
                    raise Failure(f"nothing from the server for {DEADLINE_S} s, {len(inflight)} streams in flight")
                continue
            except (ConnectionResetError, BrokenPipeError) as e:
                raise Failure(f"the server reset the connection ({e}) with {len(inflight)} streams in flight")
            if not data:
                break
            for ev in conn.receive_data(data):
                if isinstance(ev, h2.events.ResponseReceived):
                    inflight[ev.stream_id][1] = dict(ev.headers).get(":status")
                elif isinstance(ev, h2.events.DataReceived):
                    inflight[ev.stream_id][2] += ev.data
                    conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                elif isinstance(ev, h2.events.StreamEnded):
                    seq, status, body = inflight.pop(ev.stream_id)
                    if status != "200" or body != b'{"sequence":%d}' % seq:
                        raise Failure(f"stream {ev.stream_id} (sequence {seq}) answered {status} {body[:40]!r}")
                    self.answered += 1
                    if self.goaways:
                        self.answered_after_goaway += 1
                elif isinstance(ev, h2.events.StreamReset):
                    raise Failure(f"stream {ev.stream_id} reset by the server ({ev.error_code!r})")
                elif isinstance(ev, h2.events.ConnectionTerminated):
                    if ev.error_code != h2.errors.ErrorCodes.NO_ERROR:
                        raise Failure(f"GOAWAY with error {ev.error_code!r}")
                    self.goaways.append(ev.last_stream_id)
                    last_stream_id = (ev.last_stream_id if last_stream_id is None
                                      else min(last_stream_id, ev.last_stream_id))
        sock.close()
        if not self.goaways:
            raise Failure(f"the server closed the connection without a GOAWAY, {len(inflight)} streams in flight")
        lost = sorted(sid for sid in inflight if sid <= last_stream_id)
        if lost:
            raise Failure(f"{len(lost)} accepted streams (at or below last-stream-id {last_stream_id}) unanswered"
                          f" when the connection closed, e.g. stream {lost[0]}")
        self.refused = len(inflight)


def main():
    args = sys.argv[1:]
    host, _, port = args[0].rpartition(":")
    opts = dict(zip(args[1::2], args[2::2]))
    conns = [Conn(i, host, int(port), int(opts.get("--streams", 16))) for i in range(int(opts.get("--conns", 4)))]
    threads = [threading.Thread(target=c.run, daemon=True) for c in conns]
    for t in threads:
        t.start()
    t0 = time.monotonic()
    while not all(c.answered >= 2 for c in conns):
        if any(c.ended for c in conns) or time.monotonic() - t0 > 60:
            for c in conns:
                c.error = c.error or (f"connection {c.index} ended" if c.ended else None)
            why = next((c.error for c in conns if c.error), "not every connection answered twice in 60 s")
            print(f"RESULT fail before the traffic ran: {why}", flush=True)
            return 1
        time.sleep(0.02)
    at_running = sum(c.answered for c in conns)
    print(f"running: {len(conns)} connections, {at_running} answers so far", flush=True)
    for t in threads:
        t.join(120)
    errors = [c.error or f"connection {c.index} still running 120 s later" for c in conns if c.error or not c.ended]
    if errors:
        print(f"RESULT fail {errors[0]}" + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""), flush=True)
        return 1
    after = sum(c.answered_after_goaway for c in conns)
    if after == 0:
        print("RESULT fail no accepted stream was finished after a GOAWAY (the delayed bodies should leave some)",
              flush=True)
        return 1
    print(f"RESULT ok connections={len(conns)} streams_each={conns[0].streams}"
          f" answered_verified={sum(c.answered for c in conns)} ({at_running} when the traffic ran)"
          f" finished_after_goaway={after} refused_above_last_stream_id={sum(c.refused for c in conns)}"
          f" goaways_per_connection={max(len(c.goaways) for c in conns)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
