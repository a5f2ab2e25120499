"""The queue types behind a channel: the `QueueBackend` interface every type
implements, the choice of type a declare gets, the argument checks they share and
the stored message. `quorum/` and `classic/` hold one type each, side by side;
`testing` is an in-memory backend for tests of the channel layer.
"""
