#!/usr/bin/env bash
# The `cpu` preset on the 8 real motion-capture clips of DeepMimic (MIT licence; SMPL+H npz in
# motions/deepmimic-smpl, see motions/README.md): import, train for at most 2.5 hours, evaluate.
# Usage: examples/real_mocap_cpu.sh [MOTIONS_DIR] [RUN_DIR]   (from the repository root)
# STEPS="import" (or "import train", ...) runs only those steps; default: import train eval.
# CYCLES (default 3) imports the one-cycle locomotion clips (walk, run, jog, zombie walk; DeepMimic loops them)
# as that many cycles each (rgsd-motions import --cycles; it took the walk's error 27.0 -> 14.6 cm, the jog's 27.4 -> 17.3 cm);
# CYCLES=1 imports them as captured. MINUTES (default 150) is the training budget; EXTRA="--set torch_threads=1 ..." adds overrides to a new
# run (a resumed run keeps the settings in its folder).
set -euo pipefail
SRC=${1:-motions/deepmimic-smpl}
RUN=${2:-runs/cpu_mit}
CLIPS=${RUN}_clips
STEPS=${STEPS:-import train eval}
MINUTES=${MINUTES:-150}
CYCLES=${CYCLES:-3}
read -r -a EXTRA_ARGS <<< "${EXTRA:-}"
. "$(dirname "${BASH_SOURCE[0]}")/clips.sh"
if [[ " $STEPS " == *" import "* ]]; then
  deepmimic_clips "$SRC" "$CLIPS" "$CYCLES"
  rgsd-motions info "$CLIPS"
fi
if [[ " $STEPS " == *" train "* ]]; then
  if [ -f "$RUN/checkpoints/latest.pt" ]; then  # continue an interrupted run
    rgsd train --resume "$RUN" --set max_minutes="$MINUTES" --no-progress
  else
    rgsd train --config cpu --out "$RUN" --set env.motions="$CLIPS" --set max_minutes="$MINUTES" \
      "${EXTRA_ARGS[@]}" --no-progress
  fi
fi
if [[ " $STEPS " == *" eval "* ]]; then
  rgsd eval --run "$RUN" --motions "$CLIPS" --out "$RUN/report" --no-progress
fi
