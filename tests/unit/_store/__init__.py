"""Unit tests of keepgoing/_store/."""
