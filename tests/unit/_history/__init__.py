"""Unit tests of keepgoing/_history/."""
