#!/bin/bash
# RoCEv2 and UET side by side (docs/src/uet.md): the same AllReduce, all-to-all and incast on
# rail-spine-400g (D 8000) with `qos.trim: on` added, once over RoCEv2 (lossless queue 3: PFC,
# WRED/ECN and DCQCN, flow ECMP) and once over UET (lossy queue 0, DSCP 26: trimming to strict
# queue 7, per-packet entropy through the same ECMP hash, the window CC). Trimming touches lossy
# queues only, so the RoCEv2 runs see the reference design unchanged.
#
# Prints one markdown table row per run: JCT (emulated), the model's expectation and the ratio,
# retransmissions (UET: on NACK / on timeout), PFC pause time received by the NICs, trims at the
# switches, out-of-order arrivals, and the bytes of rail1's two uplinks with their spread.
# Needs root, jq, curl and the binaries (`cargo build -p control -p dataplane-user -p host-daemons
# -p rocefab-web`; B=target/release for release ones). D sets the time dilation (default 32000:
# at 8000 the all-to-all is machine-bound on a 2-core machine and `rocefab run` says so). The
# fabric is taken down on exit.
set -eu
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
B="${B:-$ROOT/target/debug}"
T=$(mktemp -d)
FAB=rsuet
D="${D:-32000}"
trap '"$B/rocefab" down $FAB >/dev/null 2>&1 || true; rm -rf "$T"' EXIT
cd "$ROOT"
sed -e "s/^fabric: rs400$/fabric: $FAB/" -e "s/^time_dilation: 8000$/time_dilation: $D/" -e 's/^qos: .*$/&\n  trim: on                  # lossy queues trim (UET); RoCEv2 stays lossless/' \
    topologies/rail-spine-400g.yaml > "$T/topo.yaml"
grep -q '^  trim: on' "$T/topo.yaml" && grep -q "^time_dilation: $D$" "$T/topo.yaml" || { echo "rail-spine-400g.yaml changed shape" >&2; exit 1; }
"$B/rocefab" up "$T/topo.yaml" > "$T/up.log" 2>&1 || { cat "$T/up.log"; exit 1; }

# Sum over every switch of a counter family (all label sets).
total() {
    for s in rail1 rail2 spine1 spine2; do
        curl -s "http://$(jq -r .metrics_listen "/run/rocefab/$FAB/$s.json")/metrics" | grep "^$1{" || true
    done | awk '{s += $2} END {printf "%d", s}'
}
# rail1's uplink tx bytes, one per line.
uplinks() {
    local m
    m=$(curl -s "http://$(jq -r .metrics_listen "/run/rocefab/$FAB/rail1.json")/metrics")
    for p in $(jq -r '.ports[] | select(.peer | startswith("spine")) | .name' "/run/rocefab/$FAB/rail1.json"); do
        echo "$m" | grep "^rocefab_port_tx_bytes_total{" | grep "port=\"$p\"" | awk '{print $2}'
    done
}

echo "| job | transport | JCT | model | ratio | retransmitted | PFC pause (NICs) | trims | out of order | rail1 uplinks (MB) | spread |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for job in "allreduce 16MiB" "alltoall 16MiB" "incast 4MiB"; do
    set -- $job
    for t in rocev2 uet; do
        trims0=$(total rocefab_queue_trimmed_packets_total)
        up0=$(uplinks)
        "$B/rocefab" run $FAB "$1" --size "$2" --transport "$t" --json --timeout 600 > "$T/r.json"
        trims=$(( $(total rocefab_queue_trimmed_packets_total) - trims0 ))
        up1=$(uplinks)
        read -r u0 u1 <<< "$(paste <(echo "$up1") <(echo "$up0") | awk '{printf "%s ", $1 - $2}')"
        jq -r --arg t "$t" --arg job "$1 $2" --argjson trims "$trims" --argjson u0 "$u0" --argjson u1 "$u1" '
            def ms: . / 1e6 | tostring | .[0:6] + " ms";
            [ $job, $t,
              (.completion_ns | ms),
              (.expected.completion_ns | ms),
              ((.completion_ns / .expected.completion_ns * 100 | round / 100) | tostring),
              (if .uet then "\(.retransmitted_packets) (\(.uet.retransmitted_on_nack) NACK / \(.uet.retransmitted_on_timeout) timeout)" else "\(.retransmitted_packets)" end),
              ((.pfc_paused_ns / 1e6 * 1000 | round / 1000 | tostring) + " ms"),
              ($trims | tostring),
              (.out_of_order_packets | tostring),
              ("\($u0 / 1e6 * 10 | round / 10) / \($u1 / 1e6 * 10 | round / 10)"),
              ((($u0 - $u1) | fabs) / ([$u0, $u1] | max) * 1000 | round / 10 | tostring) + " %"
            ] | "| " + join(" | ") + " |"' "$T/r.json"
        w=$(jq -r '.warnings | length' "$T/r.json")
        [ "$w" = 0 ] || { echo "warning: the machine limited the $t $1 run: $(jq -c .warnings "$T/r.json")" >&2; }
    done
done
