"""Unit tests of keepgoing/_volumes/."""
