"""The client: :class:`~keepgoing.Client` and the backends it talks through."""
