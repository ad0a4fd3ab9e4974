#!/usr/bin/env bash
# Sourced by scripts/local-cluster: health checks of the running cluster and the status table
# Needs from the caller: dir, kubeconfig, components, k8s_bin, die, note, kctl, alive, rss_mib.
# Sourced into a shell that runs with set -euo pipefail (scripts/local-cluster).
# shellcheck disable=SC2154 # the variables above are set by scripts/local-cluster

# ---------------------------------------------------------------------------------------------
# health

port() { # NAME -> port recorded by up
  awk -F= -v k="$1" '$1 == k {print $2}' "$dir/ports.env" 2>/dev/null
}

https_ok() { # URL -> 0 if it answers "ok" (client cert of the admin)
  local body
  body=$(curl -fsS --max-time 2 --cacert "$dir/pki/ca.crt" --cert "$dir/pki/admin.crt" --key "$dir/pki/admin.key" \
    "$1" 2>/dev/null) || return 1
  grep -qx ok <<<"$body"
}

insecure_ok() { # URL -> 0 if it answers "ok" (self-signed serving cert, health paths are public)
  local body
  body=$(curl -fsSk --max-time 2 "$1" 2>/dev/null) || return 1
  grep -qx ok <<<"$body"
}

api_ready() { [ -f "$dir/ports.env" ] && https_ok "https://127.0.0.1:$(port APISERVER_PORT)/readyz"; }
etcd_ok() {
  local body
  body=$(curl -fsS --max-time 2 "http://127.0.0.1:$(port ETCD_PORT)/health" 2>/dev/null) || return 1
  grep -q '"health":"true"' <<<"$body"
}

wait_for() { # TIMEOUT_S DESCRIPTION COMMAND... ; fails with the description and the logs to look at
  local timeout=$1 what=$2
  shift 2
  local deadline=$(( $(date +%s) + timeout ))
  until "$@"; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
      die "timed out after ${timeout}s waiting for ${what}; logs: $dir/logs/"
    fi
    local c
    for c in "${watched[@]}"; do
      if [ -f "$dir/pids/$c.pid" ] && ! alive "$c"; then
        die "$c exited while waiting for ${what}: $(tail -n 3 "$dir/logs/$c.log" | tr '\n' ' ')"
      fi
    done
    sleep 0.25
  done
}

nodes_ready() { # the kwok nodes (real nodes: real_nodes_ready)
  local want=$(( gpu_nodes + cpu_nodes )) out
  out=$(kctl get nodes -l "!${real_taint_key}" -o 'jsonpath={range .items[*]}{.metadata.name}{" "}{.status.conditions[?(@.type=="Ready")].status}{" "}{.spec.taints[*].key}{"\n"}{end}' 2>/dev/null) || return 1
  [ "$(grep -c ' True' <<<"$out")" -ge "$want" ] && ! grep -q 'node.kubernetes.io/not-ready' <<<"$out"
}

default_sa() { kctl -n default get serviceaccount default -o name >/dev/null 2>&1; }

local_status() { # prints the table; returns 0 if all run and the API is ready
  local c pid ok=0 state
  if [ ! -d "$dir" ]; then
    echo "cluster: not running (no data directory $dir)"
    return 1
  fi
  echo "provider: local  data: $dir"
  for c in "${components[@]}"; do
    pid=$(pid_of "$c" || true)
    if [ -n "$pid" ] && ours "$pid"; then state="running (pid $pid)"; else state="stopped"; ok=1; fi
    printf '  %-24s %s\n' "$c" "$state"
  done
  real_status || ok=1
  if api_ready; then
    printf '  %-24s %s\n' "api /readyz" "ok (https://127.0.0.1:$(port APISERVER_PORT))"
  else
    printf '  %-24s %s\n' "api /readyz" "not ready"
    ok=1
  fi
  return "$ok"
}
