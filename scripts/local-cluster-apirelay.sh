#!/usr/bin/env bash
# Sourced by scripts/local-cluster-realnodes.sh: how the real nodes' pods reach the API server, as pods of any
# cluster do, at the `kubernetes` Service's ClusterIP (KUBERNETES_SERVICE_HOST:KUBERNETES_SERVICE_PORT in every
# pod). The API server listens on 127.0.0.1 only and there is no kube-proxy, so `up` adds three things, and
# `down` removes them:
# - a relay (cluster/apirelay/relay.py) listening on the bridge gateway, on a free port of its own, copying each
#   connection to the API server on 127.0.0.1 (TLS passes through: pods check the API server's own certificate,
#   whose SANs carry the ClusterIP);
# - one iptables nat chain, entered from PREROUTING for packets from the bridge to the ClusterIP: TCP to the
#   Service port goes to the relay, anything else to the bridge gateway itself, where nothing serves it (so no
#   packet for the ClusterIP is ever routed on, whatever the host's forwarding setting);
# - a route to the ClusterIP via the bridge gateway in each pod (the CNI config's ipam routes: api_relay_routes).
# Needs from the caller: dir, repo, real_bridge, real_gw, kctl, port, start, ours, alive, pid_of, terminate,
# wait_for, die, note, now_ns, since.
# shellcheck disable=SC2154 # the variables above are set by scripts/local-cluster
set -euo pipefail # as in scripts/local-cluster (a no-op there)

api_relay_chain=KUBECTL-TAO-API

api_relay_file() { echo "$dir/real/api-relay.env"; } # what up set up: CLUSTER_IP, SERVICE_PORT, RELAY_PORT
api_relay_value() { # NAME -> its value in the file up wrote (empty if none)
  sed -n "s/^$1=//p" "$(api_relay_file)" 2>/dev/null || true
}

ipt() { iptables -w 5 "$@"; }

api_relay_jump() { # CLUSTER_IP -> the PREROUTING rule's match and target, as -A/-C/-D take them
  printf '%s\n' -i "$real_bridge" -d "$1/32" -j "$api_relay_chain"
}

api_relay_preflight() { # before anything starts
  command -v iptables >/dev/null 2>&1 ||
    die "real nodes need 'iptables' (the nat rule that sends pods' API server traffic to the relay); install it with: scripts/install-cluster-deps (or set KUBECTL_TAO_REAL_NODES=0)"
  local out
  out=$(ipt -t nat -S PREROUTING 2>&1) ||
    die "real nodes need iptables' nat table (the pods' route to the API server), and 'iptables -t nat -S PREROUTING' failed: ${out%%$'\n'*}"
  if ipt -t nat -S "$api_relay_chain" >/dev/null 2>&1; then
    die "the iptables nat chain $api_relay_chain already exists: another local cluster with real nodes runs (stop it with its own 'local-cluster down'), or remove it: iptables -t nat -S PREROUTING | grep $api_relay_chain, delete that rule with -D, then iptables -t nat -F $api_relay_chain; iptables -t nat -X $api_relay_chain"
  fi
}

api_relay_service() { # -> "CLUSTER_IP PORT" of the `kubernetes` Service, once the API server has made it
  kctl -n default get service kubernetes -o 'jsonpath={.spec.clusterIP} {.spec.ports[?(@.name=="https")].port}' 2>/dev/null
}

api_relay_service_ready() {
  local svc
  svc=$(api_relay_service) || return 1
  [[ $svc =~ ^[0-9]+(\.[0-9]+){3}\ [0-9]+$ ]]
}

api_relay_listening() { # the relay wrote its port, and answers TLS there with the API server's certificate for the ClusterIP
  local relay_port ip svc_port answer
  relay_port=$(cat "$dir/real/api-relay.port" 2>/dev/null) || { api_relay_exited; return 1; }
  ip=$1 svc_port=$2
  answer=$(curl -fsS --max-time 2 --cacert "$dir/pki/ca.crt" --cert "$dir/pki/admin.crt" --key "$dir/pki/admin.key" \
    --connect-to "$ip:$svc_port:$real_gw:$relay_port" "https://$ip:$svc_port/readyz" 2>/dev/null) || { api_relay_exited; return 1; }
  grep -qx ok <<<"$answer"
}

api_relay_exited() { # while waiting: dies at once (with its log's last lines) when the relay has exited
  alive api-relay || die "the API server relay exited while starting: $(tail -n 3 "$dir/logs/api-relay.log" | tr '\n' ' ')"
  return 1
}

api_relay_up() { # after the bridge exists and the API server is ready: relay, then the nat chain
  local t0 svc ip svc_port relay_port
  t0=$(now_ns)
  wait_for 30 "the kubernetes Service" api_relay_service_ready
  svc=$(api_relay_service)
  ip=${svc% *} svc_port=${svc#* }
  start api-relay python3 "$repo/cluster/apirelay/relay.py" --listen "$real_gw:0" \
    --to "127.0.0.1:$(port APISERVER_PORT)" --port-file "$dir/real/api-relay.port"
  wait_for 30 "the API server relay on $real_gw" api_relay_listening "$ip" "$svc_port"
  relay_port=$(cat "$dir/real/api-relay.port")
  printf '%s\n' "CLUSTER_IP=$ip" "SERVICE_PORT=$svc_port" "RELAY_PORT=$relay_port" >"$(api_relay_file)"
  local jump
  mapfile -t jump < <(api_relay_jump "$ip")
  ipt -t nat -N "$api_relay_chain"
  ipt -t nat -A "$api_relay_chain" -p tcp --dport "$svc_port" -j DNAT --to-destination "$real_gw:$relay_port"
  ipt -t nat -A "$api_relay_chain" -j DNAT --to-destination "$real_gw"
  ipt -t nat -A PREROUTING "${jump[@]}"
  note "API server for pods: $ip:$svc_port -> relay on $real_gw:$relay_port -> 127.0.0.1:$(port APISERVER_PORT) (iptables nat chain $api_relay_chain) in $(since "$t0")s"
}

api_relay_routes() { # the CNI ipam routes of a pod: the ClusterIP via the bridge gateway (none without a relay)
  local ip
  ip=$(api_relay_value CLUSTER_IP)
  [ -n "$ip" ] || { echo '[]'; return 0; }
  echo "[{\"dst\": \"$ip/32\", \"gw\": \"$real_gw\"}]"
}

api_relay_stop() { # the nat chain and its jump, then the relay; only what up recorded
  local ip jump
  ip=$(api_relay_value CLUSTER_IP)
  if [ -n "$ip" ]; then
    mapfile -t jump < <(api_relay_jump "$ip")
    while ipt -t nat -C PREROUTING "${jump[@]}" 2>/dev/null; do
      ipt -t nat -D PREROUTING "${jump[@]}" || break
    done
    if ipt -t nat -S "$api_relay_chain" >/dev/null 2>&1; then
      { ipt -t nat -F "$api_relay_chain" && ipt -t nat -X "$api_relay_chain"; } ||
        echo "local-cluster: could not remove the iptables nat chain $api_relay_chain" >&2
    fi
    rm -f "$(api_relay_file)"
  fi
  terminate 5 api-relay
}

api_relay_rules_present() { # the chain holds both DNAT rules and PREROUTING jumps to it
  local ip relay_port svc_port rules jump
  ip=$(api_relay_value CLUSTER_IP) svc_port=$(api_relay_value SERVICE_PORT) relay_port=$(api_relay_value RELAY_PORT)
  rules=$(ipt -t nat -S "$api_relay_chain" 2>/dev/null) || return 1
  grep -qF -- "--dport $svc_port -j DNAT --to-destination $real_gw:$relay_port" <<<"$rules" || return 1
  mapfile -t jump < <(api_relay_jump "$ip")
  ipt -t nat -C PREROUTING "${jump[@]}" 2>/dev/null
}

api_relay_status() { # prints its rows; returns 1 if up started it and it does not run (or its rule is gone)
  [ -f "$dir/pids/api-relay.pid" ] || return 0
  local pid state ok=0 ip svc_port relay_port
  ip=$(api_relay_value CLUSTER_IP) svc_port=$(api_relay_value SERVICE_PORT) relay_port=$(api_relay_value RELAY_PORT)
  pid=$(pid_of api-relay || true)
  if [ -n "$pid" ] && ours "$pid"; then
    state="running (pid $pid) on $real_gw:${relay_port:-?} -> 127.0.0.1:$(port APISERVER_PORT)"
  else
    state="stopped"
    ok=1
  fi
  printf '  %-24s %s\n' "api relay" "$state"
  if [ -n "$ip" ] && api_relay_rules_present; then
    echo "  api relay: pods reach the API server at $ip:$svc_port (iptables nat chain $api_relay_chain sends it to the relay)"
  else
    echo "  api relay: the iptables nat chain $api_relay_chain is missing: pods cannot reach the API server"
    ok=1
  fi
  return "$ok"
}
