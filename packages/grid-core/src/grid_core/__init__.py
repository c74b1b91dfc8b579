"""grid-core: GRID's engine."""
