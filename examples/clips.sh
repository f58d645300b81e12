# The clip folders the example scripts train on, built in one place (sourced by real_mocap_cpu.sh,
# pretrained_cpu.sh and pretrained_gpu.sh, so two runs of them train and are measured on the same clips).
# rgsd_motions runs rgsd-motions; a script whose Python has no console scripts (the offline GPU bundle) defines it
# before sourcing this file, e.g. rgsd_motions() { "$PY" -m rgsd_envs.motion.cli "$@"; }

if ! declare -F rgsd_motions >/dev/null; then
  rgsd_motions() { rgsd-motions "$@"; }
fi

# deepmimic_clips SRC CLIPS CYCLES: the 8 DeepMimic clips of SRC into CLIPS, one import per file so each clip gets
# its own category (walk, run, jog, ...); the one-cycle locomotion clips (walk, run, jog, zombie walk: DeepMimic
# loops them) as CYCLES cycles each (rgsd-motions import --cycles), the others as captured.
deepmimic_clips() {
  local src=$1 clips=$2 cycles=$3 c n
  for c in walk run jog punch kick spinkick zombie_walk stealthy_walk; do
    case $c in walk|run|jog|zombie_walk) n=$cycles ;; *) n=1 ;; esac
    rgsd_motions import "$src/${c}_poses.npz" --out "$clips" --category "$c" --cycles "$n" --quiet
  done
}

# thirteen_clips CLIPS: the repository's 13 openly licensed clips in CLIPS (the 5 demo clips and the 8 DeepMimic
# clips of motions/deepmimic-smpl, locomotion as 3 cycles) with DeepMimic's licence notice, then their list; nothing
# is done when CLIPS already holds them (the notice is written last). Run from the repository root.
thirteen_clips() {
  local clips=$1
  [ -f "$clips/LICENSE" ] && return 0
  rgsd_motions demo --out "$clips"
  deepmimic_clips motions/deepmimic-smpl "$clips" 3
  cp motions/deepmimic-smpl/LICENSE "$clips"/
  rgsd_motions info "$clips"
}
