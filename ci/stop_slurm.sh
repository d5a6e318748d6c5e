#!/usr/bin/env bash
# Stop the daemons ci/start_slurm.sh started, each by the PID in its pidfile (never by name).
for pidfile in /run/slurmd.pid /run/slurmctld.pid /run/slurmdbd.pid /run/mysqld/mysqld.pid /run/munge/munged.pid; do
  [ -s "$pidfile" ] || continue
  pid=$(cat "$pidfile")
  kill -0 "$pid" 2>/dev/null || continue
  kill "$pid"
  for _ in $(seq 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
  echo "stopped $(basename "$pidfile" .pid) ($pid)"
done
