"""AMQP 0-9-1 on the wire: frames and their codec, the method-argument check,
frame-error texts, command assembly, the socket, the writer process, heartbeats and
connection tuning. The bottom layer of `channel`: it imports only `channel.errors`.
"""
