"""Generic reinforcement-learning parts that know nothing of RGSD: PPO, its storage and networks, the rollout,
the training loop, data parallelism, precision, progress, the replay buffer and episode statistics."""
