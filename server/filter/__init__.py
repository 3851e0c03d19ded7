"""Server-side message filters: SQL92 property selectors (``sql92``)."""
