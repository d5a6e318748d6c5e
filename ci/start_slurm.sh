#!/usr/bin/env bash
# Start a single-node SLURM on this machine for the test suite: munge, MariaDB + slurmdbd (accounting:
# submitit reads job states with sacct), slurmctld and slurmd, without systemd. Run as root.
#   SLURM_FAKE_GPUS=N   gres gpu:N backed by empty files (default 2); jobs get CUDA_VISIBLE_DEVICES
# Idempotent: daemons it started before are stopped first (by pidfile); prints the node when ready.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bash "$here/stop_slurm.sh" >/dev/null 2>&1 || true
note() { echo "[slurm $(date +%T)] $*"; }

host=$(hostname -s)
ncpu=$(nproc)
mem_mb=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 2048 ))
ngpu=${SLURM_FAKE_GPUS:-2}
mkdir -p /run/munge /run/mysqld /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /etc/slurm

start_munge() {
  chown munge:munge /run/munge
  if [ ! -s /etc/munge/munge.key ]; then
    head -c 1024 /dev/urandom > /etc/munge/munge.key
    chown munge:munge /etc/munge/munge.key && chmod 0400 /etc/munge/munge.key
  fi
  su -s /bin/sh munge -c /usr/sbin/munged
  for _ in $(seq 40); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && return 0; sleep 0.25; done
  echo "munged did not answer"; return 1
}

start_accounting() {  # MariaDB for slurmdbd, then slurmdbd itself
  chown mysql:mysql /run/mysqld
  [ -d /var/lib/mysql/mysql ] || mariadb-install-db --user=mysql --datadir=/var/lib/mysql >/dev/null
  /usr/sbin/mariadbd --user=mysql --datadir=/var/lib/mysql --socket=/run/mysqld/mysqld.sock \
    --pid-file=/run/mysqld/mysqld.pid --bind-address=127.0.0.1 >/var/log/slurm/mariadb.log 2>&1 &
  for _ in $(seq 120); do mariadb-admin --socket=/run/mysqld/mysqld.sock ping >/dev/null 2>&1 && break; sleep 0.5; done
  mariadb --socket=/run/mysqld/mysqld.sock -e "CREATE DATABASE IF NOT EXISTS slurm_acct_db;
    CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'slurm';
    GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost'; FLUSH PRIVILEGES;"
  cat > /etc/slurm/slurmdbd.conf <<CONF
AuthType=auth/munge
DbdHost=localhost
SlurmUser=root
LogFile=/var/log/slurm/slurmdbd.log
PidFile=/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StoragePass=slurm
StorageLoc=slurm_acct_db
CONF
  chmod 600 /etc/slurm/slurmdbd.conf
  /usr/sbin/slurmdbd
  for _ in $(seq 120); do sacctmgr -n list cluster >/dev/null 2>&1 && break; sleep 0.25; done
  sacctmgr -i add cluster local >/dev/null 2>&1 || true
}

write_slurm_conf() {
  local gres_node="" gres_types=""
  rm -f /etc/slurm/gres.conf
  if [ "$ngpu" -gt 0 ]; then
    for g in $(seq 0 $((ngpu - 1))); do touch "/var/spool/slurmd/fakegpu$g"; done
    echo "NodeName=$host Name=gpu File=/var/spool/slurmd/fakegpu[0-$((ngpu - 1))]" > /etc/slurm/gres.conf
    gres_node="Gres=gpu:$ngpu"; gres_types="GresTypes=gpu"
  fi
  cat > /etc/slurm/slurm.conf <<CONF
ClusterName=local
SlurmctldHost=$host
SlurmUser=root
AuthType=auth/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
JobAcctGatherType=jobacct_gather/linux
$gres_types
MinJobAge=300
KillWait=5
NodeName=$host CPUs=$ncpu RealMemory=$mem_mb $gres_node State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
}

start_munge;      note "munge up"
start_accounting; note "slurmdbd up"
write_slurm_conf
/usr/sbin/slurmctld -c   # -c: clean state, no jobs left from an earlier start
/usr/sbin/slurmd
for _ in $(seq 120); do
  if sinfo -h -o '%t' 2>/dev/null | grep -qE '^(idle|mix|alloc)$'; then
    note "slurm up"; sinfo -o '%P %a %D %t %N %G'; exit 0
  fi
  sleep 0.5
done
echo "SLURM did not come up; last log lines:"
tail -n 20 /var/log/slurm/slurmctld.log /var/log/slurm/slurmd.log || true
exit 1
