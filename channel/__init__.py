"""The AMQP 0-9-1 side of a warren node: connections, channels, flow control.

One TCP connection is served by a `reader` process (socket input, connection
methods, credit and throttle), one `channel` process per AMQP channel (the
protocol logic, routing through `exchange`/`routing`, queues through a
`backend.QueueBackend`) and one `writer` process per channel (ordered output).
`credit_flow` is the pure accounting that makes a slow channel stop the reader
from reading the socket. See docs/channel.md.
"""
