"""Adapters to other RL libraries, one file each."""
