"""The book's exercises: their YAML schema, the nbgrader course written from them, the book's exercise cells."""
