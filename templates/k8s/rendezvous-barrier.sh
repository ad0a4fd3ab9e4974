#!/bin/sh
# kubectl-tao rendezvous barrier for multi-node (Indexed Job) ranks. POSIX sh; busybox is enough.
#
# Every rank waits until the DNS name of every rank (<job>-<i>.<subdomain>) resolves; every rank but
# 0 then also waits until MASTER_ADDR:MASTER_PORT accepts a TCP connection. Rank 0 never waits for
# the port: it is the rank that will listen on it once the training command starts.
# On timeout it prints one line naming the rank and what it could not reach, and exits with the
# rendezvous-timeout code of TAO_EXIT_CODES (the pod's table of exit codes, one row a line "NUMBER NAME
# DECISION REASON", lib/kubectl_tao/restarts/table.py), the code the Job's podFailurePolicy turns into an
# immediate FailJob.
#
# Environment: NODE_RANK, NNODES, TAO_K8S_JOB_NAME, MASTER_ADDR, MASTER_PORT, TAO_EXIT_CODES (required);
# TAO_K8S_SUBDOMAIN (default: the job name), RENDEZVOUS_TIMEOUT (seconds, default 300, 0 = skip),
# RENDEZVOUS_POLL_SECONDS (default 2), RENDEZVOUS_RESOLV_CONF (default /etc/resolv.conf).
set -eu

rank=${NODE_RANK:?NODE_RANK is not set}
nodes=${NNODES:?NNODES is not set}
job=${TAO_K8S_JOB_NAME:?TAO_K8S_JOB_NAME is not set}
subdomain=${TAO_K8S_SUBDOMAIN:-$job}
master_addr=${MASTER_ADDR:?MASTER_ADDR is not set}
master_port=${MASTER_PORT:?MASTER_PORT is not set}
timeout=${RENDEZVOUS_TIMEOUT:-300}
poll=${RENDEZVOUS_POLL_SECONDS:-2}

for pair in "NODE_RANK=$rank" "NNODES=$nodes" "MASTER_PORT=$master_port" "RENDEZVOUS_TIMEOUT=$timeout"; do
    case "${pair#*=}" in
        '' | *[!0-9]*)
            echo "kubectl-tao: rendezvous: ${pair%%=*} must be a whole number, got '${pair#*=}'" >&2
            exit 2
            ;;
    esac
done

[ "$timeout" -gt 0 ] || exit 0

exit_timeout=$(printf '%s\n' "${TAO_EXIT_CODES:-}" | while read -r number name rest; do
    [ "$name" != rendezvous-timeout ] || printf '%s\n' "$number"
done)
case "$exit_timeout" in
    '' | *[!0-9]*)
        echo "kubectl-tao: rendezvous: TAO_EXIT_CODES has no exit code named rendezvous-timeout (one row a line:" \
            "NUMBER NAME DECISION REASON)" >&2
        exit 2
        ;;
esac

have() { command -v "$1" >/dev/null 2>&1; }
# mentions TEXT WORD: true when TEXT contains WORD (a test on captured output: no pipe to a reader that quits early)
mentions() { case $1 in *"$2"*) return 0 ;; esac; return 1; }

resolver=none
if have getent; then
    resolver=getent
elif have nslookup; then
    resolver=nslookup
elif have python3; then
    resolver=python3
else
    echo "kubectl-tao: rendezvous: no getent, nslookup or python3 in this image; not waiting for DNS" >&2
fi

prober=none
if [ "$rank" -eq 0 ]; then
    : # rank 0 is the one that will listen
elif have nc && mentions "$(nc -h 2>&1)" '-z'; then
    prober=nc
elif have nc && mentions "$(nc -h 2>&1)" '-e PROG'; then
    prober=nc-exec # busybox's nc has no -z; `-e true` closes the connection as soon as it is made
elif have python3; then
    prober=python3
elif have bash; then
    prober=bash
else
    echo "kubectl-tao: rendezvous: no nc -z, python3 or bash in this image; not waiting for rank 0's port" >&2
fi

# busybox's nslookup ignores the resolv.conf search list (`<job>-0.<job>` alone is NXDOMAIN), so it
# also tries the name under each search domain, as getaddrinfo would.
search_domains=
if [ -r "${RENDEZVOUS_RESOLV_CONF:-/etc/resolv.conf}" ]; then
    while read -r key rest; do
        [ "$key" != search ] || search_domains=$rest
    done <"${RENDEZVOUS_RESOLV_CONF:-/etc/resolv.conf}"
fi

nslookup_search() {
    nslookup "$1" >/dev/null 2>&1 && return 0
    for domain in $search_domains; do
        nslookup "$1.$domain" >/dev/null 2>&1 && return 0
    done
    return 1
}

resolves() {
    case "$resolver" in
        getent) getent hosts "$1" >/dev/null 2>&1 ;;
        nslookup) nslookup_search "$1" ;;
        python3) python3 -c 'import socket, sys; socket.getaddrinfo(sys.argv[1], None)' "$1" >/dev/null 2>&1 ;;
        *) return 0 ;;
    esac
}

accepts() {
    case "$prober" in
        nc) nc -z -w 2 "$1" "$2" >/dev/null 2>&1 ;;
        nc-exec) nc -w 2 "$1" "$2" -e true </dev/null >/dev/null 2>&1 ;;
        python3)
            python3 -c 'import socket, sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), 2).close()' \
                "$1" "$2" >/dev/null 2>&1
            ;;
        bash) bash -c 'exec 3<>"/dev/tcp/$1/$2"' rendezvous-probe "$1" "$2" >/dev/null 2>&1 ;;
        *) return 0 ;;
    esac
}

now() { date +%s; }

start=$(now)
deadline=$((start + timeout))

give_up() {
    echo "kubectl-tao: rendezvous timeout: rank $rank could not $1 after ${timeout}s" >&2
    exit "$exit_timeout"
}

echo "kubectl-tao: rank $rank waiting for $nodes ranks of $job (timeout ${timeout}s)"

index=0
while [ "$index" -lt "$nodes" ]; do
    host="$job-$index.$subdomain"
    until resolves "$host"; do
        [ "$(now)" -lt "$deadline" ] || give_up "resolve $host"
        sleep "$poll"
    done
    index=$((index + 1))
done

if [ "$rank" -ne 0 ]; then
    until accepts "$master_addr" "$master_port"; do
        [ "$(now)" -lt "$deadline" ] || give_up "reach rank 0 at $master_addr:$master_port"
        sleep "$poll"
    done
fi

echo "kubectl-tao: rank $rank passed the rendezvous barrier after $(($(now) - start))s"
