"""Unit tests of keepgoing/_groups/."""
