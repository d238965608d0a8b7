"""Graded exercises: one YAML file per chapter feeds both the book's exercise section and an nbgrader assignment."""
