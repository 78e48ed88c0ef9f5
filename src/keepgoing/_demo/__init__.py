"""The quickstart that ``keepgoing demo`` runs."""
