"""keepgoing: durable execution for Python."""
