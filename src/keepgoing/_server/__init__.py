"""The HTTP server: the API (``app.create_app``), tokens and permissions, metrics.

``keepgoing server`` runs it with :func:`keepgoing._server.serve.run_server`.
"""
