"""FerryMQ's Python client SDK: Deferred-based remoting and admin calls, plus a blocking facade."""
