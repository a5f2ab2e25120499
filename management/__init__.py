"""The management plugin's face: RabbitMQ's HTTP API, its Prometheus endpoint and a
live page of the node (one static file reading the API).

This layer reads the broker (`broker.running`, `broker.ctl_ops`) and talks AMQP to
the node's own listener for what a channel does (declare, publish, get), as
RabbitMQ's management plugin opens a connection as the requesting user. Nothing
below this package imports it.
"""
