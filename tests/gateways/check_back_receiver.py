"""A check-back receiver for the HTTP gateway's transaction tests (these and compat_tests'): the service
whose local transactions the gateway asks about, on a loopback port."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ferrymq.gateways.http.transactions import SIGNATURE_HEADER, TIMESTAMP_HEADER, verify


class Receiver:
    """Verifies each call's signature (401 when it does not verify, as a real receiver would) and answers
    from a plan per transaction id (or per message body, for a plan made before the transaction begins: the
    broker's first check may come before the test has the id): a state, an HTTP status, ``"garbled"`` or ``"slow"`` (COMMIT after
    ``slow`` seconds, past the gateway's timeout); UNKNOWN when the plan is used up.

    Each call is recorded in ``calls``: its raw body, headers, parsed JSON, whether the signature
    verified and what the receiver answered (the step, or UNKNOWN for an empty plan)."""

    def __init__(self, secret: str, slow: float = 3.0):
        self.secret = secret.encode()
        self.slow = slow
        self.plans: dict[str, list[Any]] = {}
        self.calls: list[dict[str, Any]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers["Content-Length"]))
                call = {"raw": raw, "timestamp": self.headers[TIMESTAMP_HEADER],
                        "signature": self.headers[SIGNATURE_HEADER], "json": json.loads(raw)}
                call["verified"] = verify(receiver.secret, call["timestamp"], raw, call["signature"])
                if call["verified"]:
                    tx_id, body = call["json"]["transactionId"], call["json"].get("body")
                    plan = receiver.plans.get(tx_id if tx_id in receiver.plans else body, [])
                    call["answered"] = plan.pop(0) if plan else "UNKNOWN"
                else:
                    call["answered"] = 401
                receiver.calls.append(call)
                step = call["answered"]
                if isinstance(step, int):
                    return self._answer(step, b"failed" if call["verified"] else b"bad signature")
                if step == "garbled":
                    return self._answer(200, b"<html>yes</html>")
                if step == "slow":
                    time.sleep(receiver.slow)
                    step = "COMMIT"  # too late: the gateway has counted UNKNOWN already
                self._answer(200, json.dumps({"state": step}).encode())

            def _answer(self, status: int, body: bytes) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:  # the gateway gave up waiting
                    pass

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/checks"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def calls_of(self, tx_id: str) -> list[dict[str, Any]]:
        return [c for c in self.calls if c["json"]["transactionId"] == tx_id]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
