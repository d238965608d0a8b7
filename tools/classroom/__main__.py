"""`python -m tools.classroom`: the exercises' command line (see book/teachers.md)."""

import sys

from tools.classroom.exercises import main

sys.exit(main())
