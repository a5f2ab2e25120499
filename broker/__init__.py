"""A warren node assembled from the runtime packages, and the `warren` CLI."""
