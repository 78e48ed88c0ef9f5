"""The ``keepgoing`` command line."""
