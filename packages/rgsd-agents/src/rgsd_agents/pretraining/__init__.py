"""Contrastive encoder pretraining (docs/training.md, Pretraining), one module per job: ``config`` (options and file
names), ``reference`` (the clips and their encoder inputs), ``pairs`` (minibatch sampling), ``negatives`` (states
near the reference that the reward should pay less), ``loss`` (InfoNCE), ``encoder`` (a fresh standardised encoder),
``statistics`` (alignment, separation, input standardisation), ``loop`` (``pretrain``: training and its outputs),
``reward_sharpness`` and ``sim_twins`` (how the reward falls off the reference).

Import from the modules: ``rgsd_agents.config`` reads ``pretraining.config`` without the training code."""
