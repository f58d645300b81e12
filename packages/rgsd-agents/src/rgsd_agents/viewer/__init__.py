"""``rgsd view``: explore a trained run's skills live in a browser (viser), simulated on the CPU.

``session`` steps the policy, its vMF variants and the reference, with each clip's latent as the run's method
picks it (``rgsd_agents.run_skills``, shared with ``rgsd play`` and ``rgsd export``); ``goal`` steps a downstream
run's goal-reaching policy toward a goal that can move; ``bodies`` draws humanoids in a viser scene; ``app`` is the
pages (controls, camera, loop, the floor click) and the small API tests drive.
"""
