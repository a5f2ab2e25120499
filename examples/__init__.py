"""Small, complete programs built on warren, each the subject of a docs tutorial."""
