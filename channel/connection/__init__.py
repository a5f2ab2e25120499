"""The processes of one AMQP connection, and the listener that starts them: reader,
channel, connection supervisor, queue collector, with the channel's confirm and
pending-ack records. The top layer of `channel`: it ties the protocol, access
control, limits, exchanges and queue types together.
"""
