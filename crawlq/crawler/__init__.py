"""The built-in crawler: fetching, links, politeness and the address guard."""
