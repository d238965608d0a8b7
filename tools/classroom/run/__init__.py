"""Running a class: one submission in a child, many on Dask, the records, feedback, gradebook, platforms."""
