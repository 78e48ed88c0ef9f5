"""Unit tests of keepgoing/_server/."""
