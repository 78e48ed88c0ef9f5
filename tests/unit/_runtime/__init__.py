"""Unit tests of keepgoing/_runtime/."""
