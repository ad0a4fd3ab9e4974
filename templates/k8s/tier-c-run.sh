#!/bin/sh
# kubectl-tao storage tier C, main container: run the user's command, then upload the results. POSIX sh.
#
# Called as: sh -c "<this script>" kubectl-tao COMMAND [EXCLUDE...]
#   COMMAND   the user's own command, run with sh -c (the only shell text that comes from the user)
#   EXCLUDE   extra `aws s3 cp --exclude` patterns; `.tao/*` is always excluded
# Uploads $TAO_RESULTS_ROOT/ to $TAO_UPLOAD_URI whatever the command's outcome, then exits with the
# command's exit code, or with the upload-failed code of TAO_EXIT_CODES (the pod's table of exit codes, one row
# a line "NUMBER NAME DECISION REASON", lib/kubectl_tao/restarts/table.py) when the command succeeded but the
# upload failed.
# The upload runs in this (the job's) image with the first S3 client found: `aws` on PATH (AWS CLI v1 or
# v2), Python's awscli module (`python3 -m awscli`: pip's AWS CLI v1 without its script on PATH), or the
# AWS CLI v2 bundle fetch-inputs left on the workspace (glibc images only).
set -u

command_text=$1
shift
results=${TAO_RESULTS_ROOT:?TAO_RESULTS_ROOT is not set}
destination=${TAO_UPLOAD_URI:?TAO_UPLOAD_URI is not set}
tools="${TAO_WORKSPACE:?TAO_WORKSPACE is not set}/.kubectl-tao"
exit_upload_failed=$(printf '%s\n' "${TAO_EXIT_CODES:-}" | while read -r number name rest; do
    [ "$name" != upload-failed ] || printf '%s\n' "$number"
done)
case "$exit_upload_failed" in
    '' | *[!0-9]*)
        echo "kubectl-tao: TAO_EXIT_CODES has no exit code named upload-failed (one row a line: NUMBER NAME" \
            "DECISION REASON)" >&2
        exit 2
        ;;
esac
mkdir -p "$results"

if [ -z "${AWS_ACCESS_KEY_ID:-}" ] && [ -n "${ACCESS_KEY:-}" ]; then export AWS_ACCESS_KEY_ID="$ACCESS_KEY"; fi
if [ -z "${AWS_SECRET_ACCESS_KEY:-}" ] && [ -n "${SECRET_KEY:-}" ]; then export AWS_SECRET_ACCESS_KEY="$SECRET_KEY"; fi
if [ -z "${AWS_ENDPOINT_URL:-}" ] && [ -n "${S3_ENDPOINT_URL:-}" ]; then export AWS_ENDPOINT_URL="$S3_ENDPOINT_URL"; fi
if [ -z "${AWS_DEFAULT_REGION:-}" ] && [ -n "${CLOUD_REGION:-}" ]; then export AWS_DEFAULT_REGION="$CLOUD_REGION"; fi

# Run the command as a child so a TERM from `kubectl tao cancel` reaches it, and its status is kept; through
# stall_watch when stall-watch.sh was prepended (--stall-timeout: a stall exits with its own code, the upload
# still runs).
if command -v stall_watch >/dev/null 2>&1; then
    stall_watch sh -c "$command_text" tao &
else
    sh -c "$command_text" tao &
fi
child=$!
trap 'kill -TERM "$child" 2>/dev/null || :' TERM INT HUP
status=0
wait "$child" || status=$?
while kill -0 "$child" 2>/dev/null; do
    status=0
    wait "$child" || status=$?
done
trap - TERM INT HUP

for pattern in "$@"; do
    set -- "$@" --exclude "$pattern"
    shift
done

aws_cli=""
if command -v aws >/dev/null 2>&1; then
    aws_cli=aws
elif command -v python3 >/dev/null 2>&1 && python3 -c 'import awscli' >/dev/null 2>&1; then
    aws_cli=python3
else
    for candidate in "$tools/aws-cli/dist/aws" "$tools/aws-cli/bin/aws"; do
        if [ -x "$candidate" ]; then
            aws_cli=$candidate
            break
        fi
    done
fi

echo "kubectl-tao: command exited $status; uploading $results/ to $destination"
upload=0
if [ -z "$aws_cli" ]; then
    echo "kubectl-tao: no aws CLI in this image and none left by fetch-inputs: the image needs \`aws\` (AWS CLI v1 or v2) on PATH or Python's awscli module" >&2
    upload=1
elif [ "$aws_cli" = python3 ]; then
    python3 -m awscli s3 cp --recursive --only-show-errors --exclude '.tao/*' "$@" "$results/" "$destination" || upload=$?
else
    "$aws_cli" s3 cp --recursive --only-show-errors --exclude '.tao/*' "$@" "$results/" "$destination" || upload=$?
fi

if [ "$upload" -ne 0 ]; then
    echo "kubectl-tao: upload of $results/ to $destination failed (exit $upload)" >&2
    if [ "$status" -eq 0 ]; then
        exit "$exit_upload_failed"
    fi
fi
exit "$status"
