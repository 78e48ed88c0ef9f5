"""Unit tests of keepgoing/_views/."""
