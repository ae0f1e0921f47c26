"""GenericJob replicas that talk through their substituted $(service...) addresses.

Every replica serves on its own address and the shared port, then greets every other
replica there and checks the reply.  The same port in every pod works because each pod
has its own address, as in a cluster.  Usage: peers.py RANK PORT ADDRESS [ADDRESS...]
"""

import socket
import sys
import threading
import time


def serve(server: socket.socket, me: str, expected: int) -> None:
    for _ in range(expected):
        conn, _ = server.accept()
        with conn:
            hello = conn.recv(100).decode()
            conn.sendall(f"{me} got {hello}".encode())


def greet(me: str, peer: str, port: int, deadline: float) -> str:
    while True:
        try:
            with socket.create_connection((peer, port), timeout=2) as s:
                s.sendall(f"hello from {me}".encode())
                return s.recv(100).decode()
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def main() -> int:
    rank, port, addresses = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
    me = addresses[rank]
    server = socket.create_server((me, port))
    others = [a for a in addresses if a != me]
    worker = threading.Thread(target=serve, args=(server, me, len(others)))
    worker.start()
    deadline = time.monotonic() + 20
    for peer in others:
        reply = greet(me, peer, port, deadline)
        print(f"{me} -> {peer}: {reply}", flush=True)
        if reply != f"{peer} got hello from {me}":
            return 1
    worker.join()
    return 0


if __name__ == "__main__":
    sys.exit(main())
