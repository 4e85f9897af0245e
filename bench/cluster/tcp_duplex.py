"""Raw TCP: two peers each send SIZE bytes to the other at once (full duplex) over one socket,
REPS times after one warm-up; the side started with `connect` prints each repetition's time in ms
(until both directions are done, as MPI_Sendrecv is). The TCP side of scripts/cluster-floor.sh.

    python3 tcp_duplex.py listen ADDR PORT SIZE REPS
    python3 tcp_duplex.py connect ADDR PORT SIZE REPS
"""
import socket
import sys
import threading
import time


def exchange(sock, size):
    out = memoryview(bytearray(size))
    got = [0]

    def receive():
        buf = bytearray(1 << 20)
        while got[0] < size:
            n = sock.recv_into(buf, min(len(buf), size - got[0]))
            if n == 0:
                raise ConnectionError("peer closed the connection")
            got[0] += n

    reader = threading.Thread(target=receive)
    reader.start()
    sock.sendall(out)
    reader.join()
    if got[0] != size:
        raise ConnectionError(f"received {got[0]} of {size} bytes")


def main():
    if len(sys.argv) != 6 or sys.argv[1] not in ("listen", "connect"):
        sys.exit(__doc__)
    role, addr, port, size, reps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    if role == "listen":
        server = socket.create_server((addr, port))
        sock, _ = server.accept()
    else:
        for _ in range(100):
            try:
                sock = socket.create_connection((addr, port))
                break
            except ConnectionRefusedError:
                time.sleep(0.1)
        else:
            sys.exit(f"tcp_duplex: nothing listens on {addr}:{port}")
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for r in range(-1, reps):
        # A one-byte handshake starts both sides together.
        sock.sendall(b"g")
        if sock.recv(1) != b"g":
            sys.exit("tcp_duplex: lost the handshake")
        t0 = time.perf_counter()
        exchange(sock, size)
        ms = (time.perf_counter() - t0) * 1e3
        if role == "connect" and r >= 0:
            print(f"{ms:.1f}", flush=True)
    sock.close()


if __name__ == "__main__":
    main()
