"""The SMPL humanoid: the joint table (``skeleton``), the MJCF generated from it (``mjcf``) and user body shapes
(``body_shape``, optional smplx extra)."""
