#!/usr/bin/env bash
# Debian's SLURM (controller, node daemon, client commands) for the tests' one-node cluster (tests/slurm_cluster.py):
# 3.5 MB, ~6 s. No munge, systemd or database: the tests' slurm.conf uses auth/none and no accounting.
set -euo pipefail
if command -v slurmctld >/dev/null 2>&1 && command -v slurmd >/dev/null 2>&1 && command -v sbatch >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then echo "run as root to apt-get install slurmctld slurmd slurm-client"; exit 1; fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq slurmctld slurmd slurm-client >/dev/null
