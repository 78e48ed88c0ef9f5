"""Unit tests of keepgoing/_gateway/."""
