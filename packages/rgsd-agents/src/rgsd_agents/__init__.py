"""rgsd-agents."""
