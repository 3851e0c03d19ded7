"""Message properties the gateways agree on, so that what one gateway stores another reads the same way."""

#: a body's media type: HTTP's Content-Type and ``contentType``, MQTT 5's Content Type
CONTENT_TYPE = "CONTENT_TYPE"
