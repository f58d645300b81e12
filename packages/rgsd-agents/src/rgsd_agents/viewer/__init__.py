"""``rgsd view``: explore a trained run's skills live in a browser (viser), simulated on the CPU.

``session`` steps the policy, its vMF variants and the reference; ``latents`` picks each clip's latent as the
run's method does; ``bodies`` draws humanoids in a viser scene; ``app`` is the page (controls, camera, loop)
and the small API tests drive.
"""
