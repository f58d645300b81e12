#!/usr/bin/env bash
# Train RGSD's `paper` preset on one GPU (MuJoCo Warp worlds) on the repository's 13 openly licensed clips (the 5
# demo clips and the 8 DeepMimic clips of motions/deepmimic-smpl, built by examples/clips.sh as
# examples/pretrained_cpu.sh builds them, so the two cards compare clip for clip), then build its run folder and
# card into OUT: the candidate for the policy rgsd ships (`rgsd play --pretrained`), which replaces the shipped one
# when its card is better (mean error and falls; the card states the GPU, the minutes and the samples).
# Usage: examples/pretrained_gpu.sh [RUN_DIR]   (from the repository root; MINUTES, default 7, is the training
# budget; OUT, default RUN_DIR_card, where the folder goes; PYTHON, default python3, runs the packages, installed
# or on PYTHONPATH as the offline GPU bundle leaves them; DEVICE and PRESET rehearse it elsewhere; STEPS="clips"
# (or "clips train", ...) runs only those steps; default: clips train card)
set -euo pipefail
RUN=${1:-runs/pretrained_gpu}
CLIPS=${RUN}_clips
MINUTES=${MINUTES:-7}
OUT=${OUT:-${RUN}_card}
PY=${PYTHON:-python3}
DEVICE=${DEVICE:-cuda}
PRESET=${PRESET:-paper}
STEPS=${STEPS:-clips train card}
rgsd_motions() { "$PY" -m rgsd_envs.motion.cli "$@"; }  # the offline GPU bundle installs no console scripts
. "$(dirname "${BASH_SOURCE[0]}")/clips.sh"
if [[ " $STEPS " == *" clips "* ]]; then
  thirteen_clips "$CLIPS"
fi
if [[ " $STEPS " == *" train "* ]]; then
  if [ -f "$RUN/checkpoints/latest.pt" ]; then  # continue an interrupted run
    "$PY" -m rgsd_agents.cli train --resume "$RUN" --set max_minutes="$MINUTES" --no-progress
  else
    "$PY" -m rgsd_agents.cli train --config "$PRESET" --out "$RUN" --device "$DEVICE" --no-progress \
      --set env.backend=warp --set env.motions="$CLIPS" --set max_minutes="$MINUTES"
  fi
fi
if [[ " $STEPS " == *" card "* ]]; then
  HARDWARE=$("$PY" -c "import torch; print(torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'CPU')")
  ABOUT=$(printf '{"trained": "rgsd train --config %s on the 13 clips, %s minutes on one %s (MuJoCo Warp worlds)", "command": "examples/pretrained_gpu.sh"}' "$PRESET" "$MINUTES" "$HARDWARE")
  "$PY" -m rgsd_agents.pretrained "$RUN" --motions "$CLIPS" --about "$ABOUT" --out "$OUT"
fi
