"""Exchanges and bindings (`rabbit_exchange`, `rabbit_binding`) and the pure
exchange-type matching that picks the bindings a message takes.
"""
