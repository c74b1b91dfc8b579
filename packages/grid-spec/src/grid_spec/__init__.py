"""grid-spec: the executable specification of GRID (see ``spec`` and ``properties``)."""
