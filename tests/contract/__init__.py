"""The store contract suite: every backend must pass it."""
