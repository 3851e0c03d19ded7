"""A network partition a test can make and heal without privileges: TCP proxies in a broker's outbound paths.

A broker whose ``namesrvAddr`` and ``controllerAddr`` name :class:`Link` proxies instead of the servers
loses both at once when the test severs its :class:`Partition`: every connection through the links is
closed and new ones are closed as soon as they are accepted, as a peer behind a dead route looks to a
client that reconnects. Healing lets connections through again.

A link carries remoting frames whole, with its target's address in each answer replaced by its own: a
controller names itself as the leader (CONTROLLER_GET_METADATA_INFO), and a broker sends its next calls
there; through the link, they stay behind the partition too.
"""

from __future__ import annotations

import socket
import struct
import threading

from .processes import LOOPBACK, free_port

CHUNK = 64 * 1024


class Link:
    """A TCP proxy from a port of its own on the loopback to ``target`` (``host:port``)."""

    def __init__(self, target: str):
        host, port = target.rsplit(":", 1)
        self.target = (host, int(port))
        self.listener = socket.create_server((LOOPBACK, free_port()))
        self.addr = f"{LOOPBACK}:{self.listener.getsockname()[1]}"
        self.severed = False
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        threading.Thread(target=self._accept, name=f"link {self.addr}", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.severed:
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=3)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._open.update((client, upstream))
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._answers, args=(upstream, client), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(CHUNK):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            self._close(src, dst)

    def _answers(self, src: socket.socket, dst: socket.socket) -> None:
        """Frames from the target, each passed on once whole, the target's address in it made the link's
        (both ports come from one range, so no length changes)."""
        real, mine = f"{self.target[0]}:{self.target[1]}".encode(), self.addr.encode()
        assert len(real) == len(mine), (real, mine)
        pending = b""
        try:
            while data := src.recv(CHUNK):
                pending += data
                whole = 0
                while len(pending) - whole >= 4:
                    size = 4 + struct.unpack_from(">i", pending, whole)[0]
                    if len(pending) - whole < size:
                        break
                    whole += size
                if whole:
                    dst.sendall(pending[:whole].replace(real, mine))
                    pending = pending[whole:]
        except OSError:
            pass
        finally:
            self._close(src, dst)

    def _close(self, *socks: socket.socket) -> None:
        with self._lock:
            for sock in socks:
                self._open.discard(sock)
        for sock in socks:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def sever(self) -> None:
        """Close every connection through the link and refuse new ones until :meth:`heal`."""
        self.severed = True
        with self._lock:
            open_now = list(self._open)
        self._close(*open_now)

    def heal(self) -> None:
        self.severed = False

    def close(self) -> None:
        self.sever()
        try:
            self.listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.listener.close()


class Partition:
    """The links of one broker: sever them all to cut the broker off, heal them to let it back."""

    def __init__(self, namesrv_addr: str, controller_addr: str):
        self.namesrv = Link(namesrv_addr)
        self.controller = Link(controller_addr)

    def sever(self) -> None:
        self.namesrv.sever()
        self.controller.sever()

    def heal(self) -> None:
        self.namesrv.heal()
        self.controller.heal()

    def close(self) -> None:
        self.namesrv.close()
        self.controller.close()
