#!/usr/bin/env bash
# Slurm batch script: ds-launch runs on the allocation's first node and starts one ds-worker per
# Slurm task through srun (--launcher slurm); the hostfile is written from the allocation.
#   sbatch -N 2 --ntasks-per-node=4 scripts/slurm-job.sh                       # built-in demo job
#   sbatch -N 2 --ntasks-per-node=4 scripts/slurm-job.sh train --config my.json --steps 1000
#   sbatch ... scripts/slurm-job.sh -- train.py --deepspeed_config ds.json     # any program
# DS_BIN (default: build/bin under the submit directory) locates ds-launch; DS_LAUNCH_FLAGS adds
# flags (e.g. --launcher_args=-O to overcommit CPUs).
#SBATCH --job-name=ds-train
#SBATCH --output=ds-train-%j.out
set -euo pipefail
cd "${SLURM_SUBMIT_DIR:-.}"   # sbatch runs a spooled copy of this file: paths are relative to the submit dir
bin=${DS_BIN:-$PWD/build/bin}

# SLURM_TASKS_PER_NODE looks like "4(x2),3": expand it to one count per node.
counts=()
IFS=, read -ra groups <<<"${SLURM_TASKS_PER_NODE:?not inside a Slurm allocation}"
for group in "${groups[@]}"; do
  if [[ $group =~ ^([0-9]+)\(x([0-9]+)\)$ ]]; then
    for ((i = 0; i < BASH_REMATCH[2]; i++)); do counts+=("${BASH_REMATCH[1]}"); done
  else
    counts+=("$group")
  fi
done
hostfile=$(mktemp "${TMPDIR:-/tmp}/ds-hostfile-$SLURM_JOB_ID-XXXX")
trap 'rm -f "$hostfile"' EXIT
i=0
for host in $(scontrol show hostnames "$SLURM_JOB_NODELIST"); do
  echo "$host slots=${counts[$i]}" >>"$hostfile"
  i=$((i + 1))
done

job=("$@")
((${#job[@]})) || job=(train --config configs/ds_config.json --steps 200)
# Not exec: the EXIT trap must still remove the hostfile; the script exits with ds-launch's status.
# shellcheck disable=SC2086  # DS_LAUNCH_FLAGS is a list of flags
"$bin/ds-launch" -H "$hostfile" --launcher slurm ${DS_LAUNCH_FLAGS:-} "${job[@]}"
