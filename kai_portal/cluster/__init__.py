"""Node pools, nodes and their GPU devices."""
