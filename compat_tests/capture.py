"""A recording TCP proxy: every remoting frame that passes through is written to a file, byte for byte.

It sits between a real client and a real Apache name server or broker. Bytes are forwarded as soon as
they arrive; a copy of each direction's stream is cut into frames at the length field and each frame is
decoded with ``wire.frame`` only to name it in the index (code, opaque, flag, serialization).

Used by ``record_vectors.py`` to capture the golden vectors once by hand; the tests never run it.

    python -m compat_tests.capture --listen 127.0.0.1:19876 --target 127.0.0.1:9876 --out /tmp/frames
"""

from __future__ import annotations

import argparse
import itertools
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from ferrymq.wire.frame import decode_frame_payload

_LENGTH = struct.Struct(">i")


@dataclass
class FrameSink:
    """Writes frames as ``<label>-c<conn>-<seq>-<c2s|s2c>.bin`` plus one JSON line each in index.jsonl."""

    out: Path
    label: str
    #: Free-form tag written into each entry (e.g. which client run is in progress).
    run: str = ""
    _seq: itertools.count = field(default_factory=lambda: itertools.count(1))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)

    def record(self, conn_id: int, direction: str, frame: bytes) -> None:
        entry: dict = {"label": self.label, "run": self.run, "conn": conn_id, "direction": direction, "size": len(frame),
                       "time": time.time()}
        try:
            cmd = decode_frame_payload(frame[4:])
            entry.update(code=cmd.code, opaque=cmd.opaque, flag=cmd.flag, language=cmd.language.name,
                         version=cmd.version, serialize=cmd.serialize_type.name, body_size=len(cmd.body),
                         ext=cmd.ext_fields)
        except Exception as exc:  # the index notes what our codec could not read; the bytes are kept
            entry["decode_error"] = f"{type(exc).__name__}: {exc}"
        with self._lock:
            seq = next(self._seq)
            name = f"{self.label}-c{conn_id:03d}-{seq:05d}-{direction}.bin"
            (self.out / name).write_bytes(frame)
            entry.update(seq=seq, file=name)
            with open(self.out / "index.jsonl", "ab") as index:
                index.write(orjson.dumps(entry) + b"\n")


class _Splitter:
    """Cuts a byte stream into whole frames at the 4-byte length field."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        self.buf += data
        frames = []
        while len(self.buf) >= 4:
            (length,) = _LENGTH.unpack_from(self.buf, 0)
            if len(self.buf) < 4 + length:
                break
            frames.append(bytes(self.buf[: 4 + length]))
            del self.buf[: 4 + length]
        return frames


class RecordingProxy:
    """Listens on ``listen``, connects each client to ``target``, records both directions."""

    def __init__(self, listen: tuple[str, int], target: tuple[str, int], sink: FrameSink):
        self.target = target
        self.sink = sink
        self.server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.server.bind(listen)
        self.server.listen(64)
        self.server.settimeout(0.2)
        self.listen = self.server.getsockname()
        self._conn_ids = itertools.count(1)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._sockets: list[socket.socket] = []

    @property
    def addr(self) -> str:
        return f"{self.listen[0]}:{self.listen[1]}"

    def start(self) -> "RecordingProxy":
        self._spawn(self._accept_loop)
        return self

    def _spawn(self, target, *args) -> None:
        t = threading.Thread(target=target, args=args, daemon=True)
        t.start()
        self._threads.append(t)

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self.server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            self._sockets += [client, upstream]
            conn_id = next(self._conn_ids)
            self._spawn(self._pump, client, upstream, conn_id, "c2s")
            self._spawn(self._pump, upstream, client, conn_id, "s2c")

    def _pump(self, src: socket.socket, dst: socket.socket, conn_id: int, direction: str) -> None:
        splitter = _Splitter()
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
                for frame in splitter.feed(data):
                    self.sink.record(conn_id, direction, frame)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def stop(self) -> None:
        self._stop.set()
        self.server.close()
        for s in self._sockets:
            try:
                s.close()
            except OSError:
                pass


def _hostport(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--listen", required=True, type=_hostport, help="host:port to accept clients on")
    parser.add_argument("--target", required=True, type=_hostport, help="host:port of the real server")
    parser.add_argument("--out", required=True, type=Path, help="directory for frame files and index.jsonl")
    parser.add_argument("--label", default="frames", help="file name prefix")
    args = parser.parse_args(argv)
    proxy = RecordingProxy(args.listen, args.target, FrameSink(args.out, args.label)).start()
    print(f"recording {proxy.addr} -> {args.target[0]}:{args.target[1]} into {args.out}; Ctrl-C stops")
    try:
        while True:
            time.sleep(1)
    except KeyboardInterrupt:
        proxy.stop()


if __name__ == "__main__":
    main()
