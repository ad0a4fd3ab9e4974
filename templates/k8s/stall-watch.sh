#!/bin/sh
# kubectl-tao stall watch (--stall-timeout, docs/progress.md). POSIX sh.
#
# Run as a script of its own (the single-pod job's command):
#   sh -c "<this script>" stall-watch PROGRAM [ARG...]
# Prepended to a rank entrypoint (indexed-rank-entrypoint.sh, gang-restart-entrypoint.sh, tier-c-run.sh), it only
# defines stall_watch, which the entrypoint runs its program with.
#
# stall_watch PROGRAM [ARG...] never returns. It runs PROGRAM in a session of its own (setsid, where the image has
# it), its stdout and stderr copied through unchanged (tee), and exits with PROGRAM's exit code (128+N for signal
# N). When neither that output nor any status.json under TAO_RESULTS_ROOT (4 levels deep) grows for
# TAO_STALL_TIMEOUT seconds, it prints one line naming the stall (how long, the last epoch status.json recorded,
# the last output line), sends TERM to the program's process group, KILL TAO_STALL_GRACE_SECONDS later, and exits
# with the stalled code of TAO_EXIT_CODES (the pod's table of exit codes, one row a line "NUMBER NAME DECISION
# REASON", lib/kubectl_tao/restarts/table.py). TERM, INT or HUP sent to it go to the program's group the same way.
# Environment: TAO_STALL_TIMEOUT (whole seconds; unset or 0: PROGRAM runs unwatched), TAO_EXIT_CODES (when it
# runs watched), TAO_STALL_GRACE_SECONDS
# (default 30), TAO_STALL_POLL_SECONDS (default a tenth of the timeout, 1 to 10), TAO_RESULTS_ROOT, TMPDIR.

# sw_whole VALUE: a whole number without leading zeros, at most 9 digits (safe in any shell's arithmetic).
sw_whole() {
    case "$1" in '' | *[!0-9]* | 0?*) return 1 ;; esac
    [ "${#1}" -le 9 ]
}

sw_now() { date +%s; }

# sw_duration SECONDS: Go's spelling (1h2m3s, 5m0s, 20s).
sw_duration() {
    if [ "$1" -ge 3600 ]; then
        echo "$(($1 / 3600))h$(($1 % 3600 / 60))m$(($1 % 60))s"
    elif [ "$1" -ge 60 ]; then
        echo "$(($1 / 60))m$(($1 % 60))s"
    else
        echo "$1s"
    fi
}

# sw_signal SIGNAL: to the program's process group (its session), else to the program alone.
sw_signal() {
    if [ "$sw_group" = 1 ]; then
        kill -s "$1" -- "-$sw_pid" 2>/dev/null || kill -s "$1" "$sw_pid" 2>/dev/null || true
    else
        kill -s "$1" "$sw_pid" 2>/dev/null || true
    fi
}

# sw_status_files: the status.json files under the results root, each with its size (empty without a root).
sw_status_files() {
    [ -n "$sw_root" ] && [ -d "$sw_root" ] || return 0
    find "$sw_root" -maxdepth 4 -name status.json -type f -exec wc -c {} + 2>/dev/null || true
}

# sw_size FILE: its size in bytes, 0 when it cannot be read.
sw_size() {
    sw_bytes=$(wc -c <"$1" 2>/dev/null | tr -d ' \t') || sw_bytes=0
    sw_whole "$sw_bytes" || sw_bytes=0
    echo "$sw_bytes"
}

# sw_progress: the epoch the newest status.json last recorded (its keys as TAO writes them), or "none".
sw_progress() {
    sw_newest=
    if [ -n "$sw_root" ] && [ -d "$sw_root" ]; then
        sw_newest=$(find "$sw_root" -maxdepth 4 -name status.json -type f -exec ls -t {} + 2>/dev/null | sed -n 1p)
    fi
    if [ -z "$sw_newest" ]; then
        echo none
        return 0
    fi
    sw_line=$(tail -c 65536 "$sw_newest" 2>/dev/null | tr -d '\000' | grep -a '"epoch": *[0-9]' | tail -n 1)
    sw_fields=
    for sw_key in epoch max_epoch step max_step; do
        sw_value=$(printf '%s\n' "$sw_line" | sed -n "s/.*\"$sw_key\": *\\([0-9][0-9]*\\).*/\\1/p")
        [ -z "$sw_value" ] || sw_fields="$sw_fields $sw_key=$sw_value"
    done
    sw_where=${sw_newest#"$sw_root"/}
    if [ -n "$sw_fields" ]; then
        echo "${sw_fields# } ($sw_where)"
    else
        echo "no epoch yet ($sw_where)"
    fi
}

# sw_last_line: the last non-blank line the program printed (a carriage return ends a line), one line, cut.
sw_last_line() {
    sw_text=$(cat "$sw_dir/earlier" "$sw_dir/seen" 2>/dev/null | tail -c 4096 | tr '\r' '\n' |
        tr -d '\000-\010\013-\037\177' | grep -a -v '^[[:space:]]*$' | tail -n 1 | cut -c 1-300)
    echo "${sw_text:-none}"
}

# sw_nap SECONDS: a sleep this subshell can end: a plain sleep would outlive the subshell killed while it sleeps.
sw_nap() {
    sleep "$1" >/dev/null 2>&1 &
    sw_napper=$!
    wait "$sw_napper" 2>/dev/null || true
    sw_napper=
}

# sw_nap_ends: the subshell's TERM trap: its nap ends with it.
sw_nap_ends() {
    trap '[ -z "${sw_napper:-}" ] || kill "$sw_napper" 2>/dev/null; exit 0' TERM
}

# sw_watch: the loop; runs in a subshell of its own beside the program.
sw_watch() {
    sw_nap_ends
    sw_last=$(sw_now)
    sw_seen=0
    sw_files=$(sw_status_files)
    while kill -0 "$sw_pid" 2>/dev/null; do
        sw_nap "$sw_poll"
        sw_at=$(sw_now)
        sw_bytes=$(sw_size "$sw_dir/seen")
        sw_now_files=$(sw_status_files)
        if [ "$sw_bytes" != "$sw_seen" ] || [ "$sw_now_files" != "$sw_files" ]; then
            sw_last=$sw_at
        elif [ $((sw_at - sw_last)) -ge "$sw_timeout" ]; then
            kill -0 "$sw_pid" 2>/dev/null || return 0
            : >"$sw_dir/stalled"
            echo "kubectl-tao: stalled: no output and no status.json growth for $(sw_duration $((sw_at - sw_last)))" \
                "(--stall-timeout $(sw_duration "$sw_timeout")); last progress: $(sw_progress);" \
                "last output: $(sw_last_line); stopping the program (TERM, then KILL after ${sw_grace}s)" >&2
            sw_signal TERM
            sw_until=$((sw_at + sw_grace))
            while kill -0 "$sw_pid" 2>/dev/null && [ "$(sw_now)" -lt "$sw_until" ]; do
                sw_nap 1
            done
            sw_signal KILL
            return 0
        fi
        sw_seen=$sw_bytes
        sw_files=$sw_now_files
        # the copy of the output stays small: its tail is kept, the rest dropped (tee appends: it writes on at 0)
        if [ "$sw_bytes" -gt 1048576 ]; then
            tail -c 4096 "$sw_dir/seen" >"$sw_dir/earlier" 2>/dev/null || true
            : >"$sw_dir/seen"
            sw_seen=0
        fi
    done
}

# sw_on_signal SIGNAL: pass it to the program's group; KILL follows after the grace period.
sw_on_signal() {
    sw_signal "$1"
    if [ -z "$sw_killer" ]; then
        (
            sw_nap_ends
            sw_nap "$sw_grace"
            sw_signal KILL
        ) </dev/null >/dev/null 2>&1 &
        sw_killer=$!
    fi
}

stall_watch() {
    sw_timeout=${TAO_STALL_TIMEOUT:-0}
    sw_grace=${TAO_STALL_GRACE_SECONDS:-30}
    if ! sw_whole "$sw_timeout" || ! sw_whole "$sw_grace"; then
        echo "kubectl-tao: TAO_STALL_TIMEOUT and TAO_STALL_GRACE_SECONDS must be whole numbers of seconds" >&2
        exit 2
    fi
    if [ "$sw_timeout" = 0 ]; then
        exec "$@"
    fi
    sw_stalled=$(printf '%s\n' "${TAO_EXIT_CODES:-}" | while read -r sw_number sw_row; do
        case "$sw_row" in "stalled "*) printf '%s\n' "$sw_number" ;; esac
    done)
    if ! sw_whole "$sw_stalled"; then
        echo "kubectl-tao: TAO_EXIT_CODES has no exit code named stalled (one row a line: NUMBER NAME DECISION" \
            "REASON)" >&2
        exit 2
    fi
    sw_poll=${TAO_STALL_POLL_SECONDS:-$((sw_timeout / 10))}
    if ! sw_whole "$sw_poll"; then
        echo "kubectl-tao: TAO_STALL_POLL_SECONDS must be a whole number of seconds" >&2
        exit 2
    fi
    [ "$sw_poll" -ge 1 ] || sw_poll=1
    [ "$sw_poll" -le 10 ] || sw_poll=10
    sw_root=${TAO_RESULTS_ROOT:-}
    sw_root=${sw_root%/}
    sw_killer=
    if ! sw_dir=$(mktemp -d "${TMPDIR:-/tmp}/kubectl-tao-stall.XXXXXX" 2>/dev/null) ||
        ! mkfifo "$sw_dir/out" "$sw_dir/err" 2>/dev/null; then
        echo "kubectl-tao: the stall watch cannot make its pipes in ${TMPDIR:-/tmp}; the program runs unwatched" >&2
        exec "$@"
    fi
    : >"$sw_dir/seen"
    # The copies ignore TERM: what the program prints last still reaches the log.
    (
        trap '' TERM INT HUP
        exec tee -a "$sw_dir/seen"
    ) <"$sw_dir/out" &
    sw_tee_out=$!
    (
        trap '' TERM INT HUP
        exec tee -a "$sw_dir/seen" >&2
    ) <"$sw_dir/err" &
    sw_tee_err=$!
    sw_group=0
    if command -v setsid >/dev/null 2>&1; then
        # a background child of a shell without job control is no group leader: setsid starts no new process
        setsid "$@" >"$sw_dir/out" 2>"$sw_dir/err" &
        sw_group=1
    else
        "$@" >"$sw_dir/out" 2>"$sw_dir/err" &
    fi
    sw_pid=$!
    trap 'sw_on_signal TERM' TERM
    trap 'sw_on_signal INT' INT
    trap 'sw_on_signal HUP' HUP
    sw_watch &
    sw_watcher=$!

    sw_rc=0
    wait "$sw_pid" 2>/dev/null || sw_rc=$?
    while kill -0 "$sw_pid" 2>/dev/null; do
        # wait returned for a trapped signal: wait again for the program's own status
        sw_rc=0
        wait "$sw_pid" 2>/dev/null || sw_rc=$?
    done
    if [ -f "$sw_dir/stalled" ]; then
        wait "$sw_watcher" 2>/dev/null || true
    else
        kill "$sw_watcher" 2>/dev/null || true
    fi
    # the copies end when the last writer closes its pipe; a process the program left behind may hold it: 5 s
    (
        sw_nap_ends
        sw_nap 5
        kill -s KILL "$sw_tee_out" "$sw_tee_err" 2>/dev/null || true
    ) </dev/null >/dev/null 2>&1 &
    sw_reaper=$!
    wait "$sw_tee_out" "$sw_tee_err" 2>/dev/null || true
    kill "$sw_reaper" 2>/dev/null || true
    [ -z "$sw_killer" ] || kill "$sw_killer" 2>/dev/null || true
    if [ -f "$sw_dir/stalled" ]; then
        sw_rc=$sw_stalled
    fi
    rm -rf "$sw_dir"
    exit "$sw_rc"
}

if [ "$0" = stall-watch ]; then
    stall_watch "$@"
fi
