"""rgsd-eval."""
