#!/bin/sh
# kubectl-tao entrypoint of one rank of a multi-node run with --max-restarts N (docs/restarts.md). POSIX sh.
#
# Called as: sh -c "<this script>" kubectl-tao BARRIER LAUNCHER ARG...   (as indexed-rank-entrypoint.sh)
#
# The ranks of one job share a directory on the job's volume (TAO_GANG_DIR). Attempt K ends when the first rank
# whose program fails claims it (mkdir claim-K, atomic) and records how it ended (end-K, renamed into place
# whole). Every other rank sees the claim, stops its program (SIGTERM, then SIGKILL after TAO_PEER_STOP_SECONDS)
# and follows the recorded decision:
#   restart    exit with the table's restart code: the container restart rule RestartAllContainers restarts
#              this pod's containers in place;
#              attempt K+1 starts from the top (TAO_ATTEMPT=K+1), counted against TAO_MAX_RESTARTS;
#   disrupted  the claiming rank got SIGTERM (eviction, preemption, drain): the others restart and the restart
#              is not counted; the stopped pod exits as SIGTERM ends a process and the Job recreates it
#              (DisruptionTarget);
#   fail       a program error, the barrier's timeout twice in a row, or no restarts left: every rank exits with a
#              code the restart rule does not match, and the Job fails.
# The exit codes and what each means come from TAO_EXIT_CODES, the table the render step puts in the pod (one
# row a line, "NUMBER NAME DECISION REASON", lib/kubectl_tao/restarts/table.py): this script writes no number of
# its own. DECISION final: the job fails (a program that exits with a code the scripts reserve); once: restart,
# final when the attempt before ended with the same code; infra: restart, REASON is the cause (ERR_INFRA);
# retry: restart unless the output shows an ERR_PROGRAM sign. A code the table does not hold is a program
# error.
# What the failed program printed decides over its exit code: the first row of TAO_RETRY_SIGNS (one a line,
# "CLASS TIER CAUSE ERE", diagnosis/causes.py's table in its order) whose ERE finds a line of the last 400 lines of
# the attempt's output names the cause; ERR_PROGRAM is final (a device-side assert, though SIGABRT), ERR_INFRA
# restarts (an NCCL system error, though exit 1); the cause is the reason recorded. The catch-all row (TIER
# generic: an exception no other row names) reads only the lines no other row finds. A rank that shows only a
# peer's loss (TIER follower) waits twice TAO_SETTLE_SECONDS for the peer's claim.
# Before a new attempt runs, every rank waits until all NNODES ranks have entered it (files attempt-K/rank-R),
# then passes the rendezvous barrier. Each attempt's end is one line of the container's termination message.
#
# Environment: NODE_RANK, NNODES, TAO_GANG_DIR, TAO_MAX_RESTARTS, TAO_EXIT_CODES (required), TAO_RETRY_SIGNS;
# RENDEZVOUS_TIMEOUT (also bounds the wait for the other ranks; 0 = 300 for that wait), RENDEZVOUS_POLL_SECONDS,
# TAO_PEER_STOP_SECONDS (default 20), TAO_SETTLE_SECONDS (default 10: how long a rank whose failure is final
# waits for another rank's claim first), TAO_TERMINATION_LOG (default /dev/termination-log).
set -eu

barrier=$1
launcher=$2
shift 2

say() { echo "kubectl-tao: $*"; }
now() { date +%s; }

# decimal TEXT [DIGITS]: TEXT as a decimal number without leading zeros, or nothing when TEXT is not one of at
# most DIGITS (default 9) digits. A number a program printed goes through it before any arithmetic: dash refuses
# `$((128 + 08))` ("Illegal number") and bash reads 08 as octal; a huge number overflows both.
decimal() {
    case "$1" in '' | *[!0-9]*) return 0 ;; esac
    [ "${#1}" -le 32 ] || return 0
    n=$1
    while [ "${#n}" -gt 1 ] && [ "${n#0}" != "$n" ]; do n=${n#0}; done
    [ "${#n}" -le "${2:-9}" ] || return 0
    printf '%s\n' "$n"
}

# whole NAME VALUE: VALUE (an environment setting) as a decimal number, else the script stops with exit 2
whole() {
    n=$(decimal "$2")
    if [ -z "$n" ]; then
        say "$1 must be a whole number, got '$2'" >&2
        exit 2
    fi
    printf '%s\n' "$n"
}

rank=$(whole NODE_RANK "${NODE_RANK:?NODE_RANK is not set}")
nodes=$(whole NNODES "${NNODES:?NNODES is not set}")
gang=${TAO_GANG_DIR:?TAO_GANG_DIR is not set}
max=$(whole TAO_MAX_RESTARTS "${TAO_MAX_RESTARTS:?TAO_MAX_RESTARTS is not set}")
codes=${TAO_EXIT_CODES:-}
if [ -z "$codes" ]; then
    say "TAO_EXIT_CODES is not set (the table of exit codes the render step puts in the pod)" >&2
    exit 2
fi
signs=${TAO_RETRY_SIGNS:-}
tail_lines=400
poll=${RENDEZVOUS_POLL_SECONDS:-2}
wait_all=$(whole RENDEZVOUS_TIMEOUT "${RENDEZVOUS_TIMEOUT:-300}")
[ "$wait_all" != 0 ] || wait_all=300
peer_stop=${TAO_PEER_STOP_SECONDS:-20}
settle=$(whole TAO_SETTLE_SECONDS "${TAO_SETTLE_SECONDS:-10}")
termination_log=${TAO_TERMINATION_LOG:-/dev/termination-log}

# exit_row CODE: "NAME DECISION REASON" of the exit CODE in TAO_EXIT_CODES, or nothing when the table lacks it.
exit_row() {
    printf '%s\n' "$codes" | while read -r number rest; do
        [ "$number" != "$1" ] || printf '%s\n' "$rest"
    done
}

# exit_code NAME: the number TAO_EXIT_CODES gives the exit code NAME; the script stops with exit 2 without one.
exit_code() {
    n=$(printf '%s\n' "$codes" | while read -r number row_name rest; do
        [ "$row_name" != "$1" ] || printf '%s\n' "$number"
    done)
    n=$(decimal "$n" 3)
    if [ -z "$n" ]; then
        say "TAO_EXIT_CODES has no exit code named $1 (one row a line: NUMBER NAME DECISION REASON)" >&2
        exit 2
    fi
    printf '%s\n' "$n"
}

# decision_of CODE: the table's DECISION of the exit CODE (final, once, infra, retry), or nothing.
decision_of() {
    d=$(exit_row "$1")
    d=${d#* }
    printf '%s\n' "${d%% *}"
}

# reason_of CODE: the table's REASON of the exit CODE (a signal's name, ...), else "exit CODE".
reason_of() {
    r=$(exit_row "$1")
    case "$r" in
        *' '*' '*) printf '%s\n' "${r#* * }" ;;
        *) printf 'exit %s\n' "$1" ;;
    esac
}

# retryable CODE: does the table restart the gang on the exit CODE (DECISION once, infra or retry)?
retryable() {
    case "$(decision_of "$1")" in once | infra | retry) return 0 ;; esac
    return 1
}

exit_restart=$(exit_code restart)
exit_sigterm=$(exit_code SIGTERM)

mkdir -p "$gang" || {
    say "cannot create the restart directory $gang on the job's volume" >&2
    exit 2
}

# The attempt: one more than the attempts that have ended; the restarts used: those that counted.
attempt=1
used=0
while [ -d "$gang/end-$attempt" ]; do
    [ ! -f "$gang/end-$attempt/counted" ] || used=$((used + 1))
    attempt=$((attempt + 1))
done
TAO_ATTEMPT=$attempt
export TAO_ATTEMPT
# How the earlier attempts ended, first in this attempt's log (`status` reads them from there).
k=1
while [ "$k" -lt "$attempt" ]; do
    cat "$gang/end-$k/line" 2>/dev/null || true
    k=$((k + 1))
done
say "rank $rank attempt $attempt (restarts used $used of $max)"

child=
watcher=
disrupted=0

# stop_program SIGNAL: the program and everything it started. As the container's PID 1, kill -1 reaches every
# other process of the container (a shell's children included); elsewhere (tests) the child only.
stop_program() {
    if [ "$$" = 1 ]; then
        kill "-$1" -1 2>/dev/null || true
    elif [ -n "$child" ]; then
        kill "-$1" "$child" 2>/dev/null || true
    fi
}

write_history() {
    k=1
    {
        while [ "$k" -le "$attempt" ]; do
            [ ! -f "$gang/end-$k/line" ] || cat "$gang/end-$k/line"
            k=$((k + 1))
        done
    } >"$termination_log" 2>/dev/null || true
}

# record DECISION COUNTED CODE REASON: this rank ended the attempt first; write its end, whole, then rename it.
record() {
    tmp="$gang/.end-$attempt.$rank.$$"
    rm -rf "$tmp"
    mkdir "$tmp"
    printf '%s\n' "$3" >"$tmp/exit"
    printf '%s\n' "$1" >"$tmp/decision"
    [ "$2" = 0 ] || : >"$tmp/counted"
    printf 'kubectl-tao attempt=%s rank=%s exit=%s decision=%s counted=%s reason=%s\n' \
        "$attempt" "$rank" "$3" "$1" "$2" "$4" >"$tmp/line"
    mv "$tmp" "$gang/end-$attempt"
}

# cause_of CODE: "CLASS TIER CAUSE" of the first row of TAO_RETRY_SIGNS whose ERE finds a line of the tail of
# this attempt's output (each line read as causes.py reads it), or nothing. Not for an exit code whose table row
# decides by itself (final, once) or a stopped pod; an infra row's REASON is the cause (the stall watch's: a
# restart, whatever the program printed before). Run in a subshell ($(...)): its locale stays.
cause_of() {
    [ "$1" != 0 ] || return 0
    case "$(decision_of "$1")" in
        final | once) return 0 ;;
        infra) echo "ERR_INFRA primary $(reason_of "$1")" && return 0 ;;
    esac
    log="$gang/attempt-$attempt/rank-$rank.log"
    [ "$disrupted" = 0 ] && [ -n "$signs" ] && [ -r "$log" ] || return 0
    # a directory of its own (mktemp): no name another process of the container could have made first
    work=$(mktemp -d "${TMPDIR:-/tmp}/kubectl-tao-tail.XXXXXX" 2>/dev/null) || return 0
    tail_file=$work/tail
    # Every tool in the C locale: a byte is a character, `.` and a negated bracket take any byte (an invalid one
    # too), [[:space:]] is ASCII's, as the signs' EREs are written for (core/ere.py). The lines as causes.py
    # matches them (diagnosis/causes.matched_lines): NUL bytes dropped (a regex stops at one), a trailing carriage
    # return dropped, the first 4096 bytes, colours (CSI sequences) removed, another carriage return a space.
    LC_ALL=C
    export LC_ALL
    cr=$(printf '\r')
    esc=$(printf '\033')
    tail -n "$tail_lines" "$log" 2>/dev/null | tr -d '\000' | sed "s/$cr\$//" | cut -b 1-4096 |
        sed "s|$esc\\[[0-?]*[ -/]*[@-~]||g" | tr "$cr" ' ' >"$tail_file" || true
    # The catch-all row (TIER generic) reads only the lines no other row finds, never torchrun's banner.
    grep -a -v ChildFailedError "$tail_file" >"$work/unnamed" 2>/dev/null || true
    printf '%s\n' "$signs" | while IFS= read -r row; do
        case "${row#* }" in "generic "*) continue ;; esac
        grep -a -v -E -e "${row#* * * }" "$work/unnamed" >"$work/next" 2>/dev/null || true
        mv "$work/next" "$work/unnamed"
    done
    printf '%s\n' "$signs" | while IFS= read -r row; do
        ere=${row#* * * }
        lines=$tail_file
        case "${row#* }" in "generic "*) lines=$work/unnamed ;; esac
        if [ -n "$ere" ] && grep -a -q -E -e "$ere" "$lines" 2>/dev/null; then
            printf '%s\n' "${row%" $ere"}"
            break
        fi
    done
    rm -rf "$work"
}

# decide CODE: the first rank to fail decides what the attempt's end means.
decide() {
    code=$1
    reason=$(reason_of "$code")
    previous=$(cat "$gang/end-$((attempt - 1))/exit" 2>/dev/null || echo none)
    if [ "$disrupted" = 1 ]; then
        record disrupted 0 "$code" "pod stopped (SIGTERM)"
    elif [ "$(decision_of "$code")" = once ] && [ "$previous" = "$code" ]; then
        record fail 0 "$code" "$reason twice"
    elif [ "$class" = ERR_PROGRAM ]; then
        record fail 0 "$code" "$name"
    elif [ "$class" = ERR_INFRA ]; then
        if [ "$used" -lt "$max" ]; then
            record restart 1 "$code" "$name"
        else
            record fail 0 "$code" "$name (no restarts left)"
        fi
    elif retryable "$code"; then
        if [ "$used" -lt "$max" ]; then
            record restart 1 "$code" "$reason"
        else
            record fail 0 "$code" "$reason (no restarts left)"
        fi
    else
        record fail 0 "$code" "program error"
    fi
}

# end_attempt CODE: end this attempt with this rank's exit CODE; never returns.
end_attempt() {
    code=$1
    [ -z "$watcher" ] || kill "$watcher" 2>/dev/null || true
    cause=
    # another rank ended this attempt already (its claim stopped this program): its decision stands
    [ -d "$gang/claim-$attempt" ] || cause=$(cause_of "$code")
    class=${cause%% *}
    name=${cause##* }
    [ -z "$cause" ] || say "rank $rank: its output shows $name ($class)"
    if [ "$disrupted" = 0 ] && ! retryable "$code"; then
        # A final failure may be the echo of a peer's crash (a collective that lost its peer): give the peer
        # time to claim the attempt first; longer when this rank shows only that it lost a peer.
        wait_claim=$settle
        case "$cause" in *" follower "*) wait_claim=$((settle * 2)) ;; esac
        deadline=$(($(now) + wait_claim))
        while [ ! -d "$gang/claim-$attempt" ] && [ "$(now)" -lt "$deadline" ]; do sleep 1; done
    fi
    if mkdir "$gang/claim-$attempt" 2>/dev/null; then
        decide "$code"
    else
        deadline=$(($(now) + 60))
        until [ -d "$gang/end-$attempt" ]; do
            if [ "$(now)" -ge "$deadline" ]; then
                say "rank $rank: attempt $attempt was claimed but its end was never recorded" >&2
                exit 1
            fi
            sleep 1
        done
    fi
    decision=$(cat "$gang/end-$attempt/decision")
    write_history
    say "$(sed 's/^kubectl-tao //' "$gang/end-$attempt/line")"
    if [ "$disrupted" = 1 ]; then
        exit "$exit_sigterm"
    fi
    case "$decision" in
        restart | disrupted)
            say "rank $rank restarts with the gang (attempt $((attempt + 1)))"
            exit "$exit_restart"
            ;;
    esac
    [ "$code" != "$exit_restart" ] && [ "$code" != 0 ] || code=1
    exit "$code"
}

# shellcheck disable=SC2329 # called by the trap below
on_term() {
    disrupted=1
    stop_program TERM
}
trap on_term TERM

# Every rank enters the attempt before any rank starts it.
mkdir -p "$gang/attempt-$attempt"
: >"$gang/attempt-$attempt/rank-$rank"
count_ranks() {
    set -- "$gang/attempt-$attempt"/rank-*
    echo "$#"
}
deadline=$(($(now) + wait_all))
while [ "$(count_ranks)" -lt "$nodes" ]; do
    [ "$disrupted" = 0 ] || end_attempt "$exit_sigterm"
    [ ! -d "$gang/claim-$attempt" ] || end_attempt "$exit_sigterm"
    if [ "$(now)" -ge "$deadline" ]; then
        say "rank $rank: only $(count_ranks) of $nodes ranks entered attempt $attempt after ${wait_all}s" >&2
        end_attempt "$(exit_code rendezvous-timeout)"
    fi
    sleep "$poll"
done

if [ "${RENDEZVOUS_TIMEOUT:-0}" != "0" ]; then
    rc=0
    sh -c "$barrier" rendezvous-barrier || rc=$?
    [ "$rc" = 0 ] || end_attempt "$rc"
fi

# The program's output goes to the container log and, through tee, to attempt-K/rank-R.log on the volume: the
# kubelet removes a restarted pod's containers, their logs with them.
out=/dev/stdout
teer=
# the pipe sits in a directory of its own (mktemp): no name another process could have made first
fifo_dir=$(mktemp -d "${TMPDIR:-/tmp}/kubectl-tao-output.XXXXXX" 2>/dev/null) || fifo_dir=
if [ -n "$fifo_dir" ] && ! mkfifo "$fifo_dir/output" 2>/dev/null; then
    rm -rf "$fifo_dir"
    fifo_dir=
fi
if [ -n "$fifo_dir" ]; then
    fifo=$fifo_dir/output
    (
        trap '' TERM
        exec tee -a "$gang/attempt-$attempt/rank-$rank.log"
    ) <"$fifo" &
    teer=$!
    out=$fifo
fi
# finish_tee: let tee copy the last lines (at most 5 s: a process the program left behind may hold the pipe).
finish_tee() {
    [ -n "$teer" ] || return 0
    n=0
    while kill -0 "$teer" 2>/dev/null && [ "$n" -lt 5 ]; do
        sleep 1
        n=$((n + 1))
    done
    kill -KILL "$teer" 2>/dev/null || true
    rm -rf "$fifo_dir"
}
# watched: the program, through stall_watch when stall-watch.sh was prepended (--stall-timeout: a stall exits with
# the table's stalled code, a restartable failure); else exec'd as it is.
watched() {
    if command -v stall_watch >/dev/null 2>&1; then
        stall_watch "$@"
    fi
    exec "$@"
}
case "$launcher" in
    tao)
        watched sh -c "$1" tao >"$out" 2>&1 &
        ;;
    torchrun)
        watched torchrun --nnodes="$NNODES" --nproc_per_node="${NPROC_PER_NODE:?}" --node_rank="$NODE_RANK" \
            --master_addr="$MASTER_ADDR" --master_port="$MASTER_PORT" "$@" >"$out" 2>&1 &
        ;;
    *)
        say "unknown launcher '$launcher' (expected tao or torchrun)" >&2
        exit 2
        ;;
esac
child=$!

# The watcher: when another rank claims this attempt, stop the program (it may hang in a collective).
(
    while kill -0 "$child" 2>/dev/null; do
        if [ -d "$gang/claim-$attempt" ]; then
            say "rank $rank: another rank ended attempt $attempt; stopping the program"
            stop_program TERM
            sleep "$peer_stop"
            stop_program KILL
            exit 0
        fi
        sleep 1
    done
) &
watcher=$!

rc=0
wait "$child" || rc=$?
while kill -0 "$child" 2>/dev/null; do
    # wait returned for a trapped signal: wait again for the program's own status
    rc=0
    wait "$child" || rc=$?
done
if [ "$rc" = 0 ] && [ "$disrupted" = 0 ]; then
    kill "$watcher" 2>/dev/null || true
    finish_tee
    exit 0
fi
finish_tee
[ "$rc" != 0 ] || rc=$exit_sigterm
if [ "$launcher" = torchrun ] && [ "$rc" = 1 ] && [ -r "$gang/attempt-$attempt/rank-$rank.log" ]; then
    # torchrun exits 1 whatever ended its worker; its failure summary says `exitcode  : -9 (pid: N)` for a signal
    sig=$(sed -n 's/^ *exitcode *: *-\([0-9][0-9]*\) .*/\1/p' "$gang/attempt-$attempt/rank-$rank.log" | sed -n 1p)
    sig=$(decimal "$sig" 2)
    if [ -n "$sig" ] && [ "$sig" -ge 1 ] && [ "$sig" -le 64 ]; then
        say "rank $rank: torchrun's worker died of signal $sig"
        rc=$((128 + sig))
    fi
fi
end_attempt "$rc"
