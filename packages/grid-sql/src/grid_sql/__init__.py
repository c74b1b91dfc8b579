"""grid-sql: dialects, role projection, schema lexicons and the SemanticChecker."""
