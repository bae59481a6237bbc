"""What the Python HTTP/2 peers of tern's tests share: a listener on 127.0.0.1 (a free port, printed as "port N"),
each accepted connection served on a thread of its own by serve(sock, number) (connections counted from 1), until
standard input closes."""
import socket
import sys
import threading


def listen_and_serve(serve):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    print("port", listener.getsockname()[1], flush=True)
    count = [0]

    def accept():
        while True:
            s, _ = listener.accept()
            count[0] += 1
            threading.Thread(target=serve, args=(s, count[0]), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    sys.stdin.read()


def event_batches(sock, conn):
    """The h2 events of each read from sock, a list a read, until the peer closes; after the caller has handled a
    batch, what conn has to send goes out. Closes sock at the end."""
    while True:
        try:
            data = sock.recv(65536)
        except OSError:
            break
        if not data:
            break
        yield conn.receive_data(data)
        out = conn.data_to_send()
        if out:
            sock.sendall(out)
    sock.close()
