"""Unit tests of keepgoing/_worker/."""
