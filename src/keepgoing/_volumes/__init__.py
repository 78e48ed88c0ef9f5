"""Versioned volumes: files an agent keeps between steps and between runs.

``types``, ``paths`` and ``chunking`` are leaves the store builds on;
``staging`` and ``volume`` sit above the store (see docs/volumes.md).
"""
