#!/usr/bin/env bash
# Rebuild the policy rgsd ships (`rgsd play --pretrained`): RGSD's `cpu` preset on the repository's 13 openly
# licensed clips (the 5 demo clips and the 8 DeepMimic clips of motions/deepmimic-smpl, built by examples/clips.sh
# as examples/pretrained_gpu.sh builds them), then its run folder and card in
# packages/rgsd-agents/src/rgsd_agents/pretrained/rgsd_cpu.
# Usage: examples/pretrained_cpu.sh [RUN_DIR]   (from the repository root; MINUTES, default 105, is the budget;
# OUT writes the folder elsewhere, to try the script without replacing the shipped policy; STEPS="clips" (or
# "clips train", ...) runs only those steps; default: clips train card)
set -euo pipefail
RUN=${1:-runs/pretrained_cpu}
CLIPS=${RUN}_clips
MINUTES=${MINUTES:-105}
STEPS=${STEPS:-clips train card}
. "$(dirname "${BASH_SOURCE[0]}")/clips.sh"
if [[ " $STEPS " == *" clips "* ]]; then
  thirteen_clips "$CLIPS"
fi
if [[ " $STEPS " == *" train "* ]]; then
  if [ -f "$RUN/checkpoints/latest.pt" ]; then  # continue an interrupted run
    rgsd train --resume "$RUN" --set max_minutes="$MINUTES" --no-progress
  else
    rgsd train --config cpu --out "$RUN" --set env.motions="$CLIPS" --set max_minutes="$MINUTES" --no-progress
  fi
fi
if [[ " $STEPS " == *" card "* ]]; then
  ABOUT=$(printf '{"trained": "rgsd train --config cpu on the 13 clips, %s minutes on 2 CPU cores", "command": "examples/pretrained_cpu.sh"}' "$MINUTES")
  python -m rgsd_agents.pretrained "$RUN" --motions "$CLIPS" --about "$ABOUT" ${OUT:+--out "$OUT"}
fi
