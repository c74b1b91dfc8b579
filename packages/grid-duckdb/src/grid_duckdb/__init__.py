"""GRID's DuckDB dialect: a plug-in through the `grid.dialects` entry points."""
