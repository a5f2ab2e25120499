"""The management plugin's face: RabbitMQ's HTTP API and its Prometheus endpoint.

This layer reads the broker (`broker.running`, `broker.ctl_ops`) and talks AMQP to
the node's own listener for what a channel does (declare, publish, get), as
RabbitMQ's management plugin opens a connection as the requesting user. Nothing
below this package imports it.
"""
