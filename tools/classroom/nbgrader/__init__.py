"""nbgrader and nbclient integration: the sandboxed Execute step, its configuration, feedback, records."""
