"""Rewards: state encoders (``encoders``) and the encoder reward r = C + kappa mu(s')^T z as Gymnasium wrappers
(``encoder_reward``)."""
