#!/usr/bin/env bash
# Train RGSD's `paper` preset on one GPU (MuJoCo Warp worlds) on the repository's 13 openly licensed clips (the 5
# demo clips and the 8 DeepMimic clips of motions/deepmimic-smpl), then build its run folder and card into OUT: the
# candidate for the policy rgsd ships (`rgsd play --pretrained`), which replaces the shipped one when its card is
# better (mean error and falls; the card states the GPU, the minutes and the samples).
# Usage: examples/pretrained_gpu.sh [RUN_DIR]   (from the repository root; MINUTES, default 7, is the training
# budget; OUT, default RUN_DIR_card, where the folder goes; PYTHON, default python3, runs the packages, installed
# or on PYTHONPATH as the offline GPU bundle leaves them; DEVICE and PRESET rehearse it elsewhere)
set -euo pipefail
RUN=${1:-runs/pretrained_gpu}
CLIPS=${RUN}_clips
MINUTES=${MINUTES:-7}
OUT=${OUT:-${RUN}_card}
PY=${PYTHON:-python3}
DEVICE=${DEVICE:-cuda}
PRESET=${PRESET:-paper}
if [ ! -f "$CLIPS/walk.npz" ]; then
  "$PY" -m rgsd_envs.motion.cli demo --out "$CLIPS"
  "$PY" -m rgsd_envs.motion.cli import motions/deepmimic-smpl --out "$CLIPS" --quiet
  cp motions/deepmimic-smpl/LICENSE "$CLIPS"/
fi
if [ -f "$RUN/checkpoints/latest.pt" ]; then  # continue an interrupted run
  "$PY" -m rgsd_agents.cli train --resume "$RUN" --set max_minutes="$MINUTES" --no-progress
else
  "$PY" -m rgsd_agents.cli train --config "$PRESET" --out "$RUN" --device "$DEVICE" --no-progress \
    --set env.backend=warp --set env.motions="$CLIPS" --set max_minutes="$MINUTES"
fi
HARDWARE=$("$PY" -c "import torch; print(torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'CPU')")
ABOUT=$(printf '{"trained": "rgsd train --config %s on the 13 clips, %s minutes on one %s (MuJoCo Warp worlds)", "command": "examples/pretrained_gpu.sh"}' "$PRESET" "$MINUTES" "$HARDWARE")
"$PY" -m rgsd_agents.pretrained "$RUN" --motions "$CLIPS" --about "$ABOUT" --out "$OUT"
