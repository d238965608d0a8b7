"""Build and measurement scripts run by the Makefile (make book, make bench)."""
