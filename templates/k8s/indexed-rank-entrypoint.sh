#!/bin/sh
# kubectl-tao entrypoint of one rank of a multi-node (Indexed Job) run. POSIX sh.
#
# Called as: sh -c "<this script>" kubectl-tao BARRIER LAUNCHER ARG...
#   BARRIER   the text of rendezvous-barrier.sh, run when RENDEZVOUS_TIMEOUT is not 0
#   LAUNCHER  tao:      ARG is the user's command, run with sh -c
#             torchrun: ARG... is the training script and its arguments, passed to torchrun
# The rendezvous variables (NODE_RANK, NNODES, NPROC_PER_NODE, MASTER_ADDR, MASTER_PORT, ...) come
# from the pod's environment; nothing here is built from user text.
# With --stall-timeout, stall-watch.sh is prepended to this script: its stall_watch runs the program.
set -eu

barrier=$1
launcher=$2
shift 2

# HOSTNAME (the pod name) is set in the environment of every Kubernetes container.
# shellcheck disable=SC3028
echo "kubectl-tao: rank ${NODE_RANK:?NODE_RANK is not set} of ${NNODES:?NNODES is not set} on node ${NODE_NAME:-unknown} (pod ${HOSTNAME:-unknown}); master ${MASTER_ADDR:?}:${MASTER_PORT:?}"

if [ "${RENDEZVOUS_TIMEOUT:-0}" != "0" ]; then
    sh -c "$barrier" rendezvous-barrier || exit $?
fi

# watched: the program, through stall_watch (when stall-watch.sh was prepended); else exec'd as it is
watched() {
    if command -v stall_watch >/dev/null 2>&1; then
        stall_watch "$@"
    fi
    exec "$@"
}

case "$launcher" in
    tao)
        watched sh -c "$1" tao
        ;;
    torchrun)
        # PyTorch's flight recorder writes its dumps under this prefix (render.py sets it): make its directory.
        if [ -n "${TORCH_FR_DUMP_TEMP_FILE:-}" ]; then
            mkdir -p "$(dirname "$TORCH_FR_DUMP_TEMP_FILE")" 2>/dev/null || true
        fi
        watched torchrun --nnodes="$NNODES" --nproc_per_node="${NPROC_PER_NODE:?}" --node_rank="$NODE_RANK" \
            --master_addr="$MASTER_ADDR" --master_port="$MASTER_PORT" "$@"
        ;;
    *)
        echo "kubectl-tao: unknown launcher '$launcher' (expected tao or torchrun)" >&2
        exit 2
        ;;
esac
