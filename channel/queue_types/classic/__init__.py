"""Classic queues (`rabbit_classic_queue`): the backend over `classic`'s queue
processes, their arguments, directory, durable store and dead lettering.
"""
