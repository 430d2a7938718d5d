"""Reports read by people: HTML views of predictions and run results, and tables comparing runs."""
