#!/bin/sh
# kubectl-tao storage tier C, init container: fetch S3 inputs into the shared emptyDir. POSIX sh.
#
# Called as: sh -c "<this script>" fetch-inputs URI...
# A URI ending in '/' is a prefix, copied recursively to $TAO_WORKSPACE/inputs/<last segment>/;
# any other URI is one object, copied to $TAO_WORKSPACE/inputs/<last segment>.
# Credentials come from the pod's environment (the job's Secret), never from arguments.
# The GPU is already reserved while this runs: keep tier C inputs small.
set -eu

ws=${TAO_WORKSPACE:?TAO_WORKSPACE is not set}
inputs="$ws/inputs"
tools="$ws/.kubectl-tao"
mkdir -p "$inputs" "$ws/results" "$tools"

# Names used by older TAO tooling.
if [ -z "${AWS_ACCESS_KEY_ID:-}" ] && [ -n "${ACCESS_KEY:-}" ]; then export AWS_ACCESS_KEY_ID="$ACCESS_KEY"; fi
if [ -z "${AWS_SECRET_ACCESS_KEY:-}" ] && [ -n "${SECRET_KEY:-}" ]; then export AWS_SECRET_ACCESS_KEY="$SECRET_KEY"; fi
if [ -z "${AWS_ENDPOINT_URL:-}" ] && [ -n "${S3_ENDPOINT_URL:-}" ]; then export AWS_ENDPOINT_URL="$S3_ENDPOINT_URL"; fi
if [ -z "${AWS_DEFAULT_REGION:-}" ] && [ -n "${CLOUD_REGION:-}" ]; then export AWS_DEFAULT_REGION="$CLOUD_REGION"; fi

# The training image may have no aws CLI: leave this image's self-contained bundle on the shared
# volume for the upload step (it needs a glibc-based training image).
if [ -d /usr/local/aws-cli/v2/current ] && [ ! -e "$tools/aws-cli" ]; then
    cp -R "$(readlink -f /usr/local/aws-cli/v2/current)" "$tools/aws-cli"
fi

for uri in "$@"; do
    case "$uri" in
        */)
            name=${uri%/}
            name=${name##*/}
            echo "kubectl-tao: fetching $uri -> $inputs/$name/"
            aws s3 cp --recursive --only-show-errors "$uri" "$inputs/$name/"
            ;;
        *)
            name=${uri##*/}
            echo "kubectl-tao: fetching $uri -> $inputs/$name"
            aws s3 cp --only-show-errors "$uri" "$inputs/$name"
            ;;
    esac
done
echo "kubectl-tao: fetched $# input(s) into $inputs"
