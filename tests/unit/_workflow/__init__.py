"""Unit tests of keepgoing/_workflow/."""
