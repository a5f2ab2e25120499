"""Access control: users and SASL mechanisms, password hashes, vhost permissions and
topic permissions, with RabbitMQ's refusal texts. Below the connection processes,
which ask it; above `channel.protocol`, whose frames carry the credentials.
"""
