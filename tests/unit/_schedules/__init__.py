"""Unit tests of keepgoing/_schedules/."""
