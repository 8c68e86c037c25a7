#!/usr/bin/env bash
# System services for the distributed-grading tests (docs/instructors.md "Grading a big class"):
#
#   .ci/grading_services.sh install           apt-get install postgresql, slurm-wlm and munge where missing, and add
#                                             the system user tdtest that a grading test runs as (root only; without
#                                             root it says what is missing and exits 0: those tests then fail or skip
#                                             with that reason)
#   .ci/grading_services.sh slurm-start DIR   a one-node Slurm in DIR: munged, slurmctld and slurmd on this machine,
#                                             with a private slurm.conf (DIR/slurm.conf: export SLURM_CONF=DIR/slurm.conf)
#   .ci/grading_services.sh slurm-stop DIR    stop them (and cancel every job of that Slurm)
#
# PostgreSQL needs no service: the tests start a private instance with initdb and pg_ctl (course_tools/grading_cluster.py).
set -euo pipefail

missing() {
    local out=()
    command -v pg_ctl >/dev/null 2>&1 || compgen -G "/usr/lib/postgresql/*/bin/pg_ctl" >/dev/null || out+=(postgresql)
    command -v slurmctld >/dev/null 2>&1 || [ -x /usr/sbin/slurmctld ] || out+=(slurm-wlm)
    command -v munged >/dev/null 2>&1 || [ -x /usr/sbin/munged ] || out+=(munge)
    echo "${out[@]:-}"
}

# The ordinary user that tests/test_grading_dropin.py grades as (the user-namespace route, without root).
test_user() {
    id tdtest >/dev/null 2>&1 && return 0
    if [ "$(id -u)" != 0 ]; then
        echo "grading services: not root, not adding the test user tdtest (the ordinary-user grading test skips)" >&2
        return 0
    fi
    useradd --system --no-create-home --shell /usr/sbin/nologin tdtest
}

install() {
    local need
    test_user
    need=$(missing)
    [ -z "$need" ] && return 0
    if [ "$(id -u)" != 0 ]; then
        echo "grading services: not root, not installing: $need (the distributed-grading tests need them)" >&2
        return 0
    fi
    echo "grading services: apt-get install $need" >&2
    export DEBIAN_FRONTEND=noninteractive
    # shellcheck disable=SC2086
    apt-get install -y -q $need >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q $need >/dev/null; }
    # The packages start their own services on some systems: the tests start private ones.
    service postgresql stop >/dev/null 2>&1 || true
}

slurm_start() {
    local dir=$1 host cpus mem
    mkdir -p "$dir/state" "$dir/spool" "$dir/munge"
    dir=$(cd "$dir" && pwd)
    chmod 755 "$dir"  # munged runs as the munge account
    host=$(hostname -s)
    cpus=$(nproc)
    mem=$(($(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 / 2))
    # munge: a key of this Slurm's own, a socket in DIR
    chown munge:munge "$dir/munge" 2>/dev/null || true
    chmod 700 "$dir/munge"
    dd if=/dev/urandom bs=1 count=1024 of="$dir/munge/munge.key" status=none
    chmod 400 "$dir/munge/munge.key"
    chown munge:munge "$dir/munge/munge.key" 2>/dev/null || true
    runuser -u munge -- /usr/sbin/munged --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
        --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/seed" -f
    cat >"$dir/slurm.conf" <<EOF
ClusterName=torchdoctor
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
SlurmctldPort=$((17000 + RANDOM % 1000))
SlurmdPort=$((18000 + RANDOM % 1000))
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
SlurmdTimeout=60
NodeName=$host CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=grading Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
    export SLURM_CONF=$dir/slurm.conf
    /usr/sbin/slurmctld -f "$dir/slurm.conf"
    /usr/sbin/slurmd -f "$dir/slurm.conf"
    for _ in $(seq 60); do
        if sinfo -h -o %t 2>/dev/null | grep -qE '^(idle|mix|alloc)'; then
            echo "slurm: up ($(sinfo -h -o '%P %D %t %c'))"
            return 0
        fi
        sleep 1
    done
    echo "slurm: the node did not come up; logs in $dir" >&2
    tail -n 20 "$dir/slurmctld.log" "$dir/slurmd.log" >&2 || true
    return 1
}

slurm_stop() {
    local dir=$1
    dir=$(cd "$dir" && pwd)
    export SLURM_CONF=$dir/slurm.conf
    scancel --full --quiet -u "$(id -un)" 2>/dev/null || true
    for pidfile in "$dir/slurmd.pid" "$dir/slurmctld.pid" "$dir/munge/munged.pid"; do
        if [ -f "$pidfile" ]; then
            kill "$(cat "$pidfile")" 2>/dev/null || true
        fi
    done
    for pidfile in "$dir/slurmd.pid" "$dir/slurmctld.pid" "$dir/munge/munged.pid"; do
        for _ in $(seq 50); do
            [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null || break
            sleep 0.2
        done
        [ -f "$pidfile" ] && kill -9 "$(cat "$pidfile")" 2>/dev/null || true
    done
    return 0
}

case "${1:-}" in
    install) install ;;
    slurm-start) slurm_start "${2:?DIR}" ;;
    slurm-stop) slurm_stop "${2:?DIR}" ;;
    *) echo "usage: $0 install | slurm-start DIR | slurm-stop DIR" >&2; exit 2 ;;
esac
