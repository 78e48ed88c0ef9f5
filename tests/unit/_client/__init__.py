"""Unit tests of keepgoing/_client/."""
