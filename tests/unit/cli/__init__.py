"""Unit tests of keepgoing/cli/."""
