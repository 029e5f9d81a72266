"""Stage 1 of session search: query parsing, routing, filters, cards, facets."""
