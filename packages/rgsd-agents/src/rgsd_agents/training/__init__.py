"""The runners that train a method: the PPO runner (on-policy methods), the off-policy runner (FB-CPR) and
``trainer_class``, which picks one by the method's loop."""
