"""Schedules: cron and interval specs, the firing service, and schedules declared in code."""
