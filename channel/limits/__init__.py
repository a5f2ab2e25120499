"""What slows or refuses work: connection, channel and queue limits, the channel's
global QoS limiter, `credit_flow`, publisher throttling and the memory and disk
alarms. Pure accounting and small processes that import no other layer of `channel`.
"""
