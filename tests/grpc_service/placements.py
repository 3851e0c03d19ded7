"""Where the gRPC port runs (``grpcEventLoop``), for the tests that serve it both ways: each value's words
in the server's log line."""

PLACEMENTS = {"BROKER": "on the broker's event loop", "OWN_THREAD": "on a thread of its own"}
