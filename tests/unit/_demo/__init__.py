"""Unit tests of keepgoing/_demo/."""
