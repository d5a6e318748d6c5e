"""Analysis: run dirs -> tidy tables -> statistics -> report."""
