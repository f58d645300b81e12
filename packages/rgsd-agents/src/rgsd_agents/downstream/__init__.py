"""Goal reaching with a frozen low-level policy: the high-level PPO run (``runner``) and its report and seed
curves (``report``)."""
