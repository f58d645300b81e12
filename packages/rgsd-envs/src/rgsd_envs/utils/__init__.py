"""Small helpers: batched rotations, atomic files and input errors, dataclass configs from YAML, torch threads."""
