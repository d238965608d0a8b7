"""Graded exercises: the book's grader (nbgrader in a sandbox) and the command line of tools/exercises."""
