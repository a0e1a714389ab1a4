#!/usr/bin/env bash
# On the device-tool machine: wait up to SECONDS while PATTERN's processes run, copying the small
# files of /tmp/runs and /tmp/res to $OUT every 20 s (what a killed call leaves there comes back).
#   bash scripts/device/watch.sh SECONDS [PATTERN]
END=$(( $(date +%s) + ${1:?seconds} ))
PATTERN="${2:-compression_experiment}"
snap() {
  tar czf "$OUT/runs_small.tgz" -C /tmp --exclude=checkpoints --exclude='export*' runs res 2>/dev/null
  cp /tmp/res/*.json "$OUT/" 2>/dev/null || true
}
while [ "$(date +%s)" -lt "$END" ] && pgrep -f "$PATTERN" >/dev/null; do snap; sleep 20; done
snap
for f in /tmp/runs/*/*/progress.jsonl; do [ -f "$f" ] && { echo "== $f"; tail -n 1 "$f"; }; done
grep -h -A3 "^model " /tmp/res/*.log 2>/dev/null || true
