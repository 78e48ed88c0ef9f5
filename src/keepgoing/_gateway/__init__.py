"""The model gateway: an OpenAI-compatible API whose keys, usage and traces stay in
the user's store (see ``docs/gateway.md``).

* ``config.py`` and ``prices.py``: ``keepgoing.toml``'s ``[gateway]`` table;
* ``providers/``: OpenAI-compatible, Anthropic (translated), and the scripted model;
* ``service.py`` (with ``stream.py``, ``limits.py``, ``ledger.py``, ``requests.py``):
  admission, fallbacks, the ledger rows;
* ``http.py``: the ``/v1`` routes, which the server mounts;
* ``client.py``: what ``keepgoing.gateway.chat`` runs inside a task;
* ``cassette.py``, ``tracing.py``: recorded answers for tests, OpenTelemetry spans.

It sits beside the server: it imports the store and errors, never the server,
worker, client or CLI.
"""
