"""`python -m opsd_sweep.worker FD`: a phase worker on the listening socket FD (see server.py)."""

import socket
import sys

from opsd_sweep.worker.server import serve

if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m opsd_sweep.worker LISTENING_SOCKET_FD (started by the local launcher)")
    sys.exit(serve(socket.socket(fileno=int(sys.argv[1]))))
